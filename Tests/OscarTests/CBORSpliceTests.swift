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
}
