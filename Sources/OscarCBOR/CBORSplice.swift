import Foundation

/// A large byte string left out of an encoding: its head is in the encoded
/// bytes, and its bytes are still in `data`, to be written from there at
/// `offset`.
///
/// Why: a node sends a large message as chunks, which its I/O loop copies
/// out one at a time anyway. Copying a 16 MiB `Data` into the encoding
/// first took milliseconds: of a thread that, on two cores, pushed an I/O
/// loop off its core meanwhile, or of the loop itself (W2S and W5 in
/// docs/BENCHMARKS.md).
///
/// What it means for a sender: a spliced `Data`'s bytes are read when its
/// chunks go, after `tell` or `ask` returned. A `Data` is a value, so that
/// changes nothing, except for one made with `bytesNoCopy` over memory the
/// sender reuses or frees (deallocator `.none`), which must not change
/// until the message has left. A slice keeps its whole storage alive until
/// then.
package struct CBORSplice: Sendable {
    /// Where the bytes belong in the encoded buffer: right after the byte
    /// string's head.
    package var offset: Int
    package let data: Data

    /// Byte strings at least this long are spliced, when an encoding asks
    /// for splices: below it, copying is cheaper than keeping the `Data`.
    package static let threshold = 64 * 1024

    /// The bytes of all `splices` together.
    package static func byteCount(_ splices: [CBORSplice]) -> Int { splices.reduce(0) { $0 + $1.data.count } }

    /// `bytes` with every splice's bytes written in at its offset: the
    /// encoding as it would be without splices.
    package static func materialize(_ bytes: [UInt8], _ splices: [CBORSplice]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + byteCount(splices))
        var cursor = 0
        for splice in splices {
            out.append(contentsOf: bytes[cursor..<splice.offset])
            out.append(contentsOf: splice.data)
            cursor = splice.offset
        }
        out.append(contentsOf: bytes[cursor...])
        return out
    }
}
