import Foundation
import Oscar
import OscarTestSupport
import Testing

/// Membership over real sockets on 127.0.0.1, several nodes in one process.
@Suite(.timeLimit(.minutes(5))) struct MembershipTests {
    func clusterNode(seeds: [NodeAddress] = []) throws -> ClusterNode {
        try ClusterNode(
            settings: .init(
                secret: "a-long-cluster-secret", loopCount: 1, seeds: seeds, membershipTick: .milliseconds(200)))
    }

    func upCount(_ node: ClusterNode) async -> Int {
        ((try? await node.membership())?.members ?? []).filter { $0.status == .up }.count
    }

    @Test func threeNodesJoinThroughASeedAndAllSeeThreeUp() async throws {
        let seed = try clusterNode()
        let b = try clusterNode(seeds: [seed.address])
        let c = try clusterNode(seeds: [seed.address])
        defer { [c, b, seed].forEach { $0.shutdown() } }
        for node in [seed, b, c] {
            #expect(await eventually(timeout: .seconds(15)) { await upCount(node) == 3 })
        }
        // Every node agrees on the leader: the lowest address.
        let leaders = try await [seed, b, c].asyncMap { try await $0.membership().leader }
        #expect(Set(leaders.map { $0?.port }).count == 1)
        // One node's view can be asked from another.
        let remoteView = try await seed.membership(of: c.address)
        #expect(remoteView.observer.port == c.address.port)
    }

    /// Bind and advertised hosts differ (as in containers): the seed is
    /// known as "localhost", which the transport resolves like any name.
    @Test func aNodeAdvertisedUnderAHostNameIsJoinedAndAskedByThatName() async throws {
        var settings = ClusterNode.Settings(
            secret: "a-long-cluster-secret", loopCount: 1, membershipTick: .milliseconds(200))
        settings.advertisedHost = "localhost"
        let seed = try ClusterNode(settings: settings) { $0.nodeSingleton("ping") { PingActor() } }
        #expect(seed.address.host == "localhost")
        let b = try clusterNode(seeds: [NodeAddress(host: "localhost", port: seed.address.port)])
        defer { [b, seed].forEach { $0.shutdown() } }
        #expect(await eventually(timeout: .seconds(15)) { await upCount(b) == 2 })
        let pong = try await b.system.ref("oscar://localhost:\(seed.address.port)/user/ping")!.ask(Ping(n: 1))
        #expect(pong.n == 1 && pong.node == seed.address.port)
    }

    @Test func aGracefulLeaveEndsInRemoval() async throws {
        let seed = try clusterNode()
        let b = try clusterNode(seeds: [seed.address])
        let c = try clusterNode(seeds: [seed.address])
        defer { [c, b, seed].forEach { $0.shutdown() } }
        #expect(await eventually(timeout: .seconds(15)) { await upCount(seed) == 3 })
        let removed = Record<String>()
        c.onRemoved { removed.append($0) }
        let events = seed.events
        let sawUnreachable = Tally()
        let watcher = Task {
            for await event in events {
                if case .unreachable(let m) = event, m.node.port == c.address.port { sawUnreachable.increment() }
            }
        }
        c.leave()
        let left = await eventually(timeout: .seconds(15)) { removed.all.count == 1 }
        var views: [String] = []
        if !left {
            for n in [seed, b, c] { views.append((try? await n.membership(timeout: .seconds(1)))?.json ?? "no answer") }
        }
        #expect(left, "views: \(views.joined(separator: "\n"))")
        #expect(
            await eventually(timeout: .seconds(15)) {
                let members = (try? await seed.membership())?.members ?? []
                return members.count == 2 && !members.contains { $0.node.port == c.address.port }
            })
        #expect(sawUnreachable.count == 0)
        watcher.cancel()
    }
}

extension Array {
    func asyncMap<T>(_ body: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for e in self { out.append(try await body(e)) }
        return out
    }
}

struct WatchRemote: Message { var target: ActorRef }
struct TerminatedSeen: Message { typealias Reply = [String] }

final class RemoteWatcher: Reactor {
    var context: ActorContext?
    var seen: [String] = []
    func started(_ context: ActorContext) { self.context = context }
    static func reactions(_ r: inout Reactions<RemoteWatcher>) {
        r.on(WatchRemote.self, do: { me, m in me.context?.watch(m.target) })
        r.on(Terminated.self, do: { me, m in me.seen.append(m.actor.address.uri) })
        r.on(TerminatedSeen.self, result: { me, _ in me.seen })
    }
}

extension MembershipTests {
    @Test func watchingAnActorOnANodeThatIsRemovedDeliversTerminated() async throws {
        let seed = try clusterNode()
        let other = try clusterNode(seeds: [seed.address])
        defer { [other, seed].forEach { $0.shutdown() } }
        #expect(await eventually(timeout: .seconds(15)) { await upCount(seed) == 2 })
        let watcher = try seed.system.spawn("watcher") { RemoteWatcher() }
        try other.system.spawn("watched") { PingActor() }
        let remoteEcho = seed.system.ref("oscar://127.0.0.1:\(other.address.port)/user/watched")!
        _ = try await watcher.ask(WatchRemote(target: remoteEcho))
        _ = try await remoteEcho.ask(Ping(n: 1))  // the watch request went first on this connection
        #expect(try await watcher.ask(TerminatedSeen()).isEmpty)
        other.leave()
        #expect(
            await eventually(timeout: .seconds(15)) {
                (try? await watcher.ask(TerminatedSeen())) == [remoteEcho.address.uri]
            })
    }
}

extension MembershipTests {
    @Test func watchingARemoteActorThatStopsOnALiveNodeDeliversTerminatedOnce() async throws {
        let seed = try clusterNode()
        let other = try clusterNode(seeds: [seed.address])
        defer { [other, seed].forEach { $0.shutdown() } }
        #expect(await eventually(timeout: .seconds(15)) { await upCount(seed) == 2 })
        let watcher = try seed.system.spawn("watcher") { RemoteWatcher() }
        let watchedHere = try other.system.spawn("watched") { PingActor() }
        let watched = seed.system.ref("oscar://127.0.0.1:\(other.address.port)/user/watched")!
        let missing = seed.system.ref("oscar://127.0.0.1:\(other.address.port)/user/missing")!
        _ = try await watcher.ask(WatchRemote(target: watched))
        _ = try await watcher.ask(WatchRemote(target: missing))
        // No such actor there: Terminated at once.
        #expect(
            await eventually { (try? await watcher.ask(TerminatedSeen())) == [missing.address.uri] })
        other.system.stop(watchedHere)
        #expect(
            await eventually {
                (try? await watcher.ask(TerminatedSeen())) == [missing.address.uri, watched.address.uri]
            })
        // The node leaving later does not tell it again.
        other.leave()
        #expect(await eventually(timeout: .seconds(15)) { await upCount(seed) == 1 })
        #expect(try await watcher.ask(TerminatedSeen()) == [missing.address.uri, watched.address.uri])
    }

    /// One GET over a plain socket, off the cooperative pool.
    static func get(_ path: String, port: Int) async throws -> (status: Int, body: String) {
        try await offThePool {
            let peer = try RawPeer(port: port)
            peer.send(Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            var response: [UInt8] = []
            while let chunk = peer.read(1) { response += chunk }  // until the server closes
            let text = String(decoding: response, as: UTF8.self)
            let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
            let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
            return (status, body)
        }
    }

    @Test func theManagementEndpointServesMembersHealthAndMetrics() async throws {
        let seed = try ClusterNode(
            settings: .init(
                secret: "a-long-cluster-secret", loopCount: 1, membershipTick: .milliseconds(200), httpPort: 0))
        let b = try clusterNode(seeds: [seed.address])
        defer { [b, seed].forEach { $0.shutdown() } }
        let port = try #require(seed.managementPort)
        #expect(await eventually(timeout: .seconds(15)) { await upCount(seed) == 2 })
        // A little remote traffic, so the frame counters move.
        _ = try await seed.system.ref("oscar://127.0.0.1:\(b.address.port)/system/membership")?.ask(Identify())

        let members = try await Self.get("/members", port: port)
        #expect(members.status == 200)
        let json = try JSONSerialization.jsonObject(with: Data(members.body.utf8)) as? [String: Any]
        #expect((json?["members"] as? [[String: Any]])?.count == 2)

        let health = try await Self.get("/health", port: port)
        #expect(health.status == 200)
        #expect(health.body.contains("\"status\":\"up\""))

        let metrics = try await Self.get("/metrics", port: port)
        #expect(metrics.status == 200)
        #expect(metrics.body.contains("oscar_members{status=\"up\"} 2"))
        #expect(metrics.body.contains("oscar_asks_pending 0"))
        let framesIn = metrics.body.split(separator: "\n").first { $0.hasPrefix("oscar_frames_in_total ") }
        #expect((framesIn?.split(separator: " ").last.flatMap { Int($0) } ?? 0) > 0)

        let missing = try await Self.get("/nope", port: port)
        #expect(missing.status == 404)
    }
}

extension MembershipTests {
    @Test func anOperatorCanDownAMemberWhichIsRemovedAndStops() async throws {
        let seed = try clusterNode()
        let b = try clusterNode(seeds: [seed.address])
        let c = try clusterNode(seeds: [seed.address])
        defer { [c, b, seed].forEach { $0.shutdown() } }
        #expect(await eventually(timeout: .seconds(15)) { await upCount(seed) == 3 })
        let stopped = Record<String>()
        c.onRemoved { stopped.append($0) }
        #expect(try await b.down(NodeAddress(host: "127.0.0.1", port: c.address.port), via: seed.address))
        #expect(await eventually(timeout: .seconds(15)) { stopped.all.count == 1 })
        #expect(
            await eventually(timeout: .seconds(15)) {
                let members = (try? await seed.membership())?.members ?? []
                return members.count == 2 && !members.contains { $0.node.port == c.address.port }
            })
        #expect(try await b.down(NodeAddress(host: "127.0.0.1", port: 9), via: seed.address) == false)
    }
}
