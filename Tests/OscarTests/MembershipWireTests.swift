import Oscar
import OscarCBOR
import Testing

@testable import OscarCluster
@testable import OscarMembership

/// The membership messages' flat coding (docs/PROTOCOL.md, "Membership
/// messages"): the bytes the document shows, a round trip of every kind
/// and of random states, and mangled payloads that must fail to decode,
/// never trap.
@Suite(.timeLimit(.minutes(1))) struct MembershipWireTests {
    typealias Wire = MembershipShell.Wire

    static func bytes(_ kind: Wire.Kind) throws -> [UInt8] { try CBOREncoder().encode(Wire(kind: kind)) }
    static func decoded(_ bytes: [UInt8]) throws -> Wire { try CBORDecoder().decode(Wire.self, from: bytes) }

    @Test func heartbeatsAreTheArraysTheProtocolDocumentShows() throws {
        // [3, 5]
        #expect(try Self.bytes(.heartbeat(5)) == [0x82, 0x03, 0x05])
        // [2, "h", 7000, 9]
        #expect(
            try Self.bytes(.heartbeatRequest(NodeAddress(host: "h", port: 7000, uid: 9)))
                == [0x84, 0x02, 0x61, 0x68, 0x19, 0x1b, 0x58, 0x09])
    }

    @Test func everyKindSurvivesARoundTrip() throws {
        let node = NodeAddress(host: "127.0.0.1", port: 7001, uid: 42)
        let member = Member(node: node, status: .up, roles: ["a", "b"], appVersion: "1.2", upNumber: 3)
        var rng = SeededRandom(seed: 19)
        let states = MembershipStateTests.randomHistory(&rng)
        var checked = 0
        for state in states {
            guard case .gossip(let g, let from) = try Self.decoded(Self.bytes(.gossip(state, from: node))).kind
            else { Issue.record("not gossip"); continue }
            #expect(g == state)
            #expect(from == node)
            checked += 1
        }
        #expect(checked == states.count)
        guard case .join(let m) = try Self.decoded(Self.bytes(.join(member))).kind else {
            Issue.record("not a join")
            return
        }
        #expect(m == member)
        guard case .heartbeatRequest(let w) = try Self.decoded(Self.bytes(.heartbeatRequest(node))).kind else {
            Issue.record("not a heartbeat request")
            return
        }
        #expect(w == node)
        guard case .heartbeat(let uid) = try Self.decoded(Self.bytes(.heartbeat(.max))).kind else {
            Issue.record("not a heartbeat")
            return
        }
        #expect(uid == .max)
    }

    /// Valid encodings with bytes flipped, cut short or extended: each
    /// either decodes or throws, and an unknown tag or status throws.
    @Test func mangledPayloadsThrowAndNeverTrap() throws {
        #expect(throws: (any Error).self) { try Self.decoded([0x82, 0x09, 0x05]) }  // tag 9
        var rng = SeededRandom(seed: 2026)
        let states = MembershipStateTests.randomHistory(&rng)
        let node = NodeAddress(host: "10.0.0.1", port: 7000, uid: 7)
        var threw = 0
        for round in 0..<3_000 {
            let state = states[round % states.count]
            var bytes = try Self.bytes(
                round % 4 == 0 ? .heartbeatRequest(node) : round % 4 == 1 ? .heartbeat(7) : .gossip(state, from: node))
            switch round % 3 {
            case 0:
                let at = Int.random(in: 0..<bytes.count, using: &rng)
                bytes[at] ^= UInt8.random(in: 1...255, using: &rng)
            case 1: bytes.removeLast(Int.random(in: 1...bytes.count, using: &rng))
            default:
                bytes.insert(UInt8.random(in: 0...255, using: &rng), at: Int.random(in: 0...bytes.count, using: &rng))
            }
            do { _ = try Self.decoded(bytes) } catch { threw += 1 }
        }
        #expect(threw > 1_000)  // most mangled payloads are caught, none trapped
        // A status that is not one of the six.
        var state = Gossip()
        state.update(Member(node: node, status: .up, upNumber: 1), by: node.uid)
        var bytes = try Self.bytes(.gossip(state, from: node))
        let up: [UInt8] = [0x62, 0x75, 0x70]  // text(2) "up"
        let at = try #require(bytes.indices.first { bytes[$0...].starts(with: up) })
        bytes[at + 2] = 0x71  // "uq"
        #expect(throws: (any Error).self) { try Self.decoded(bytes) }
    }

    /// What an honest node never sends, made from a valid payload by
    /// editing its items: a member or an observer listed twice (settling
    /// them would let one payload make the decoder sort a large record
    /// again and again), an item after the last field.
    @Test func duplicatesAndTrailingItemsAreRefused() throws {
        let node = NodeAddress(host: "10.0.0.1", port: 7000, uid: 7)
        var state = Gossip()
        state.update(Member(node: node, status: .up, upNumber: 1), by: node.uid)
        state.observe(node.uid, reaches: 99, false)
        let valid = try CBORValue(cbor: Self.bytes(.gossip(state, from: node)))
        _ = try Self.decoded(CBOREncoder().encode(valid))  // unedited, it decodes
        guard case .array(let message) = valid, case .array(let fields) = message[1],
            case .array(let members) = fields[0], case .array(let observers) = fields[1]
        else {
            Issue.record("not [tag, [members, reachability, version, seen], ...]: \(valid)")
            return
        }
        try #require(members.count == 7 && observers.count == 3)
        func edited(_ i: Int, _ item: CBORValue) throws -> [UInt8] {
            var state = fields
            state[i] = item
            var edited = message
            edited[1] = .array(state)
            return try CBOREncoder().encode(CBORValue.array(edited))
        }
        #expect(throws: (any Error).self) { try Self.decoded(edited(0, .array(members + members))) }
        #expect(throws: (any Error).self) { try Self.decoded(edited(1, .array(observers + observers))) }
        #expect(throws: (any Error).self) {
            try Self.decoded(CBOREncoder().encode(CBORValue.array(message + [.unsigned(1)])))
        }
        var longState = message
        longState[1] = .array(fields + [.null])
        #expect(throws: (any Error).self) { try Self.decoded(CBOREncoder().encode(CBORValue.array(longState))) }
        #expect(throws: (any Error).self) { try Self.decoded([0x83, 0x03, 0x05, 0x60]) }  // [3, 5, ""]
    }
}
