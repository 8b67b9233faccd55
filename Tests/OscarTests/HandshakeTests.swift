import Foundation
import Oscar
import Testing

@testable import OscarRemote

@Suite(.timeLimit(.minutes(5))) struct HandshakeTests {
    let a = NodeAddress(host: "127.0.0.1", port: 7001, uid: 11)
    let b = NodeAddress(host: "127.0.0.1", port: 7002, uid: 22)

    /// Runs both sides against each other, passing frames across; the
    /// initiator dials the bulk lane with `bulk`, and `between` may change
    /// its hello on the way.
    func run(
        secretA: String, secretB: String, bulk: Bool = false,
        between: (inout Handshake.Hello) -> Void = { _ in }
    ) -> (a: [Handshake.Directive], b: [Handshake.Directive], acceptorIsBulk: Bool) {
        var initiator = Handshake(
            role: .initiator, local: a, secret: Array(secretA.utf8), nonce: Handshake.randomNonce(), bulk: bulk)
        var acceptor = Handshake(role: .acceptor, local: b, secret: Array(secretB.utf8), nonce: Handshake.randomNonce())
        var seenA: [Handshake.Directive] = []
        var seenB: [Handshake.Directive] = []
        var toB = initiator.onStart().map { directive -> Handshake.Directive in
            guard case .send(.hello, let payload) = directive,
                var hello = try? CBORDecoder().decode(Handshake.Hello.self, from: payload)
            else { return directive }
            between(&hello)
            return .send(.hello, (try? CBOREncoder().encode(hello)) ?? payload)
        }
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
        return (seenA, seenB, acceptor.isBulk)
    }

    /// The acceptor learns the lane from the hello, and the lane is in the
    /// MACs: a hello whose lane was changed on the way fails the handshake.
    @Test func theLaneIsSaidInTheHelloAndProvenByTheMAC() {
        let secret = "a-long-cluster-secret"
        let bulk = run(secretA: secret, secretB: secret, bulk: true)
        #expect(bulk.a.contains(.established(b)) && bulk.b.contains(.established(a)))
        #expect(bulk.acceptorIsBulk)
        #expect(!run(secretA: secret, secretB: secret).acceptorIsBulk)
        for (dialsBulk, lane) in [(true, nil), (false, "bulk")] as [(Bool, String?)] {
            let changed = run(secretA: secret, secretB: secret, bulk: dialsBulk) { $0.lane = lane }
            #expect(!changed.a.contains { if case .established = $0 { true } else { false } })
            #expect(!changed.b.contains { if case .established = $0 { true } else { false } })
        }
        var refusing = Handshake(
            role: .acceptor, local: b, secret: Array(secret.utf8), nonce: Handshake.randomNonce(), takesBulk: false)
        _ = refusing.onStart()
        let hello = try? CBOREncoder().encode(
            Handshake.Hello(node: a, nonce: Data(Handshake.randomNonce()), lane: "bulk"))
        #expect(refusing.onFrame(.hello, hello ?? []) == [.fail(reason: Handshake.noBulkLane, tellPeer: true)])
        let unknown = run(secretA: secret, secretB: secret) { $0.lane = "sideways" }
        #expect(unknown.b.contains { if case .fail(let r, true) = $0 { r.contains("unknown lane") } else { false } })
    }

    @Test func matchingSecretsEstablishBothSidesWithTheRightPeer() {
        let (sideA, sideB, _) = run(secretA: "a-long-cluster-secret", secretB: "a-long-cluster-secret")
        #expect(sideA.contains(.established(b)))
        #expect(sideB.contains(.established(a)))
    }

    @Test func aWrongSecretIsRejectedWithAReasonOnBothSides() {
        let (sideA, sideB, _) = run(secretA: "right-secret-0123456", secretB: "wrong-secret-0123456")
        #expect(!sideA.contains { if case .established = $0 { true } else { false } })
        #expect(!sideB.contains { if case .established = $0 { true } else { false } })
        // The acceptor finds the initiator's proof wrong and says so (the
        // connection sends the reason in a reject frame).
        #expect(sideB.contains { if case .fail(let r, true) = $0 { r.contains("secret") } else { false } })
    }

    /// What a client that merely connects receives must not depend on the
    /// secret, or it could test guesses against it offline. Searched over
    /// random secrets, nonces and a wrong proof.
    @Test func anUnauthenticatedInitiatorLearnsNothingThatDependsOnTheSecret() throws {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            let nonceA = Handshake.randomNonce()
            let nonceB = Handshake.randomNonce()
            var replies: [[Handshake.Directive]] = []
            for _ in 0..<2 {
                let secret = (0..<24).map { _ in UInt8.random(in: 0...255, using: &random) }
                var acceptor = Handshake(role: .acceptor, local: b, secret: secret, nonce: nonceB)
                _ = acceptor.onStart()
                let hello = try CBOREncoder().encode(Handshake.Hello(node: a, nonce: Data(nonceA)))
                var seen = acceptor.onFrame(.hello, hello)
                let guess = try CBOREncoder().encode(Handshake.Proof(mac: Data(Handshake.randomNonce())))
                seen += acceptor.onFrame(.proof, guess)
                #expect(acceptor.authenticationFailed)
                replies.append(seen)
            }
            #expect(replies[0] == replies[1])
        }
    }

    @Test func anAcceptorWithoutTheSecretIsCaughtByTheInitiator() throws {
        var initiator = Handshake(
            role: .initiator, local: a, secret: Array("a-long-cluster-secret".utf8), nonce: Handshake.randomNonce())
        _ = initiator.onStart()
        let challenge = try CBOREncoder().encode(Handshake.Challenge(node: b, nonce: Data(Handshake.randomNonce())))
        #expect(initiator.onFrame(.challenge, challenge).count == 1)
        let accept = try CBOREncoder().encode(Handshake.Accept(mac: Data(Handshake.randomNonce())))
        let outcome = initiator.onFrame(.accept, accept)
        #expect(initiator.authenticationFailed)
        #expect(outcome == [.fail(reason: Handshake.authenticationFailure, tellPeer: true)])
    }

    @Test func theSecretNeverAppearsOnTheWire() {
        let secret = "a-very-recognisable-secret"
        let (sideA, sideB, _) = run(secretA: secret, secretB: secret)
        for case .send(_, let payload) in sideA + sideB {
            #expect(!String(decoding: payload, as: UTF8.self).contains(secret))
        }
    }

    @Test func aWrongMagicOrVersionFails() {
        var h = Handshake(role: .acceptor, local: b, secret: [], nonce: Handshake.randomNonce())
        #expect(
            h.onPreamble(Array("HTTP/1".utf8)) == [.fail(reason: WireError.badPreamble.description, tellPeer: false)])
        var v = Handshake(role: .acceptor, local: b, secret: [], nonce: Handshake.randomNonce())
        let reason = WireError.versionMismatch(ours: Handshake.version, theirs: 9).description
        #expect(v.onPreamble(Handshake.magic + [0, 9]) == [.fail(reason: reason, tellPeer: true)])
    }
}
