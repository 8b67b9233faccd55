import Distributed
import Oscar
import OscarTestSupport
import Synchronization
import Testing

/// Live activations per identity and node.
final class ActivationCensus: Sendable {
    private let live = Mutex<[String: [Int: Int]]>([:])
    func activated(_ key: String, on port: Int) { live.withLock { $0[key, default: [:]][port, default: 0] += 1 } }
    func deactivated(_ key: String, on port: Int) { live.withLock { $0[key]?[port, default: 0] -= 1 } }
    /// Activations of `key` alive on the nodes listening on `ports`.
    func count(_ key: String, on ports: [Int]) -> Int {
        live.withLock { l in ports.reduce(0) { $0 + (l[key]?[$1] ?? 0) } }
    }
}

struct Deposited: Codable, Sendable {
    var balance: Int
    var node: Int
}

distributed actor Account {
    typealias ActorSystem = ClusterSystem
    nonisolated var unownedExecutor: UnownedSerialExecutor { actorSystem.executor(for: id) }

    let key: String
    let port: Int
    let census: ActivationCensus
    private var balance = 0

    init(actorSystem: ClusterSystem, key: String, census: ActivationCensus) {
        self.actorSystem = actorSystem
        self.key = key
        self.port = actorSystem.node.address.port
        self.census = census
        census.activated(key, on: port)
    }

    deinit { census.deactivated(key, on: port) }

    distributed func deposit(_ amount: Int) -> Deposited {
        balance += amount
        return Deposited(balance: balance, node: port)
    }
}

@Suite(.serialized, .timeLimit(.minutes(8))) struct VirtualActorTests {
    static func member(seeds: [NodeAddress] = [], census: ActivationCensus) throws -> ClusterSystem {
        let node = try ClusterNode(
            settings: .init(
                secret: "a-long-cluster-secret", loopCount: 2, seeds: seeds, membershipTick: .milliseconds(200)))
        let system = ClusterSystem(node: node)
        try system.registerVirtual(Account.self, kind: "account") { system, key in
            Account(actorSystem: system, key: key, census: census)
        }
        return system
    }

    /// Every system sees `count` members up and places every key alike.
    static func settled(_ systems: [ClusterSystem], count: Int, keys: [String]) async -> Bool {
        await eventually(timeout: .seconds(20)) {
            for s in systems {
                let view = try? await s.node.membership()
                guard view?.members.filter({ $0.status == .up }).count == count, view?.unreachable.isEmpty == true
                else { return false }
            }
            return keys.allSatisfy { key in Set(systems.map { $0.placement(kind: "account", key: key) }).count == 1 }
        }
    }

    /// Deposits 1 to each key from every system; the node that answered each.
    static func depositEverywhere(_ systems: [ClusterSystem], keys: [String]) async throws -> [String: Set<Int>] {
        var answered: [String: Set<Int>] = [:]
        for key in keys {
            for s in systems {
                let d = try await s.virtualActor(Account.self, id: key).deposit(1)
                answered[key, default: []].insert(d.node)
            }
        }
        return answered
    }

    static func oneEach(_ keys: [String], _ census: ActivationCensus, _ ports: [Int]) async -> Bool {
        await eventually { keys.allSatisfy { census.count($0, on: ports) == 1 } }
    }

    @Test func oneActivationPerIdentityAcrossAJoinAndAKill() async throws {
        let census = ActivationCensus()
        // 40 keys: the chance that none lands on a fourth node is (3/4)^40, about 1e-5.
        let keys = (0..<40).map { "user-\($0)" }
        let a = try Self.member(census: census)
        let b = try Self.member(seeds: [a.node.address], census: census)
        let c = try Self.member(seeds: [a.node.address], census: census)
        var systems = [a, b, c]
        defer { systems.forEach { $0.shutdown() } }
        #expect(await Self.settled(systems, count: 3, keys: keys))

        // Calls from every node reach one activation per key, which keeps its state.
        var answered = try await Self.depositEverywhere(systems, keys: keys)
        #expect(answered.values.allSatisfy { $0.count == 1 }, "\(answered)")
        #expect(try await b.virtualActor(Account.self, id: "user-0").deposit(0).balance == 3)
        var ports = systems.map(\.node.address.port)
        #expect(keys.allSatisfy { census.count($0, on: ports) == 1 })

        // A fourth node joins: some keys move to it, and their old
        // activations are deactivated.
        let d = try Self.member(seeds: [a.node.address], census: census)
        systems.append(d)
        ports.append(d.node.address.port)
        #expect(await Self.settled(systems, count: 4, keys: keys))
        answered = try await Self.depositEverywhere(systems, keys: keys)
        #expect(answered.values.allSatisfy { $0.count == 1 }, "\(answered)")
        #expect(answered.values.contains { $0 == [d.node.address.port] }, "some key moved to the new node")
        #expect(await Self.oneEach(keys, census, ports), "one activation per key")

        // The node hosting user-0 is killed: the key is activated elsewhere, once.
        let host = try #require(systems.first { $0.node.address.port == answered["user-0"]?.first })
        host.shutdown()
        systems.removeAll { $0 === host }
        ports.removeAll { $0 == host.node.address.port }
        #expect(await Self.settled(systems, count: 3, keys: keys))
        answered = try await Self.depositEverywhere(systems, keys: keys)
        #expect(answered.values.allSatisfy { $0.count == 1 }, "\(answered)")
        #expect(answered["user-0"] != [host.node.address.port])
        #expect(await Self.oneEach(keys, census, ports), "one activation per key")
    }

    @Test func anIdleActivationIsDeactivated() async throws {
        let census = ActivationCensus()
        let node = try ClusterNode(settings: .init(secret: "a-long-cluster-secret", loopCount: 1))
        let system = ClusterSystem(node: node)
        defer { system.shutdown() }
        try system.registerVirtual(Account.self, kind: "account", idleTimeout: .milliseconds(300)) { s, key in
            Account(actorSystem: s, key: key, census: census)
        }
        // Outside a cluster, every key is placed on this node.
        #expect(try await system.virtualActor(Account.self, id: "solo").deposit(5).balance == 5)
        #expect(system.activations(kind: "account") == ["solo"])
        #expect(await eventually { census.count("solo", on: [node.address.port]) == 0 }, "deactivated when idle")
        #expect(try await system.virtualActor(Account.self, id: "solo").deposit(1).balance == 1, "a fresh activation")
    }
}
