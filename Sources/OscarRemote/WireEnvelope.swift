import OscarBase
import OscarCBOR
import OscarRuntime

/// What a frame carries: its first byte.
package enum WireKind: UInt8, Sendable {
    case tell = 1
    case ask = 2
    case reply = 3
    case failure = 4
    /// A part of a message too large for one frame (see `LargeMessageLane`).
    case chunk = 5
    /// The receiver took this many more chunk bytes: the sender may send more.
    case chunkAck = 6
    /// Delivers a message that came on the bulk lane, here among the
    /// sender's frames (see `BulkLane`): its id, 8 bytes.
    case commit = 7
    case hello = 0x10
    case challenge = 0x11
    case proof = 0x12
    case accept = 0x13
    case reject = 0x1f
}

/// The binary envelope of a message frame (see docs/PROTOCOL.md):
///
/// ```
/// kind u8 | flags u8 | [correlation u64] | [recipient str] | [sender str] | [manifest str] | payload
/// ```
///
/// `str` is a u16 big-endian length and UTF-8 bytes. Correlation is present
/// for ask, reply and failure; recipient and manifest for tell and ask; sender
/// when flag bit 0 is set. The payload (CBOR) runs to the end of the frame.
///
/// Why binary and not CBOR: the receiver decodes only this header on its hot
/// path (where to deliver, which reaction decodes the payload), and fixed
/// fields parse without any allocation.
package struct WireEnvelope {
    public static let hasSender: UInt8 = 1

    public var kind: WireKind
    public var correlation: UInt64 = 0
    /// Byte ranges within the frame, so nothing is copied to read them.
    public var recipient: Range<Int> = 0..<0
    public var sender: Range<Int>? = nil
    public var manifest: Range<Int> = 0..<0
    public var payload: Range<Int> = 0..<0

    static func hasCorrelation(_ kind: WireKind) -> Bool { kind == .ask || kind == .reply || kind == .failure }
    static func hasRecipient(_ kind: WireKind) -> Bool { kind == .tell || kind == .ask }

    /// Parses the header of `frame` (the bytes after the length prefix).
    public static func parse(_ frame: UnsafeRawBufferPointer) throws(WireError) -> WireEnvelope {
        guard frame.count >= 2 else { throw .malformedFrame("a frame of \(frame.count) bytes has no header") }
        guard let kind = WireKind(rawValue: frame[0]) else { throw .unknownKind(frame[0]) }
        let flags = frame[1]
        var p = 2
        var envelope = WireEnvelope(kind: kind)
        if hasCorrelation(kind) {
            guard frame.count - p >= 8 else { throw .malformedFrame("no room for the correlation id") }
            envelope.correlation = (0..<8).reduce(0) { $0 << 8 | UInt64(frame[p + $1]) }
            p += 8
        }
        if hasRecipient(kind) { envelope.recipient = try string(in: frame, at: &p) }
        if flags & hasSender != 0 { envelope.sender = try string(in: frame, at: &p) }
        if hasRecipient(kind) { envelope.manifest = try string(in: frame, at: &p) }
        envelope.payload = p..<frame.count
        return envelope
    }

    /// The range of the length-prefixed string at `p`; moves `p` past it.
    /// (An `inout` argument, not a captured variable, which would be checked
    /// for exclusivity at run time on every frame.)
    private static func string(in frame: UnsafeRawBufferPointer, at p: inout Int) throws(WireError) -> Range<Int> {
        guard frame.count - p >= 2 else { throw .malformedFrame("a string length runs past the frame") }
        let n = Int(frame[p]) << 8 | Int(frame[p + 1])
        p += 2
        guard frame.count - p >= n else { throw .malformedFrame("a string of \(n) bytes runs past the frame") }
        defer { p += n }
        return p..<p + n
    }

    /// Appends one whole frame (length prefix included) to `out`.
    /// `payload` writes the CBOR payload in place; the length is patched after.
    package static func append<E: Error>(
        to out: inout [UInt8], kind: WireKind, correlation: UInt64 = 0, recipient: String = "", sender: String? = nil,
        manifest: String = "", payload: (inout [UInt8]) throws(E) -> Void
    ) throws(E) {
        let start = out.count
        // Byte by byte: an array literal here was an allocation per frame.
        out.append(0)
        out.append(0)
        out.append(0)
        out.append(0)
        out.append(kind.rawValue)
        out.append(sender == nil ? 0 : hasSender)
        if hasCorrelation(kind) {
            var shift: UInt64 = 64
            while shift > 0 {
                shift -= 8
                out.append(UInt8(truncatingIfNeeded: correlation >> shift))
            }
        }
        func string(_ s: String) {
            var s = s
            s.withUTF8 { utf8 in
                let n = min(utf8.count, Int(UInt16.max))
                out.append(UInt8(n >> 8))
                out.append(UInt8(truncatingIfNeeded: n))
                out.append(contentsOf: utf8.prefix(n))
            }
        }
        if hasRecipient(kind) { string(recipient) }
        if let sender { string(sender) }
        if hasRecipient(kind) { string(manifest) }
        do {
            try payload(&out)
        } catch {
            out.removeSubrange(start...)
            throw error
        }
        setLength(out.count - start - 4, in: &out, frameAt: start)
    }

    /// Writes the length prefix of the frame at `start`.
    package static func setLength(_ length: Int, in out: inout [UInt8], frameAt start: Int) {
        let length = UInt32(length)
        out[start] = UInt8(length >> 24)
        out[start + 1] = UInt8(truncatingIfNeeded: length >> 16)
        out[start + 2] = UInt8(truncatingIfNeeded: length >> 8)
        out[start + 3] = UInt8(truncatingIfNeeded: length)
    }

    /// Writes `correlation` into the frame at `start` of `out`, whose place
    /// `append` made (with correlation 0 for a frame encoded off the loop
    /// that assigns correlations). A kind without one is left as it is.
    package static func setCorrelation(_ correlation: UInt64, kind: WireKind, in out: inout [UInt8], frameAt start: Int)
    {
        guard hasCorrelation(kind) else { return }
        for i in 0..<8 {
            out[start + 6 + i] = UInt8(truncatingIfNeeded: correlation >> UInt64(56 - 8 * i))
        }
    }
}

/// Why bytes from a peer are not a valid frame. The connection that sent them
/// is closed with this reason logged; the node runs on.
package enum WireError: Error, Hashable, CustomStringConvertible {
    case frameTooLarge(Int, limit: Int)
    case malformedFrame(String)
    case unknownKind(UInt8)
    case badPreamble
    case versionMismatch(ours: UInt16, theirs: UInt16)
    /// Large messages already being reassembled from every peer reached the
    /// node's bound: one more of this many bytes does not fit.
    case reassemblyFull(Int)

    public var description: String {
        switch self {
        case .frameTooLarge(let n, let limit): "frame of \(n) bytes exceeds the maximum of \(limit)"
        case .malformedFrame(let why): "malformed frame: \(why)"
        case .unknownKind(let k): "unknown frame kind \(k)"
        case .badPreamble: "the peer does not speak the Oscar protocol (bad magic)"
        case .versionMismatch(let ours, let theirs): "protocol version mismatch: ours \(ours), theirs \(theirs)"
        case .reassemblyFull(let n):
            "no room to reassemble a message of \(n) bytes: large messages from peers fill the node's bound"
        }
    }
}
