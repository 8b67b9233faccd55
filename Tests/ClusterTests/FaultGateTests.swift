import Glibc
import Oscar
import OscarTestKit
import OscarTestSupport
import Testing

/// The fault gate over real sockets: controlled through the management
/// endpoint (signed with the secret) and the `/system/faults` actor.
@Suite(.timeLimit(.minutes(5))) struct FaultGateTests {
    /// `body` signed with `secret` now, as a client signs it.
    static func signed(_ body: String, _ secret: [UInt8]) -> [String: String] {
        SignedRequest.headers(
            method: "POST", path: "/faults", body: Array(body.utf8), secret: secret, now: Int64(time(nil)))
    }

    static func post(_ body: String, port: Int, headers: [String: String]) async throws -> (status: Int, body: String) {
        try await offThePool {
            let peer = try RawPeer(port: port)
            let bytes = Array(body.utf8)
            var head = "POST /faults HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(bytes.count)\r\n"
            for (name, value) in headers { head += "\(name): \(value)\r\n" }
            peer.send(Array((head + "\r\n").utf8) + bytes)
            var response: [UInt8] = []
            while let chunk = peer.read(1) { response += chunk }  // until the server closes
            let text = String(decoding: response, as: UTF8.self)
            let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
            return (status, String(text.split(separator: "\r\n\r\n", maxSplits: 1).last ?? ""))
        }
    }

    @Test func theManagementEndpointAppliesOnlyCommandsSignedWithTheSecret() async throws {
        let faults = FaultGate()
        var settings = ClusterNode.Settings(secret: "a-long-cluster-secret", loopCount: 1, httpPort: 0)
        settings.injectFaults(with: faults)
        let a = try ClusterNode(settings: settings) { actors in
            actors.nodeSingleton("ping") { PingActor() }
        }
        let b = try node()
        defer { shutDown(a, b) }
        let port = try #require(a.managementPort)
        let remote = b.system.ref("oscar://127.0.0.1:\(a.address.port)/user/ping")!
        #expect(try await remote.ask(Ping(n: 1)).n == 1)

        let secret = Array("a-long-cluster-secret".utf8)
        let command = "{\"blackhole\":{\"peers\":[\"127.0.0.1:\(b.address.port)\"],\"direction\":\"outbound\"}}"
        let unsigned = try await Self.post(command, port: port, headers: [:])
        #expect(unsigned.status == 401)
        let forged = try await Self.post(command, port: port, headers: Self.signed(command, Array("wrong".utf8)))
        #expect(forged.status == 401)
        let stillAnswered = try await remote.ask(Ping(n: 2)).n
        #expect(faults.dropped == 0 && stillAnswered == 2, "nothing was applied")

        let headers = Self.signed(command, secret)
        let signed = try await Self.post(command, port: port, headers: headers)
        #expect(signed.status == 200)
        // The same request again, as someone who captured it would send it.
        let replayed = try await Self.post(command, port: port, headers: headers)
        #expect(replayed.status == 401 && replayed.body.contains("replayed"), "\(replayed)")
        #expect(signed.body.contains("blackhole outbound 127.0.0.1:\(b.address.port)"))
        await #expect(throws: AskError.self) { try await remote.ask(Ping(n: 3), timeout: .milliseconds(300)) }
        #expect(faults.dropped >= 1, "the reply was dropped at a")

        let garbage = "{\"explode\":{}}"
        let refused = try await Self.post(garbage, port: port, headers: Self.signed(garbage, secret))
        #expect(refused.status == 400)

        let heal = "{\"heal\":{}}"
        let healed = try await Self.post(heal, port: port, headers: Self.signed(heal, secret))
        #expect(healed.status == 200 && healed.body.contains("\"rules\":[]"))
        #expect(try await remote.ask(Ping(n: 4)).n == 4)
    }

    @Test func theFaultsActorBlackholesInboundAndDelaysInOrder() async throws {
        let (faultsA, faultsB) = (FaultGate(), FaultGate())
        let (a, b) = (try node(faults: faultsA), try node(faults: faultsB))
        defer { shutDown(a, b) }
        let remote = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
        let local = b.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
        let control = a.system.ref("oscar://127.0.0.1:\(b.address.port)/system/faults")!
        let status = try await control.ask(
            FaultCommand.blackhole(peers: ["127.0.0.1:\(a.address.port)"], direction: .inbound))
        #expect(status.rules == ["blackhole inbound 127.0.0.1:\(a.address.port)"])
        for _ in 0..<20 { remote.tell(Count()) }
        // FIFO from a: once this ask from a is dropped, so were the tells.
        await #expect(throws: AskError.self) { try await remote.ask(Ping(n: 1), timeout: .milliseconds(300)) }
        #expect(try await local.ask(Total()) == 0, "b dropped what a sent")
        #expect(faultsB.dropped >= 21)
        faultsB.heal()

        faultsA.apply(.delay(millis: 80, jitterMillis: 30, peers: nil))
        let clock = ContinuousClock()
        let start = clock.now
        for i in 0..<200 { remote.tell(Said(text: "\(i)")) }
        let heard = try await remote.ask(Heard())
        #expect(clock.now - start >= .milliseconds(50), "the ask waited out the delay")
        #expect(heard == (0..<200).map { "\($0)" }, "delayed frames keep their order")
        faultsA.heal()
        #expect(try await remote.ask(Ping(n: 2)).n == 2)
    }

    /// Fault injection is a test kit's, installed by a test or chaos run: a
    /// node that did not install it has no gate, no `/system/faults` actor
    /// and no `POST /faults`, and takes no fault command from anyone.
    @Test func aNodeThatDidNotInstallTheGateHasNoneOfIt() async throws {
        let a = try ClusterNode(settings: .init(secret: "a-long-cluster-secret", loopCount: 1, httpPort: 0)) { actors in
            actors.nodeSingleton("ping") { PingActor() }
        }
        let b = try node()
        defer { shutDown(a, b) }
        #expect(a.faults == nil && b.faults == nil)
        let command = "{\"heal\":{}}"
        let secret = Array("a-long-cluster-secret".utf8)
        let port = try #require(a.managementPort)
        let posted = try await Self.post(command, port: port, headers: Self.signed(command, secret))
        #expect(posted.status == 405 || posted.status == 404, "no fault route: \(posted.status)")
        let control = b.system.ref("oscar://127.0.0.1:\(a.address.port)/system/faults")!
        await #expect(throws: AskError.self) {
            _ = try await control.ask(FaultCommand.status, timeout: .seconds(5))
        }
        let remote = b.system.ref("oscar://127.0.0.1:\(a.address.port)/user/ping")!
        #expect(try await remote.ask(Ping(n: 7)).n == 7, "the node still answers")
    }
}
