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
            var buffer: LendableBuffer? = LendableBuffer(capacity: junk + encoded.count)
            (Array(repeating: 0xee, count: junk) + encoded).withUnsafeBytes { buffer!.append($0) }

            let decoder = CBORDecoder()
            let both = try buffer!.lend { (bytes) throws(CBORError) in
                let item = UnsafeRawBufferPointer(rebasing: bytes[junk...])
                return (try decoder.decode(Two.self, from: item), try decoder.decode(Two.self, from: item))
            }
            var first = both.0
            let second = both.1
            let outside = try decoder.decode(Two.self, from: Array(buffer!.bytes[junk...]))
            #expect(first == value && second == value && outside == value, "round \(round)")
            for (field, size) in [(\Two.a, sizes[0]), (\Two.b, sizes[1])] {
                // Shared only when large, only by the first decode, only while lent.
                #expect(Self.lies(first[keyPath: field], in: buffer!) == (size >= minimum), "round \(round), \(size)")
                #expect(!Self.lies(second[keyPath: field], in: buffer!), "round \(round): shared twice")
                #expect(!Self.lies(outside[keyPath: field], in: buffer!), "round \(round): shared unlent")
            }
            // A shared `Data` changed in place changes no other value.
            if !first.b.isEmpty {
                first.b[first.b.startIndex] ^= 0xff
                #expect(second.b == value.b && first.b != value.b, "round \(round)")
                first.b[first.b.startIndex] ^= 0xff
            }
            // The values keep the bytes after the buffer's last other owner is gone.
            buffer = nil
            let churn = (0..<8).map { _ in [UInt8](repeating: 0x11, count: 4 * minimum) }
            #expect(first == value && second == value, "round \(round), after the buffer was dropped")
            withExtendedLifetime(churn) {}
        }
    }
}
