import Foundation
import OscarBase
import Testing

@testable import OscarCBOR

/// An encoding that leaves large `Data` out (spliced in later, from its own
/// storage) must come to the very bytes of one that copies it, wherever the
/// `Data` sits: in arrays and maps of 24 entries or more, whose heads grow
/// after their entries are written, and nested.
@Suite(.timeLimit(.minutes(2))) struct CBORSpliceTests {
    struct Value: Codable, Equatable {
        var name: String
        var one: Data
        var parts: [Data]
        var byKey: [String: Data]
        var nested: [[Data]]
    }

    @Test func splicedEncodingsMaterializeToThePlainEncoding() throws {
        let sizes = [0, 10, CBORSplice.threshold - 1, CBORSplice.threshold, CBORSplice.threshold + 4_464]
        for seed in UInt64(1)...12 {
            var random = SplitMix64(seed: seed)
            func data() -> Data {
                let size = sizes[Int.random(in: 0..<sizes.count, using: &random)]
                let fill = UInt8.random(in: 0...255, using: &random)
                return Data((0..<size).map { UInt8(truncatingIfNeeded: $0) &+ fill })
            }
            func list(_ max: Int) -> [Data] { (0..<Int.random(in: 0...max, using: &random)).map { _ in data() } }
            let value = Value(
                name: "seed \(seed)", one: data(), parts: list(30),
                byKey: Dictionary(uniqueKeysWithValues: list(26).enumerated().map { ("k\($0.offset)", $0.element) }),
                nested: (0..<Int.random(in: 0...3, using: &random)).map { _ in list(25) })

            let plain = try CBOREncoder().encode(value)
            let encoding = CBOREncoding(capacity: 0)
            encoding.splices = []
            var prefix: [UInt8] = [1, 2, 3]  // encoded after other bytes, as into a frame
            try CBOREncoder().encode(value, appendingTo: &prefix, using: encoding)
            let splices = try #require(encoding.splices)
            #expect(splices.allSatisfy { $0.data.count >= CBORSplice.threshold }, "seed \(seed)")
            #expect(zip(splices, splices.dropFirst()).allSatisfy { $0.offset <= $1.offset }, "seed \(seed)")
            let materialized = CBORSplice.materialize(prefix, splices)
            #expect(Array(materialized.dropFirst(3)) == plain, "seed \(seed)")
            #expect(try CBORDecoder().decode(Value.self, from: Array(materialized.dropFirst(3))) == value)
        }
    }

    /// The cases a random value rarely reaches: a large `Data` right before
    /// a sibling container whose head grows (its splice must not move), a
    /// map of 30 entries, an array of 300 (a 3-byte head), and an encoding
    /// that throws, which leaves no splice behind.
    @Test func splicesStayInPlaceWhereHeadsGrowAndAFailedEncodingLeavesNone() throws {
        let big = Data((0..<(CBORSplice.threshold + 7)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        struct BigThenList: Codable { var nested: [[Data]]; var ints: [[Int]] }
        struct Failing: Encodable {
            struct Refused: Error {}
            func encode(to encoder: any Encoder) throws { throw Refused() }
        }
        struct BigThenFailing: Encodable {
            var data: Data
            var failing = Failing()
        }
        func check<T: Encodable>(_ value: T, _ label: String) throws {
            let encoding = CBOREncoding(capacity: 0)
            encoding.splices = []
            var out: [UInt8] = [9]
            try CBOREncoder().encode(value, appendingTo: &out, using: encoding)
            #expect(!(encoding.splices ?? []).isEmpty, "\(label): nothing spliced")
            #expect(
                Array(CBORSplice.materialize(out, encoding.splices ?? []).dropFirst())
                    == (try CBOREncoder().encode(value)),
                "\(label)")
        }
        try check([[big], (0..<25).map { _ in Data([1]) }], "a large Data, then a sibling of 25")
        try check(BigThenList(nested: [[big]], ints: [Array(0..<30)]), "a large Data, then a list of 30")
        try check(
            Dictionary(uniqueKeysWithValues: (0..<30).map { ("k\($0)", $0 % 7 == 0 ? big : Data([2])) }), "a map of 30")
        try check((0..<300).map { $0 == 150 || $0 == 299 ? big : Data([3]) }, "an array of 300")

        let encoding = CBOREncoding(capacity: 0)
        encoding.splices = []
        var out: [UInt8] = [9]
        #expect(throws: (any Error).self) {
            try CBOREncoder().encode(BigThenFailing(data: big), appendingTo: &out, using: encoding)
        }
        #expect(out == [9])
        #expect(encoding.splices?.isEmpty == true)
    }
}
