import OscarBase
import OscarCBOR
import OscarRuntime

/// The receive side of a connection: bytes read from the socket go in, whole
/// frames come out, without copying them.
///
/// Raw memory rather than an `Array`: libuv writes into the region that
/// `prepareForRead` hands out, and an array's storage must not escape.
///
/// Invariant: `storage[readIndex..<writeIndex]` holds bytes received and not
/// yet consumed. Frames are handed out as views into `storage`, valid until
/// the next `prepareForRead`; a partial frame at the end waits for more bytes.
final class FrameBuffer {
    private var storage: UnsafeMutableRawPointer
    private var capacity: Int
    private var readIndex = 0
    private var writeIndex = 0
    /// The largest frame accepted now: small until the peer has proven the
    /// secret (see `Transport.Settings.maxHandshakeFrame`), then the node's
    /// maximum.
    var maxFrame: Int

    /// Bytes offered to each read at least.
    static let readChunk = 64 * 1024

    init(maxFrame: Int) {
        self.maxFrame = maxFrame
        capacity = 2 * Self.readChunk
        storage = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit { storage.deallocate() }

    /// Makes room for a read of at least `readChunk` bytes and returns where it
    /// may write.
    func prepareForRead() -> UnsafeMutableRawBufferPointer {
        if readIndex == writeIndex {
            readIndex = 0
            writeIndex = 0
        }
        if capacity - writeIndex < Self.readChunk {
            let live = writeIndex - readIndex
            if readIndex > 0 {
                storage.copyMemory(from: storage + readIndex, byteCount: live)
                readIndex = 0
                writeIndex = live
            }
            if capacity - writeIndex < Self.readChunk { grow(to: writeIndex + Self.readChunk) }
        }
        return UnsafeMutableRawBufferPointer(start: storage + writeIndex, count: capacity - writeIndex)
    }

    package func didRead(_ count: Int) { writeIndex += count }

    /// No bytes received and not yet taken.
    var isEmpty: Bool { readIndex == writeIndex }

    private func grow(to needed: Int) {
        var newCapacity = capacity
        while newCapacity < needed { newCapacity *= 2 }
        let bigger = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 8)
        bigger.copyMemory(from: storage + readIndex, byteCount: writeIndex - readIndex)
        storage.deallocate()
        storage = bigger
        writeIndex -= readIndex
        readIndex = 0
        capacity = newCapacity
    }

    /// The next complete frame (without its length prefix), or nil when more
    /// bytes are needed. The view is valid until the next `prepareForRead`.
    func nextFrame() throws(WireError) -> UnsafeRawBufferPointer? {
        guard writeIndex - readIndex >= 4 else { return nil }
        let p = storage + readIndex
        let length =
            Int(p.load(fromByteOffset: 0, as: UInt8.self)) << 24
            | Int(p.load(fromByteOffset: 1, as: UInt8.self)) << 16
            | Int(p.load(fromByteOffset: 2, as: UInt8.self)) << 8 | Int(p.load(fromByteOffset: 3, as: UInt8.self))
        guard length <= maxFrame else { throw .frameTooLarge(length, limit: maxFrame) }
        guard writeIndex - readIndex - 4 >= length else {
            // Make sure a large frame fits once it has arrived.
            if capacity - readIndex < length + 4 { grow(to: length + 4 + Self.readChunk) }
            return nil
        }
        readIndex += 4 + length
        return UnsafeRawBufferPointer(start: p + 4, count: length)
    }

    /// Consumes `count` raw bytes (the preamble), if that many have arrived.
    func take(_ count: Int) -> [UInt8]? {
        guard writeIndex - readIndex >= count else { return nil }
        defer { readIndex += count }
        return Array(UnsafeRawBufferPointer(start: storage + readIndex, count: count))
    }
}
