/// The receive side of a connection: bytes read from the socket go in, whole
/// frames come out, without copying them.
///
/// Invariant: `storage[readIndex..<writeIndex]` holds bytes received and not
/// yet consumed. Frames are handed out as views into `storage`, valid until
/// the next `prepareForRead`; a partial frame at the end waits for more bytes.
struct FrameBuffer {
    private(set) var storage: [UInt8]
    private var readIndex = 0
    private var writeIndex = 0
    let maxFrame: Int

    /// Bytes asked of each read at least.
    static let readChunk = 64 * 1024

    init(maxFrame: Int) {
        self.maxFrame = maxFrame
        storage = [UInt8](repeating: 0, count: 2 * Self.readChunk)
    }

    /// Makes room for a read of at least `readChunk` bytes and returns where it
    /// may write (a raw region of `storage`).
    mutating func prepareForRead() -> (offset: Int, count: Int) {
        if readIndex == writeIndex {
            readIndex = 0
            writeIndex = 0
        }
        if storage.count - writeIndex < Self.readChunk {
            let live = writeIndex - readIndex
            if readIndex > 0 {
                storage.withUnsafeMutableBytes { raw in
                    raw.baseAddress!.copyMemory(from: raw.baseAddress! + readIndex, byteCount: live)
                }
                readIndex = 0
                writeIndex = live
            }
            if storage.count - writeIndex < Self.readChunk {
                storage.append(contentsOf: [UInt8](repeating: 0, count: max(storage.count, Self.readChunk)))
            }
        }
        return (writeIndex, storage.count - writeIndex)
    }

    mutating func didRead(_ count: Int) { writeIndex += count }

    /// Calls `body` with each complete frame (without its length prefix) in
    /// order. Stops at the first oversized frame with an error.
    mutating func forEachFrame(_ body: (UnsafeRawBufferPointer) throws(WireError) -> Void) throws(WireError) {
        while writeIndex - readIndex >= 4 {
            let length = storage.withUnsafeBytes { raw in
                Int(raw[readIndex]) << 24 | Int(raw[readIndex + 1]) << 16 | Int(raw[readIndex + 2]) << 8
                    | Int(raw[readIndex + 3])
            }
            guard length <= maxFrame else { throw .frameTooLarge(length, limit: maxFrame) }
            guard writeIndex - readIndex - 4 >= length else {
                // Make sure a large frame will fit once it has arrived.
                if storage.count < length + 4 + Self.readChunk {
                    storage.append(
                        contentsOf: [UInt8](repeating: 0, count: length + 4 + Self.readChunk - storage.count))
                }
                return
            }
            let start = readIndex + 4
            readIndex = start + length
            let result = storage.withUnsafeBytes { raw in
                Result { () throws(WireError) in try body(UnsafeRawBufferPointer(rebasing: raw[start..<start + length]))
                }
            }
            try result.get()
        }
    }

    /// Consumes `count` raw bytes (the preamble), if that many have arrived.
    mutating func take(_ count: Int) -> [UInt8]? {
        guard writeIndex - readIndex >= count else { return nil }
        defer { readIndex += count }
        return Array(storage[readIndex..<readIndex + count])
    }
}
