import Testing

@testable import Oscar

@Suite(.timeLimit(.minutes(5))) struct HandshakeTests {
    let a = NodeAddress(host: "127.0.0.1", port: 7001, uid: 11)
    let b = NodeAddress(host: "127.0.0.1", port: 7002, uid: 22)

    /// Runs both sides against each other, passing frames across.
    func run(secretA: String, secretB: String) -> (a: [Handshake.Directive], b: [Handshake.Directive]) {
        var initiator = Handshake(
            role: .initiator, local: a, secret: Array(secretA.utf8), nonce: Handshake.randomNonce())
        var acceptor = Handshake(role: .acceptor, local: b, secret: Array(secretB.utf8), nonce: Handshake.randomNonce())
        var seenA: [Handshake.Directive] = []
        var seenB: [Handshake.Directive] = []
        var toB = initiator.onStart()
        _ = acceptor.onStart()
        seenA += toB
        for _ in 0..<4 {
            var toA: [Handshake.Directive] = []
            for case .send(let kind, let payload) in toB { toA += acceptor.onFrame(kind, payload) }
            seenB += toA
            toB = []
            for case .send(let kind, let payload) in toA { toB += initiator.onFrame(kind, payload) }
            seenA += toB
        }
        return (seenA, seenB)
    }

    @Test func matchingSecretsEstablishBothSidesWithTheRightPeer() {
        let (sideA, sideB) = run(secretA: "a-long-cluster-secret", secretB: "a-long-cluster-secret")
        #expect(sideA.contains(.established(b)))
        #expect(sideB.contains(.established(a)))
    }

    @Test func aWrongSecretIsRejectedWithAReasonOnBothSides() {
        let (sideA, sideB) = run(secretA: "right", secretB: "wrong")
        #expect(!sideA.contains { if case .established = $0 { true } else { false } })
        #expect(!sideB.contains { if case .established = $0 { true } else { false } })
        // The initiator finds the acceptor's MAC wrong, says so, and the acceptor hears why.
        #expect(sideA.contains { if case .fail(let r, true) = $0 { r.contains("secret") } else { false } })
    }

    @Test func theSecretNeverAppearsOnTheWire() {
        let secret = "a-very-recognisable-secret"
        let (sideA, sideB) = run(secretA: secret, secretB: secret)
        for case .send(_, let payload) in sideA + sideB {
            #expect(!String(decoding: payload, as: UTF8.self).contains(secret))
        }
    }

    @Test func aWrongMagicOrVersionFails() {
        var h = Handshake(role: .acceptor, local: b, secret: [], nonce: Handshake.randomNonce())
        #expect(
            h.onPreamble(Array("HTTP/1".utf8)) == [.fail(reason: WireError.badPreamble.description, tellPeer: false)])
        var v = Handshake(role: .acceptor, local: b, secret: [], nonce: Handshake.randomNonce())
        let reason = WireError.versionMismatch(ours: 1, theirs: 9).description
        #expect(v.onPreamble(Handshake.magic + [0, 9]) == [.fail(reason: reason, tellPeer: true)])
    }
}
