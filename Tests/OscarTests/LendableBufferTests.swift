import Foundation
import OscarBase
import Testing

@testable import OscarCBOR

/// A large `Data` decoded from a lent buffer (a reassembled message) shares
/// the buffer instead of copying it; everything else is copied as before.
@Suite(.timeLimit(.minutes(2))) struct LendableBufferTests {
    struct Two: Codable, Equatable {
        var a: Data
        var n: Int
        var b: Data
    }

    /// Where `data`'s bytes are, and whether they lie inside `buffer`.
    static func lies(_ data: Data, in buffer: LendableBuffer) -> Bool {
        guard !data.isEmpty else { return false }
        let inside = buffer.bytes
        return data.withUnsafeBytes { own in
            own.baseAddress! >= inside.baseAddress!
                && own.baseAddress! + own.count <= inside.baseAddress! + inside.count
        }
    }

    @Test func aLargeDataSharesTheLentBufferAndOutlivesItsOtherOwners() throws {
        var random = SplitMix64(seed: 20_261_204)
        let minimum = LendableBuffer.sharedDataMinimum
        for round in 0..<60 {
            let sizes = (0..<2).map { _ in
                [
                    Int.random(in: 0...minimum - 1, using: &random),
                    Int.random(in: minimum...3 * minimum, using: &random),
                ][
                    Int.random(in: 0...1, using: &random)]
            }
            let value = Two(
                a: Data((0..<sizes[0]).map { _ in UInt8.random(in: 0...255, using: &random) }), n: round,
                b: Data((0..<sizes[1]).map { _ in UInt8.random(in: 0...255, using: &random) }))
            let encoded = try CBOREncoder().encode(value)
            // The item sits behind other bytes, as a payload does in its frame.
            let junk = Int.random(in: 0...40, using: &random)
            var first: Two
            let second: Two
            do {
                let lent = LendableBuffer(capacity: junk + encoded.count)
                (Array(repeating: 0xee, count: junk) + encoded).withUnsafeBytes { lent.append($0) }
                let decoder = CBORDecoder()
                // Shared only when large and at least half the buffer (so a kept
                // `Data` holds at most twice its size), and only by the first decode.
                let shares = sizes.map { $0 >= minimum && $0 * 2 >= lent.count }
                (first, second) = try lent.lend { (bytes) throws(CBORError) in
                    let item = UnsafeRawBufferPointer(rebasing: bytes[junk...])
                    var first = try decoder.decode(Two.self, from: item)
                    for (field, share) in zip([\Two.a, \Two.b], shares) {
                        #expect(Self.lies(first[keyPath: field], in: lent) == share, "round \(round), \(sizes)")
                    }
                    // Changed during the delivery, a shared `Data` copies first:
                    // the same bytes decoded again are still the message's.
                    if !first.b.isEmpty { first.b[first.b.startIndex] ^= 0xff }
                    let second = try decoder.decode(Two.self, from: item)
                    if !first.b.isEmpty { first.b[first.b.startIndex] ^= 0xff }
                    return (first, second)
                }
                let outside = try decoder.decode(Two.self, from: Array(lent.bytes[junk...]))
                #expect(first == value && second == value && outside == value, "round \(round)")
                for field in [\Two.a, \Two.b] {
                    #expect(!Self.lies(second[keyPath: field], in: lent), "round \(round): shared twice")
                    #expect(!Self.lies(outside[keyPath: field], in: lent), "round \(round): shared unlent")
                }
            }
            // After the delivery, a shared `Data` is changed in place; no other value changes.
            if !first.b.isEmpty {
                first.b[first.b.startIndex] ^= 0xff
                #expect(second.b == value.b && first.b != value.b, "round \(round)")
                first.b[first.b.startIndex] ^= 0xff
            }
            // The values keep the bytes after the buffer's last other owner is gone.
            let churn = (0..<8).map { _ in [UInt8](repeating: 0x11, count: 4 * minimum) }
            #expect(first == value && second == value, "round \(round), after the buffer was dropped")
            withExtendedLifetime(churn) {}
        }
    }
}
