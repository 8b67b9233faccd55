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
/// Filled once (`append`), then only read: a `Data` over part of it never
/// sees another writer. Two byte strings that would share bytes (a type
/// that decodes one key twice) are not both shared: the second is copied,
/// so a `Data` mutated in place never changes another.
package final class LendableBuffer: @unchecked Sendable {
    /// Byte strings shorter than this are copied, as before: sharing pays
    /// only where a copy costs more than a lock and a `Data`'s own storage.
    package static let sharedDataMinimum = 64 * 1024

    private let storage: UnsafeMutableRawBufferPointer
    /// How many bytes `append` has written.
    package private(set) var count = 0
    /// The byte ranges already shared (offsets into `storage`).
    private let shared = Mutex<[Range<Int>]>([])

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

    /// Runs `body` with the bytes, lent to every decode on this thread that
    /// reads them until `body` returns.
    package func lend<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        Self.lent.withLock { $0.append(self) }
        defer { Self.lent.withLock { lent in lent.removeAll { $0 === self } } }
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
        guard let owner else { return nil }
        let offset = start - UnsafeRawPointer(owner.storage.baseAddress!)
        let range = offset..<offset + bytes.count
        let claimed = owner.shared.withLock { shared in
            guard !shared.contains(where: { $0.overlaps(range) }) else { return false }
            shared.append(range)
            return true
        }
        guard claimed else { return nil }
        return Data(
            bytesNoCopy: owner.storage.baseAddress! + offset, count: bytes.count,
            deallocator: .custom { _, _ in withExtendedLifetime(owner) {} })
    }
}
