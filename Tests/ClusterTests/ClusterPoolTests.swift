import Foundation
import Oscar
import OscarTestKit
import OscarTestSupport
import Synchronization
import Testing

@testable import OscarCluster

struct Work: Message {
    typealias Reply = Worked
    var id: Int
}

struct IdempotentWork: IdempotentMessage {
    typealias Reply = Worked
    var id: Int
}

struct Keyed: Message {
    typealias Reply = Worked
    var key: String
}

struct Worked: Codable, Sendable, Equatable {
    var id: Int
    var port: Int
    var path: String
}

/// A routee: answers with where it runs. On a node given a gate, work waits
/// on it (and is counted), so a test can hold asks in flight there.
final class PoolWorker: Reactor {
    var port = 0
    var path = ""
    let gate: Gate?
    let started: Tally?

    init(gate: Gate?, started: Tally?) {
        self.gate = gate
        self.started = started
    }

    /// Where it runs, read once: work held past its node's shutdown must
    /// not reach for the (freed) system.
    func started(_ context: ActorContext) {
        port = context.node.port
        path = context.ref.address.path
    }

    func worked(_ id: Int) -> Worked { Worked(id: id, port: port, path: path) }

    static func reactions(_ r: inout Reactions<PoolWorker>) {
        r.on(
            Work.self,
            future: { me, m in
                me.started?.increment()
                await me.gate?.wait()
                return me.worked(m.id)
            })
        r.on(
            IdempotentWork.self,
            future: { me, m in
                me.started?.increment()
                await me.gate?.wait()
                return me.worked(m.id)
            })
        r.on(Keyed.self, result: { me, _ in me.worked(0) })
    }
}

/// Cluster pools on 3–4 nodes in one process, over real sockets.
@Suite(.serialized, .timeLimit(.minutes(8))) struct ClusterPoolTests {
    static func node(
        seeds: [NodeAddress] = [], _ settings: ClusterPoolSettings = ClusterPoolSettings(), gate: Gate? = nil,
        started: Tally? = nil
    ) throws -> ClusterNode {
        try ClusterNode(
            settings: .init(
                secret: "a-long-cluster-secret", loopCount: 2, seeds: seeds, membershipTick: .milliseconds(200))
        ) { actors in
            actors.clusterPool("workers", settings) { PoolWorker(gate: gate, started: started) }
        }
    }

    static func router(_ node: ClusterNode) -> ClusterPoolRouter {
        node.system.clusterPools.first!
    }

    /// Waits until `node`'s pool routes to `count` nodes.
    static func routesTo(_ node: ClusterNode, nodes count: Int) async -> Bool {
        await eventually(timeout: .seconds(15)) {
            Set(router(node).routees.map(\.node.port)).count == count
        }
    }

    @Test func aThousandLeastBusyAsksSpreadOverEveryNode() async throws {
        let a = try Self.node()
        let b = try Self.node(seeds: [a.address])
        let c = try Self.node(seeds: [a.address])
        defer { [c, b, a].forEach { $0.shutdown() } }
        #expect(await Self.routesTo(a, nodes: 3))
        let pool = a.system.ref("oscar://127.0.0.1:\(a.address.port)/user/workers")!
        let ports = Record<Int>()
        // 1,000 asks, 24 at a time: more than this node's routees can take.
        await withTaskGroup(of: Void.self) { group in
            for lane in 0..<24 {
                group.addTask {
                    for i in stride(from: lane, to: 1_000, by: 24) {
                        if let r = try? await pool.ask(Work(id: i)) { ports.append(r.port) }
                    }
                }
            }
        }
        #expect(ports.all.count == 1_000, "every ask answered")
        #expect(Set(ports.all) == Set([a, b, c].map(\.address.port)), "spread over every node")
        // The pool's ref is the same from another node: an ask through b's
        // view of a's pool routes too.
        let viaB = try await b.system.ref("oscar://127.0.0.1:\(a.address.port)/user/workers")!.ask(Work(id: 7))
        #expect(viaB.id == 7)
        #expect(Self.router(a).asksInFlight.isEmpty, "\(Self.router(a).asksInFlight)")
    }

    @Test func consistentHashIsStableAndMovesAboutAQuarterWhenAFourthNodeJoins() async throws {
        let settings = ClusterPoolSettings(perNode: 2, routing: .consistentHash(key: { ($0 as? Keyed)?.key }))
        let a = try Self.node(settings)
        let b = try Self.node(seeds: [a.address], settings)
        let c = try Self.node(seeds: [a.address], settings)
        defer { [c, b, a].forEach { $0.shutdown() } }
        #expect(await Self.routesTo(a, nodes: 3))
        let pool = a.system.ref("oscar://127.0.0.1:\(a.address.port)/user/workers")!
        let keys = (0..<400).map { "user-\($0)" }
        func mapping() async throws -> [String: String] {
            var out: [String: String] = [:]
            for key in keys {
                let r = try await pool.ask(Keyed(key: key))
                out[key] = "\(r.port)\(r.path)"
            }
            return out
        }
        let first = try await mapping()
        #expect(Set(first.values).count == 6, "every routee gets keys")
        #expect(try await mapping() == first, "stable while membership is")
        let d = try Self.node(seeds: [a.address], settings)
        defer { d.shutdown() }
        #expect(await Self.routesTo(a, nodes: 4))
        let second = try await mapping()
        let moved = keys.filter { first[$0] != second[$0] }
        let fraction = Double(moved.count) / Double(keys.count)
        #expect(fraction > 0.1 && fraction < 0.45, "moved \(fraction) of keys; about 1/4 expected")
        #expect(
            moved.allSatisfy { second[$0]!.hasPrefix("\(d.address.port)") }, "keys move only to the new node")
    }

    /// A node is killed while asks wait on it: its routees leave the routing,
    /// every ask gets an outcome, and idempotent ones are retried elsewhere.
    @Test func killingANodeFailsOrRetriesItsAsksAndDropsItsRoutees() async throws {
        let gate = Gate()
        // Work still waiting on the (shut down) victim finishes at the end,
        // so its actors and loops are freed.
        defer { gate.open() }
        let started = Tally()
        let settings = ClusterPoolSettings(routing: .roundRobin)
        let a = try Self.node(settings)
        let b = try Self.node(seeds: [a.address], settings)
        let victim = try Self.node(seeds: [a.address], settings, gate: gate, started: started)
        defer { [b, a].forEach { $0.shutdown() } }
        #expect(await Self.routesTo(a, nodes: 3))
        let pool = a.system.ref("oscar://127.0.0.1:\(a.address.port)/user/workers")!
        // Round robin over 6 routees: any 6 asks put exactly 2 on the victim.
        func ask(_ i: Int) -> Task<Result<Worked, AskError>, Never> {
            Task {
                do throws(AskError) {
                    return .success(
                        i < 6
                            ? try await pool.ask(IdempotentWork(id: i), timeout: .seconds(20))
                            : try await pool.ask(Work(id: i), timeout: .seconds(20)))
                } catch { return .failure(error) }
            }
        }
        let idempotent = (0..<6).map(ask)
        #expect(await eventually(timeout: .seconds(10)) { started.count == 2 }, "2 idempotent asks wait on the victim")
        let plain = (6..<12).map(ask)
        let victimPort = victim.address.port
        let queued = await eventually(timeout: .seconds(10)) {
            Self.router(a).asksInFlight.filter { $0.key.node.port == victimPort }.values.reduce(0, +) == 4
        }
        #expect(queued, "2 plain asks queue behind them")
        victim.shutdown()  // like a kill: no leave
        var retried: [Worked] = []
        for t in idempotent {
            guard case .success(let w) = await t.value else {
                Issue.record("an idempotent ask failed: \(await t.value)")
                continue
            }
            retried.append(w)
        }
        #expect(retried.count == 6 && retried.allSatisfy { $0.port != victimPort }, "retried on survivors")
        var failures = 0
        for t in plain {
            switch await t.value {
            case .success(let w): #expect(w.port != victimPort)
            case .failure(.nodeUnreachable): failures += 1
            case .failure(let e): Issue.record("expected nodeUnreachable, got \(e)")
            }
        }
        #expect(failures == 2, "the 2 plain asks on the victim fail with nodeUnreachable")
        // The victim's routees leave the routing within the detection bound.
        let dropped = await eventually(timeout: .seconds(10)) {
            !Self.router(a).routees.contains { $0.node.port == victimPort }
        }
        #expect(dropped)
        let after = try await pool.ask(Work(id: 99))
        #expect(after.port != victimPort)
    }
}

/// The receptionist on 3 nodes over real sockets.
@Suite(.serialized, .timeLimit(.minutes(8))) struct ReceptionistTests {
    static let key = ReceptionistKey<Work>("work")

    @Test func listingsConvergeAndLoseStoppedActorsAndRemovedNodes() async throws {
        let nodes = try [ClusterPoolTests.node()].flatMap { a in
            [a, try ClusterPoolTests.node(seeds: [a.address]), try ClusterPoolTests.node(seeds: [a.address])]
        }
        let (a, b, c) = (nodes[0], nodes[1], nodes[2])
        defer { [b, a].forEach { $0.shutdown() } }
        #expect(await ClusterPoolTests.routesTo(a, nodes: 3))
        var listing = a.receptionist.listing(Self.key).makeAsyncIterator()
        #expect(await listing.next() == [], "a subscriber first gets the listing as it is")
        let actors = try nodes.map { node in
            let actor = try node.system.spawn("checked-in") { PoolWorker(gate: nil, started: nil) }
            node.receptionist.register(actor, as: Self.key)
            return actor
        }
        let converged = await eventually(timeout: .seconds(10)) {
            nodes.allSatisfy { Set($0.receptionist.lookup(Self.key).map(\.address)) == Set(actors.map(\.address)) }
        }
        #expect(converged, "every node lists the 3 actors")
        // A listed ref works from another node.
        let remote = try #require(a.receptionist.lookup(Self.key).first { $0.address.node.port == c.address.port })
        #expect(try await remote.ask(Work(id: 3)).port == c.address.port)
        // The subscriber saw the listing grow to 3.
        var seen: Set<ActorRef> = []
        while seen.count < 3, let next = await listing.next() { seen = next }
        #expect(seen.count == 3)
        // A stopped actor leaves every listing.
        b.system.stop(actors[1])
        let stopped = await eventually(timeout: .seconds(10)) {
            [a, c].allSatisfy { !$0.receptionist.lookup(Self.key).contains { $0.address == actors[1].address } }
        }
        #expect(stopped)
        // A removed node's actors leave too.
        c.shutdown()
        let removed = await eventually(timeout: .seconds(20)) {
            a.receptionist.lookup(Self.key).map(\.address) == [actors[0].address]
        }
        #expect(removed, "\(a.receptionist.lookup(Self.key))")
    }
}

struct WhereAreYou: Message {
    typealias Reply = Int
}

/// Counts running instances across the nodes of one process: the
/// "never twice" check. It keeps a history (starts, stops and each node's
/// membership events) that a failed check prints.
final class SingletonCensus: Sendable {
    private let state = Mutex((running: 0, most: 0, starts: 0, history: [String]()))
    private let clock = ContinuousClock()
    private let origin = ContinuousClock.now
    func start(on port: Int) {
        state.withLock {
            $0.running += 1; $0.most = max($0.most, $0.running); $0.starts += 1
        }
        note("\(port) starts the instance")
    }
    func stop(on port: Int) {
        state.withLock { $0.running -= 1 }
        note("\(port) stops the instance")
    }
    func note(_ line: String) {
        let at = (clock.now - origin).inSeconds
        state.withLock { $0.history.append("\(Int(at * 1000)) ms: \(line)") }
    }
    /// Records `node`'s membership events until it stops.
    func follow(_ node: ClusterNode) -> Task<Void, Never> {
        let (events, port) = (node.events, node.address.port)
        return Task { for await event in events { self.note("\(port) sees \(event)") } }
    }
    var most: Int { state.withLock { $0.most } }
    var running: Int { state.withLock { $0.running } }
    var starts: Int { state.withLock { $0.starts } }
    var history: String { state.withLock { $0.history.joined(separator: "\n") } }
}

final class CountedSingleton: Reactor {
    let census: SingletonCensus
    var port = 0
    init(census: SingletonCensus) { self.census = census }
    func started(_ context: ActorContext) {
        port = context.node.port
        census.start(on: port)
    }
    func stopped() { census.stop(on: port) }
    static func reactions(_ r: inout Reactions<CountedSingleton>) {
        r.on(WhereAreYou.self, result: { me, _ in me.port })
    }
}

/// The cluster singleton on 3 nodes over real sockets.
@Suite(.serialized, .timeLimit(.minutes(8))) struct ClusterSingletonTests {
    static func node(seeds: [NodeAddress] = [], census: SingletonCensus) throws -> ClusterNode {
        try ClusterNode(
            settings: .init(
                secret: "a-long-cluster-secret", loopCount: 2, seeds: seeds, membershipTick: .milliseconds(200))
        ) { $0.clusterSingleton("boss") { CountedSingleton(census: census) } }
    }

    /// Found by `oscar chaos`: a proxy that holds an ask sent from outside
    /// every loop armed its timeout on the wrong thread and crashed.
    @Test func anAskHeldByTheProxyFromOutsideTheLoopsTimesOut() async throws {
        let census = SingletonCensus()
        // Its only seed never answers: the node never joins, the proxy holds.
        let lonely = try Self.node(seeds: [NodeAddress(host: "127.0.0.1", port: 1)], census: census)
        defer { lonely.shutdown() }
        let proxy = lonely.system.ref("oscar://127.0.0.1:\(lonely.address.port)/user/boss")!
        await #expect(throws: AskError.self) { try await proxy.ask(WhereAreYou(), timeout: .milliseconds(300)) }
        #expect(census.starts == 0, "no instance without a cluster")
    }

    @Test func theSingletonMovesOnLeaveAndKillAndNeverRunsTwice() async throws {
        let census = SingletonCensus()
        let a = try Self.node(census: census)
        let others = try (0..<3).map { _ in try Self.node(seeds: [a.address], census: census) }
        defer { (others + [a]).forEach { $0.shutdown() } }
        let followers = (others + [a]).map(census.follow)
        defer { followers.forEach { $0.cancel() } }
        let fourUp = await eventually(timeout: .seconds(15)) {
            ((try? await others[2].membership())?.members ?? []).filter { $0.status == .up }.count == 4
        }
        #expect(fourUp)
        let proxyOn: @Sendable (ClusterNode) -> ActorRef = { n in
            n.system.ref("oscar://127.0.0.1:\(n.address.port)/user/boss")!
        }
        #expect(try await proxyOn(others[2]).ask(WhereAreYou(), timeout: .seconds(10)) == a.address.port)

        // The others by age, as placement reckons it: the singleton's next hosts.
        let members = try await others[2].membership().members
        let ranked = try others.map { x in (x, try #require(members.first { $0.uid == x.address.uid })) }
        let byAge = ranked.sorted { SingletonPlacement.isOlder($0.1, than: $1.1) }.map(\.0)
        let (second, third, last) = (byAge[0], byAge[1], byAge[2])

        // The oldest leaves gracefully: the singleton moves to the next
        // oldest. An ask sent during the hand-over is held and answered.
        a.leave()
        let during = try await proxyOn(last).ask(WhereAreYou(), timeout: .seconds(15))
        #expect(during == a.address.port || during == second.address.port)
        let moved = await eventually(timeout: .seconds(15)) {
            (try? await proxyOn(last).ask(WhereAreYou())) == second.address.port
        }
        #expect(moved, "moved to the next oldest after the leave")

        // That one is killed: once it is removed, the next oldest hosts it.
        // Removal takes detection, the 5 s stable window and the 8 s removal
        // margin (about 16 s); the bound leaves room for a loaded machine.
        second.shutdown()
        let movedAgain = await eventually(timeout: .seconds(45)) {
            (try? await proxyOn(last).ask(WhereAreYou(), timeout: .seconds(2))) == third.address.port
        }
        #expect(movedAgain, "moved to the next oldest after the kill")
        #expect(census.most == 1, "never two instances at once:\n\(census.history)")
        #expect(census.starts == 3, "one start per host:\n\(census.history)")
    }
}

struct Order: Message {
    var id: Int
}

/// Reliable delivery between two nodes over real sockets, with injected loss
/// in both directions and a blackhole.
@Suite(.serialized, .timeLimit(.minutes(8))) struct ReliableChannelTests {
    @Test func everyAcknowledgedMessageIsProcessedOnceInOrderThroughLossAndABlackhole() async throws {
        var settings = ClusterNode.Settings(
            secret: "a-long-cluster-secret", loopCount: 2, membershipTick: .milliseconds(200))
        settings.membership.downing = .manual  // the injected faults must not down anyone
        let (faultsA, faultsB) = (FaultGate(), FaultGate())
        var settingsA = settings
        settingsA.injectFaults(with: faultsA)
        let a = try ClusterNode(settings: settingsA)
        settings.seeds = [a.address]
        settings.injectFaults(with: faultsB)
        let b = try ClusterNode(settings: settings)
        defer { [b, a].forEach { $0.shutdown() } }
        let received = Record<Int>()
        let consumer = try ReliableConsumer<Order>.spawn(on: b.system, name: "orders") { received.append($0.id) }
        let remoteConsumer = a.system.ref("oscar://127.0.0.1:\(b.address.port)\(consumer.address.path)")!
        let producer = try ReliableProducer<Order>(
            on: a.system, name: "orders-producer", to: remoteConsumer, window: 16, resendInterval: .milliseconds(100))
        defer { producer.close() }
        faultsA.setLoss(0.3, seed: 7)
        faultsB.setLoss(0.3, seed: 8)
        for id in 0..<150 { try await producer.send(Order(id: id)) }
        faultsA.blackhole(b.address)  // a stretch where nothing gets through
        // The window fills and send waits: the producer's memory stays
        // bounded. Once it is full, the link comes back.
        let healer = Task {
            let full = await eventually(timeout: .seconds(20)) { producer.sent - producer.acknowledged == 16 }
            faultsA.restore(b.address)
            return full
        }
        for id in 150..<200 { try await producer.send(Order(id: id)) }
        #expect(await healer.value, "the window filled while the link was cut")
        #expect(await eventually(timeout: .seconds(60)) { producer.acknowledged == 200 })
        #expect(received.all == Array(0..<200), "exactly once, in order")
        #expect(faultsA.dropped > 0 && faultsB.dropped > 0, "the faults did drop frames")
    }
}
