import Oscar
import OscarTestKit
import OscarTestSupport
import Synchronization
import Testing

@testable import OscarCluster
@testable import OscarRemote

/// The transport's evidence that a process is gone, which lets membership
/// remove a downed member without the removal margin (docs/DOWNING.md): a
/// dial refused where this node had reached that incarnation before. A
/// refusal from an address it never reached says nothing about anyone.
@Suite(.timeLimit(.minutes(2))) struct IncarnationGoneTests {
    @Test func aDialRefusedWhereAReachedNodeListenedReportsThatIncarnationAloneGone() async throws {
        let secret = "incarnation-gone-secret-01"
        let a = try ClusterNode(settings: .init(secret: secret, loopCount: 1))
        defer { a.shutdown() }
        let gone = Mutex<[NodeAddress]>([])
        a.transport.onIncarnationGone { node in gone.withLock { $0.append(node) } }

        // Nothing listens on port 1: refused, by no incarnation this node knows.
        let nobody = try #require(a.system.ref("oscar://127.0.0.1:1/user/ping"))
        do {
            _ = try await nobody.ask(Ping(n: 0), timeout: .seconds(5))
            Issue.record("an ask to a port nobody listens on must fail")
        } catch {}

        let b = try ClusterNode(settings: .init(secret: secret, loopCount: 1))
        _ = try b.system.spawn("ping") { PingActor() }
        let incarnation = b.address
        let ping = try #require(a.system.ref("oscar://127.0.0.1:\(incarnation.port)/user/ping"))
        #expect(try await ping.ask(Ping(n: 1)).n == 1)
        b.shutdown()  // its listener closes with it

        // The first dials after the loss may wait out the reconnect gate.
        let reported = await eventually(timeout: .seconds(20)) {
            _ = try? await ping.ask(Ping(n: 2), timeout: .seconds(1))
            return gone.withLock { !$0.isEmpty }
        }
        #expect(reported, "no incarnation reported gone")
        let seen = gone.withLock { $0 }
        #expect(seen.allSatisfy { $0.uid == incarnation.uid && $0.port == incarnation.port }, "\(seen)")
    }

    /// The leader's probe of a downed member dials at once, past the
    /// reconnect backoff (`Transport.redialNow`): after a kill the backoff
    /// has grown to seconds by the time the member is downed, and the
    /// refusal that removes it waited for it. Here the backoff is a minute,
    /// so a second refusal within the deadline can only come from the
    /// redial.
    @Test func aRedialDialsPastTheReconnectBackoff() async throws {
        let secret = "incarnation-gone-secret-02"
        var settings = ClusterNode.Settings(secret: secret, loopCount: 1)
        settings.reconnectBackoffMin = .seconds(60)
        let a = try ClusterNode(settings: settings)
        defer { a.shutdown() }
        let gone = Mutex(0)
        a.transport.onIncarnationGone { _ in gone.withLock { $0 += 1 } }

        let b = try ClusterNode(settings: .init(secret: secret, loopCount: 1))
        _ = try b.system.spawn("ping") { PingActor() }
        let incarnation = b.address
        let ping = try #require(a.system.ref("oscar://127.0.0.1:\(incarnation.port)/user/ping"))
        #expect(try await ping.ask(Ping(n: 1)).n == 1)
        b.shutdown()

        // The connection's loss gates the next dial for a minute: asks fail
        // at once, and nothing is dialled, so nothing is found refusing.
        #expect(
            await eventually(timeout: .seconds(20)) {
                do {
                    _ = try await ping.ask(Ping(n: 2), timeout: .seconds(1))
                    return false
                } catch {
                    return "\(error)".contains("unreachable")
                }
            }, "the loss of the connection was not noticed")
        _ = try? await ping.ask(Ping(n: 3), timeout: .seconds(1))
        let before = gone.withLock { $0 }
        #expect(before == 0, "a gated send dialled")
        a.transport.redialNow(incarnation)
        // The dial is early; sends still fail at once while the backoff lasts.
        do {
            _ = try await ping.ask(Ping(n: 4), timeout: .seconds(5))
            Issue.record("an ask to a stopped node must fail")
        } catch {
            #expect(error.description.contains("unreachable"), "\(error)")
        }
        #expect(
            await eventually(timeout: .seconds(20)) { gone.withLock { $0 } > before },
            "no dial after redialNow within 20 s, with a backoff of 60 s")
    }
}
