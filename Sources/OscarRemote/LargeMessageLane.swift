import Foundation
import OscarCBOR

/// The sending side of the large-message lane of one association: messages
/// too large for one frame wait here and leave as chunk frames, a few at a
/// time, between the ordinary frames.
///
/// Why chunks and a window: one 32 MiB frame would hold the connection while
/// every small frame behind it waits, and so would 32 MiB of chunks handed to
/// the socket at once (they would sit in the kernel's buffers ahead of later
/// small frames). So a chunk goes only when the ordinary lane has nothing
/// waiting, and only while less than a window of chunk bytes is
/// unacknowledged by the receiver: a small frame waits behind less than a
/// window and a chunk. The association
/// chooses the window: `window` while the lane has the connection to itself,
/// `windowBesideSmallFrames` while small frames are going to the same node.
///
/// Why per-recipient queueing: a frame to an actor that has a large message
/// queued here joins this queue behind it, whole. Otherwise a small message
/// sent after a large one to the same actor would overtake it, and messages
/// from one sender to one actor arrive in the order sent.
///
/// A pure value: the association writes what `nextFrame` returns and passes
/// the receiver's acknowledgements to `acknowledged`.
struct LargeMessageLane {
    /// Bytes of message a chunk frame carries at most: with its header it
    /// fits a 64 KiB frame.
    static let chunkBytes = 64 * 1024 - 16
    /// Chunk bytes unacknowledged at most while no small frames go to the
    /// node: four chunks. Sixteen gave W5 +30 % at 1 MiB, but every small
    /// frame sent meanwhile waited behind them.
    static let window = 4 * chunkBytes
    /// Chunk bytes unacknowledged at most while small frames go to the node
    /// too: one chunk, so a small frame finds one or two ahead of it in the
    /// socket (a message's short last chunk and the next one's first). In
    /// W2S on the 2-core VM (alternating builds, three runs each), this
    /// window against four chunks throughout took W2's p50 from 132–136 to
    /// 37–40 µs and its p99 from 1.43–1.62 ms to 290–322 µs, and the stream
    /// beside it from 1.77–1.91 to 0.98–1.09 GB/s; two chunks throughout
    /// gave 52–62 µs and 0.4–1.0 ms.
    static let windowBesideSmallFrames = chunkBytes

    private struct Entry {
        /// Holds the message's whole frame, without its length prefix, from
        /// `bodyStart` on: the buffer the message was encoded into, when
        /// the association hands that over rather than copying the frame out.
        var buffer: [UInt8]
        var bodyStart: Int
        /// Large byte strings left out of `buffer` (offsets in it), written
        /// into the chunks from their own storage.
        var splices: [CBORSplice]
        var splicedBytes: Int
        var bodyCount: Int { buffer.count - bodyStart + splicedBytes }
        /// Whose order it keeps (nil for a reply, which has no recipient).
        var recipient: String?
        /// Bytes of the body already sent in chunks.
        var sent = 0
        /// A frame that fits one frame: it queued here only to keep its
        /// place behind a large message to the same recipient.
        var whole: Bool
    }

    private var entries: [Entry] = []
    private var head = 0
    /// Queued recipients and how many entries each has here.
    private var recipients: [String: Int] = [:]
    /// Bytes queued and not yet sent (the lane's own bound counts these).
    private(set) var queuedBytes = 0
    /// Chunk bytes sent and not yet acknowledged.
    private(set) var unacknowledged = 0

    var isEmpty: Bool { head == entries.count }

    /// Whether a frame to `recipient` must queue here to keep its order.
    func holds(recipient: String) -> Bool { !recipients.isEmpty && recipients[recipient] != nil }

    /// Queues the frame body that `buffer` holds from `bodyStart` on, with
    /// `splices` written in: chunked if `whole` is false, else sent as it is
    /// (a whole body has no splices: a splice alone is larger than a chunk).
    mutating func enqueue(
        _ buffer: [UInt8], bodyStart: Int = 0, splices: [CBORSplice] = [], recipient: String?, whole: Bool
    ) {
        let entry = Entry(
            buffer: buffer, bodyStart: bodyStart, splices: splices, splicedBytes: CBORSplice.byteCount(splices),
            recipient: recipient, whole: whole && splices.isEmpty)
        entries.append(entry)
        queuedBytes += entry.bodyCount
        if let recipient { recipients[recipient, default: 0] += 1 }
    }

    /// The next frame to write, or nil when the lane is empty or `window`
    /// chunk bytes are unacknowledged.
    mutating func nextFrame(window: Int = Self.window) -> OutgoingFrame? {
        guard head < entries.count else { return nil }
        if entries[head].whole {
            let entry = entries[head]
            finishEntry()
            return OutgoingFrame(
                head: Self.prefix(entry.bodyCount, headBytes: 0), pieces: [.buffer(entry.buffer[entry.bodyStart...])],
                isChunk: false)
        }
        guard unacknowledged < window else { return nil }
        let bodyCount = entries[head].bodyCount
        let start = entries[head].sent
        let count = min(Self.chunkBytes, bodyCount - start)
        let first = start == 0
        var frameHead = Self.prefix(2 + (first ? 4 : 0) + count, headBytes: first ? 6 : 2)
        frameHead.append(WireKind.chunk.rawValue)
        frameHead.append(first ? Self.firstChunk : 0)
        if first { Self.appendUInt32(UInt32(bodyCount), to: &frameHead) }
        let pieces = Self.pieces(of: entries[head], from: start, count: count)
        entries[head].sent += count
        unacknowledged += count
        if entries[head].sent == bodyCount { finishEntry() }
        return OutgoingFrame(head: frameHead, pieces: pieces, isChunk: true)
    }

    /// The `count` bytes of the entry's body from `start` on, as slices of
    /// where they are: the pieces of its buffer between the splices, and
    /// the splices' bytes.
    private static func pieces(of entry: Entry, from start: Int, count: Int) -> [OutgoingFrame.Piece] {
        let end = start + count
        var pieces: [OutgoingFrame.Piece] = []
        var position = 0  // in the body, where the next piece starts
        var cursor = entry.bodyStart  // in the buffer, where the next buffer piece starts
        /// The part of a piece of `length` bytes that falls in the range,
        /// relative to the piece's start.
        func overlap(_ length: Int) -> Range<Int>? {
            defer { position += length }
            let low = max(start, position)
            let high = min(end, position + length)
            return low < high ? (low - position)..<(high - position) : nil
        }
        func takeBuffer(upTo bufferEnd: Int) {
            if let part = overlap(bufferEnd - cursor) {
                pieces.append(.buffer(entry.buffer[(cursor + part.lowerBound)..<(cursor + part.upperBound)]))
            }
            cursor = bufferEnd
        }
        for splice in entry.splices where position < end {
            takeBuffer(upTo: splice.offset)
            let data = splice.data
            if let part = overlap(data.count) {
                let base = data.startIndex
                pieces.append(.data(data[(base + part.lowerBound)..<(base + part.upperBound)]))
            }
        }
        if position < end { takeBuffer(upTo: entry.buffer.count) }
        return pieces
    }

    private mutating func finishEntry() {
        queuedBytes -= entries[head].bodyCount
        if let recipient = entries[head].recipient {
            let left = recipients[recipient, default: 1] - 1
            recipients[recipient] = left == 0 ? nil : left
        }
        entries[head].buffer = []
        entries[head].bodyStart = 0
        entries[head].splices = []
        head += 1
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        }
    }

    /// The head is a message to chunk (not a frame kept in its place) and
    /// none of it has gone yet: it may still take the bulk lane.
    var headIsUnstartedMessage: Bool { head < entries.count && !entries[head].whole && entries[head].sent == 0 }

    /// The message at the head, whole, for the bulk lane: its body as
    /// slices of where it is, and its length. Nil when the head is not a
    /// message to chunk, or was handed out already. It stays at the head,
    /// holding the frames queued behind it, until `finishHanded`.
    mutating func handHeadToBulkLane() -> (body: [OutgoingFrame.Piece], count: Int)? {
        guard headIsUnstartedMessage else { return nil }
        let count = entries[head].bodyCount
        entries[head].sent = count
        return (Self.pieces(of: entries[head], from: 0, count: count), count)
    }

    /// The handed message is gone (delivered or failed): the frames behind
    /// it may go.
    mutating func finishHanded() {
        guard head < entries.count else { return }
        finishEntry()
    }

    /// The receiver took `count` more chunk bytes.
    mutating func acknowledged(_ count: Int) { unacknowledged = max(0, unacknowledged - count) }

    /// A new connection: the message being chunked starts again from its
    /// first chunk (its receiver on the old connection drops what it had),
    /// and nothing is unacknowledged on the new one.
    mutating func restart() {
        if head < entries.count { entries[head].sent = 0 }
        unacknowledged = 0
    }

    mutating func removeAll() { self = LargeMessageLane() }

    /// A frame the lane hands out: its head (length prefix, kind, flags, a
    /// first chunk's length) and the body's bytes as slices of the storage
    /// they were queued in: the entry's buffer and its spliced `Data`s.
    ///
    /// Why slices, not one array: copying each 64 KiB chunk into a frame
    /// of its own was a third of the sending loop's copying (perf, W2S);
    /// the socket takes the pieces in one writev. The slices keep their
    /// storage alive, so the frame stays valid whatever the lane does next
    /// (a write that fails empties the lane from inside the write).
    struct OutgoingFrame {
        enum Piece: Sendable {
            case buffer(ArraySlice<UInt8>)
            case data(Data)
        }
        var head: [UInt8]
        var pieces: [Piece]
        var isChunk: Bool

        /// Calls `body` with the frame's bytes, in order, as buffers valid
        /// during the call.
        func withBuffers<R>(_ body: ([UnsafeRawBufferPointer]) -> R) -> R {
            head.withUnsafeBytes { head in
                var buffers = [head]
                buffers.reserveCapacity(1 + pieces.count)
                return withPieces(from: 0, &buffers, body)
            }
        }

        private func withPieces<R>(
            from index: Int, _ buffers: inout [UnsafeRawBufferPointer], _ body: ([UnsafeRawBufferPointer]) -> R
        ) -> R {
            guard index < pieces.count else { return body(buffers) }
            // Each piece's bytes are borrowed for the rest of the call.
            switch pieces[index] {
            case .buffer(let slice):
                return slice.withUnsafeBytes { bytes in
                    buffers.append(bytes)
                    return withPieces(from: index + 1, &buffers, body)
                }
            case .data(let data):
                return data.withUnsafeBytes { bytes in
                    buffers.append(bytes)
                    return withPieces(from: index + 1, &buffers, body)
                }
            }
        }

        /// The frame in one array (with TLS, and for tests).
        var bytes: [UInt8] { withBuffers { $0.joinedBytes } }
    }

    /// Flag bit of a chunk frame: the first chunk, which carries the
    /// message's length.
    static let firstChunk: UInt8 = 2

    /// An acknowledgement frame for `count` chunk bytes.
    static func acknowledgement(_ count: Int) -> [UInt8] {
        var frame = prefix(6, headBytes: 6)
        frame.append(WireKind.chunkAck.rawValue)
        frame.append(0)
        appendUInt32(UInt32(count), to: &frame)
        return frame
    }

    /// A frame's length prefix for a body of `length` bytes, with room for
    /// the `headBytes` of it that will follow in the same array (the rest
    /// is written from where it is).
    private static func prefix(_ length: Int, headBytes: Int) -> [UInt8] {
        var frame: [UInt8] = []
        frame.reserveCapacity(4 + headBytes)
        appendUInt32(UInt32(length), to: &frame)
        return frame
    }

    static func appendUInt32(_ value: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(value >> 24))
        out.append(UInt8(truncatingIfNeeded: value >> 16))
        out.append(UInt8(truncatingIfNeeded: value >> 8))
        out.append(UInt8(truncatingIfNeeded: value))
    }

    static func readUInt32(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Int {
        Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
    }
}
