import Foundation
import OscarBase
import OscarCBOR
import OscarRuntime

/// The connection handshake, as a pure state machine: events in, directives
/// out; the connection performs them.
///
/// ```
/// initiator                         acceptor
///   preamble, Hello(node, nA)   ─►
///                               ◄─  preamble, Challenge(node, nB)
///   Proof(macA)                 ─►
///                               ◄─  Accept(macB)      (or Reject(reason))
/// ```
///
/// `macA = HMAC(secret, "oscar-initiator" | nA | nB | uidA | uidB)` proves the
/// initiator knows the secret; `macB` likewise with "oscar-acceptor". The
/// initiator proves first, so a client that merely connects gets no MAC it
/// could test guesses of the secret against offline: the acceptor's MAC comes
/// only after the initiator's has checked out. (A node that dials an impostor
/// does give it one MAC; that is why secrets must be long enough that an
/// offline guess is hopeless, and why TLS is the answer to a man in the
/// middle.) The secret never crosses the wire, and fresh nonces on both sides
/// make a recorded handshake useless. Whoever detects a problem sends `Reject`
/// with a reason and logs it; the other side logs the reason it receives.
struct Handshake {
    static let magic: [UInt8] = Array("OSCR".utf8)
    package static let version: UInt16 = 5
    static var preamble: [UInt8] { magic + [UInt8(version >> 8), UInt8(version & 0xff)] }

    package enum Role { case initiator, acceptor }

    package enum Directive: Equatable {
        case send(WireKind, [UInt8])
        /// The handshake succeeded with this peer.
        case established(NodeAddress)
        /// Give up: send the reason if the peer should hear it, log it, close.
        case fail(reason: String, tellPeer: Bool)
    }

    // Nonces and MACs are `Data`, so they travel as CBOR byte strings.
    struct Hello: Codable {
        var node: NodeAddress
        var nonce: Data
        /// "bulk" for a connection of the bulk lane (see `BulkLane`).
        var lane: String?
    }
    struct Challenge: Codable { var node: NodeAddress; var nonce: Data }
    struct Proof: Codable { var mac: Data }
    struct Reject: Codable { var reason: String }
    struct Accept: Codable { var mac: Data }

    /// Said when a MAC does not check out.
    static let authenticationFailure = "authentication failed: the two nodes have different cluster secrets"

    package enum State { case start, awaitingChallenge, awaitingHello, awaitingProof, awaitingAccept, done }

    package let role: Role
    package let local: NodeAddress
    package let secret: [UInt8]
    package private(set) var state = State.start
    private var localNonce: [UInt8]
    private var peerNonce: [UInt8] = []
    package private(set) var peer: NodeAddress?
    /// The connection is one of the bulk lane: said by the initiator's
    /// hello, so the acceptor learns it from there.
    package private(set) var isBulk: Bool
    /// The handshake failed because a MAC was wrong: worth counting and
    /// logging with the peer's address, since it may be someone guessing.
    private(set) var authenticationFailed = false

    /// An acceptor that takes bulk connections (its node opted in to the
    /// bulk lane); one that does not refuses them (`noBulkLane`), and the
    /// peer sends its large messages in chunks.
    private let takesBulk: Bool
    static let noBulkLane = "this node takes no bulk connections (bulk-lane is off)"

    init(
        role: Role, local: NodeAddress, secret: [UInt8], nonce: [UInt8], bulk: Bool = false, takesBulk: Bool = true
    ) {
        self.role = role
        self.takesBulk = takesBulk
        self.isBulk = bulk
        self.local = local
        self.secret = secret
        self.localNonce = nonce
    }

    static func randomNonce() -> [UInt8] { (0..<32).map { _ in UInt8.random(in: 0...255) } }

    package mutating func onStart() -> [Directive] {
        switch role {
        case .initiator:
            state = .awaitingChallenge
            return [.send(.hello, encode(Hello(node: local, nonce: Data(localNonce), lane: isBulk ? "bulk" : nil)))]
        case .acceptor:
            state = .awaitingHello
            return []
        }
    }

    /// The peer's first six bytes.
    mutating func onPreamble(_ bytes: [UInt8]) -> [Directive] {
        guard bytes.count == 6, Array(bytes.prefix(4)) == Self.magic else {
            state = .done
            return [.fail(reason: WireError.badPreamble.description, tellPeer: false)]
        }
        let theirs = UInt16(bytes[4]) << 8 | UInt16(bytes[5])
        guard theirs == Self.version else {
            state = .done
            return [
                .fail(reason: WireError.versionMismatch(ours: Self.version, theirs: theirs).description, tellPeer: true)
            ]
        }
        return []
    }

    mutating func onFrame(_ kind: WireKind, _ payload: [UInt8]) -> [Directive] {
        do {
            switch (state, kind) {
            case (_, .reject):
                state = .done
                let reject = try CBORDecoder().decode(Reject.self, from: payload)
                return [.fail(reason: "rejected by peer: \(reject.reason)", tellPeer: false)]
            case (.awaitingHello, .hello):
                let hello = try CBORDecoder().decode(Hello.self, from: payload)
                guard hello.nonce.count == 32 else { return fail("the peer's nonce is not 32 bytes") }
                guard hello.node.uid != local.uid else { return fail("connected to itself") }
                guard hello.lane == nil || hello.lane == "bulk" else { return fail("unknown lane \(hello.lane!)") }
                guard hello.lane == nil || takesBulk else { return fail(Self.noBulkLane) }
                isBulk = hello.lane != nil
                peer = hello.node
                peerNonce = Array(hello.nonce)
                state = .awaitingProof
                return [.send(.challenge, encode(Challenge(node: local, nonce: Data(localNonce))))]
            case (.awaitingChallenge, .challenge):
                let challenge = try CBORDecoder().decode(Challenge.self, from: payload)
                guard challenge.nonce.count == 32 else { return fail("the peer's nonce is not 32 bytes") }
                peer = challenge.node
                peerNonce = Array(challenge.nonce)
                state = .awaitingAccept
                return [.send(.proof, encode(Proof(mac: Data(mac("oscar-initiator")))))]
            case (.awaitingProof, .proof):
                let proof = try CBORDecoder().decode(Proof.self, from: payload)
                guard HMAC.equal(Array(proof.mac), mac("oscar-initiator")), let peer else {
                    authenticationFailed = true
                    return fail(Self.authenticationFailure)
                }
                state = .done
                return [.send(.accept, encode(Accept(mac: Data(mac("oscar-acceptor"))))), .established(peer)]
            case (.awaitingAccept, .accept):
                let accept = try CBORDecoder().decode(Accept.self, from: payload)
                guard HMAC.equal(Array(accept.mac), mac("oscar-acceptor")), let peer else {
                    authenticationFailed = true
                    return fail(Self.authenticationFailure)
                }
                state = .done
                return [.established(peer)]
            default:
                return fail("unexpected \(kind) frame during the handshake")
            }
        } catch {
            return fail("unreadable handshake frame: \(error)")
        }
    }

    private mutating func fail(_ reason: String) -> [Directive] {
        state = .done
        return [.fail(reason: reason, tellPeer: true)]
    }

    /// The MAC over both nonces and both identities, in initiator-first order.
    private func mac(_ label: String) -> [UInt8] {
        let (initiatorNonce, acceptorNonce) = role == .initiator ? (localNonce, peerNonce) : (peerNonce, localNonce)
        let (initiatorUID, acceptorUID) = role == .initiator ? (local.uid, peer?.uid ?? 0) : (peer?.uid ?? 0, local.uid)
        // The lane is in the MAC: nobody between can turn one into the other.
        var message = Array((isBulk ? label + "-bulk" : label).utf8) + initiatorNonce + acceptorNonce
        for uid in [initiatorUID, acceptorUID] {
            for shift in stride(from: 56, through: 0, by: -8) {
                message.append(UInt8(truncatingIfNeeded: uid >> UInt64(shift)))
            }
        }
        return HMAC.sha256(key: secret, message: message)
    }

    static func rejectPayload(_ reason: String) -> [UInt8] {
        (try? CBOREncoder().encode(Reject(reason: reason))) ?? []
    }

    private func encode<T: Encodable>(_ value: T) -> [UInt8] {
        // Our own handshake structs always encode.
        (try? CBOREncoder().encode(value)) ?? []
    }
}
