import OscarCBOR
import Synchronization

/// The receiving side of the large-message lane on one connection: chunk
/// frames in, the message's whole frame out once its last chunk is here.
///
/// A sender chunks one message at a time per connection, so a connection
/// reassembles at most one. What a peer can make this node hold is bounded
/// twice: one message at most `maxMessageSize` (declared in its first chunk
/// and checked before anything is kept; a larger one is skipped), and all
/// connections together at most the transport's reassembly bound
/// (`reserve`).
struct Reassembly {
    /// Lent to the decoders when whole, so a large `Data` in the message is
    /// not copied out of it.
    private var body: LendableBuffer?
    /// The declared length of the message being reassembled (its buffer is
    /// made for exactly that much); 0 when none is.
    private var expected: Int { body.map { $0.count + $0.room } ?? 0 }
    /// Chunks of a message were dropped (an injected blackhole): its later
    /// chunks are ignored, up to the next first chunk.
    private var skipping = false

    /// What a chunk did.
    enum Outcome {
        /// The message is not whole yet (or its chunks are being skipped).
        case partial
        /// The message's frame body, whole.
        case whole(LendableBuffer)
        /// A message over this node's maximum: its chunks are skipped.
        /// `head` is the start of its body (kind, flags, correlation), so an
        /// ask can be answered with `messageTooLarge`.
        case refused(length: Int, head: [UInt8])
    }

    /// Takes one chunk frame's bytes after its kind and flags. `reserve`
    /// asks the transport for a first chunk's declared length (false: the
    /// node's bound is reached).
    mutating func receive(
        _ chunk: UnsafeRawBufferPointer, first: Bool, maxMessageSize: Int, reserve: (Int) -> Bool
    ) throws(WireError) -> Outcome {
        var data = chunk
        if first {
            guard expected == 0 else { throw .malformedFrame("a first chunk while a message is still arriving") }
            guard chunk.count >= 4 else { throw .malformedFrame("a first chunk without the message's length") }
            let length = LargeMessageLane.readUInt32(chunk, at: 0)
            guard length <= maxMessageSize else {
                // The sender's maximum is larger than ours: refuse this
                // message, not the connection.
                self = Reassembly()
                skipping = true
                return .refused(length: length, head: Array(chunk[4..<min(chunk.count, 14)]))
            }
            guard length > 0 else { throw .malformedFrame("a chunked message of 0 bytes") }
            guard reserve(length) else { throw .reassemblyFull(length) }
            skipping = false
            body = LendableBuffer(capacity: length)
            data = UnsafeRawBufferPointer(rebasing: chunk[4...])
        } else if expected == 0 {
            if skipping { return .partial }
            throw .malformedFrame("a chunk with no message arriving")
        }
        guard let body, data.count <= body.room else {
            throw .malformedFrame("chunks run past the message's length of \(expected)")
        }
        body.append(data)
        guard body.room == 0 else { return .partial }
        defer { self = Reassembly() }
        return .whole(body)
    }

    /// Drops the message being reassembled (the connection closed, or an
    /// injected fault dropped one of its chunks) and returns the bytes it
    /// had reserved.
    mutating func abandon(skippingItsRest: Bool = false) -> Int {
        let reserved = expected
        self = Reassembly()
        skipping = skippingItsRest
        return reserved
    }
}

/// The transport's bound on bytes of large messages being reassembled or
/// waiting for their commit, from every peer at once: reserved and released
/// by the I/O loop and by the bulk lane's threads.
final class ReassemblyBudget: Sendable {
    private let capacity: Int
    private let used = Atomic<Int>(0)

    init(capacity: Int) { self.capacity = capacity }

    /// Takes room for `bytes`; false when the bound has none.
    func reserve(_ bytes: Int) -> Bool {
        var current = used.load(ordering: .relaxed)
        while current + bytes <= capacity {
            let (exchanged, original) = used.compareExchange(
                expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    @Sendable func release(_ bytes: Int) { used.subtract(bytes, ordering: .relaxed) }

    /// Bytes reserved now (0 once every message held has been delivered).
    var inUse: Int { used.load(ordering: .relaxed) }
}
