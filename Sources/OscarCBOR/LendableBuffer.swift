import Foundation
import Synchronization

/// A buffer whose bytes a decoded `Data` may keep instead of copying: a
/// large message, reassembled from its chunks into one of these, is lent
/// to the decoders while it is delivered (`lend`), and a byte string of at
/// least `sharedDataMinimum` bytes inside it becomes a `Data` over the
/// buffer, which it keeps alive.
///
/// Why: copying a 16 MiB `Data` out of its message, into fresh pages, held
/// the receiving loop for milliseconds, and every small message behind it
/// waited (W2 under a large stream).
///
/// Filled once (`append`), then only read while it is lent: the buffer
/// holds every `Data` it shared until `lend` returns, so a `Data` changed
/// during the delivery (by a reaction, before the same bytes are decoded
/// again) copies its bytes first. Two byte strings that would share bytes
/// (a type that decodes one key twice) are not both shared: the second is
/// copied, so a `Data` changed in place later never changes another.
///
/// Memory: a shared `Data` keeps the whole buffer, and the transport stops
/// counting it against its reassembly bound once the message is delivered.
/// So a string is shared only when it is at least half of the buffer: a
/// kept `Data` never holds more than twice its own size.
package final class LendableBuffer: @unchecked Sendable {
    /// Byte strings shorter than this are copied, as before: sharing pays
    /// only where a copy costs more than a lock and a `Data`'s own storage.
    package static let sharedDataMinimum = 64 * 1024

    private let storage: UnsafeMutableRawBufferPointer
    /// How many bytes `append` has written.
    package private(set) var count = 0
    /// The byte ranges already shared (offsets into `storage`), and the
    /// `Data` values sharing them while the buffer is lent.
    private let shared = Mutex<(ranges: [Range<Int>], held: [Data])>(([], []))

    /// A buffer for exactly `capacity` bytes.
    package init(capacity: Int) {
        storage = .allocate(byteCount: max(capacity, 1), alignment: 16)
    }

    deinit { storage.deallocate() }

    /// The bytes written so far.
    package var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: storage[..<count]) }

    /// Room for this many more bytes.
    package var room: Int { storage.count - count }

    /// Appends `chunk` (at most `room` bytes; the caller checks).
    package func append(_ chunk: UnsafeRawBufferPointer) {
        precondition(chunk.count <= room, "LendableBuffer.append past its capacity")
        guard let source = chunk.baseAddress, !chunk.isEmpty else { return }
        (storage.baseAddress! + count).copyMemory(from: source, byteCount: chunk.count)
        count += chunk.count
    }

    /// Lets `body` write the next `count` bytes in place (at most `room`),
    /// which then count as appended: the bulk lane reads a message from its
    /// socket straight into the buffer, with no copy between.
    package func append<E: Error>(
        _ count: Int, from body: (UnsafeMutableRawBufferPointer) throws(E) -> Void
    ) throws(E) {
        precondition(count <= room, "LendableBuffer.append past its capacity")
        try body(UnsafeMutableRawBufferPointer(rebasing: storage[self.count..<(self.count + count)]))
        self.count += count
    }

    /// Runs `body` with the bytes, lent until `body` returns to every decode
    /// that reads them. (Only the thread delivering the message has their
    /// address; the registry is shared because any loop may be delivering.)
    package func lend<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        Self.lent.withLock { $0.append(self) }
        defer {
            Self.lent.withLock { lent in lent.removeAll { $0 === self } }
            // No longer held here: a `Data` the message kept is now the only
            // owner of its storage and may change it in place.
            shared.withLock { $0.held.removeAll() }
        }
        return try body(bytes)
    }

    /// The buffers being lent now, on any thread: few (one per loop at most
    /// is delivering a large message), and looked up only for a large byte
    /// string.
    private static let lent = Mutex<[LendableBuffer]>([])

    /// A `Data` over `bytes` without a copy, when they lie in a buffer being
    /// lent and no `Data` shares any of them yet; nil otherwise.
    static func sharedData(_ bytes: UnsafeRawBufferPointer) -> Data? {
        guard bytes.count >= sharedDataMinimum, let start = bytes.baseAddress else { return nil }
        let owner = lent.withLock { buffers in
            buffers.first { buffer in
                let base = UnsafeRawPointer(buffer.storage.baseAddress!)
                return start >= base && start + bytes.count <= base + buffer.count
            }
        }
        guard let owner, bytes.count * 2 >= owner.count else { return nil }
        let offset = start - UnsafeRawPointer(owner.storage.baseAddress!)
        let range = offset..<offset + bytes.count
        return owner.shared.withLock { shared -> Data? in
            guard !shared.ranges.contains(where: { $0.overlaps(range) }) else { return nil }
            let data = Data(
                bytesNoCopy: owner.storage.baseAddress! + offset, count: bytes.count,
                deallocator: .custom { _, _ in withExtendedLifetime(owner) {} })
            shared.ranges.append(range)
            shared.held.append(data)
            return data
        }
    }
}
