import Glibc
import OscarBase

// Encoded messages and outcomes travel from the transport to their targets
// as `RawSpan`s: borrowed bytes (a slice of a connection's read buffer) that
// the compiler keeps from escaping the call. This file is where such a span
// meets the codec's pointer-based internals, so no layer above needs an
// unsafe pointer to read, compare or keep one.

extension RawSpan {
    /// The bytes, copied: for a message that must outlive the call that
    /// lent them (a mailbox, a hop to another loop, a held message).
    package var copiedBytes: [UInt8] {
        withUnsafeBytes { Array($0) }
    }

    /// Appends the bytes to `out`: one copy, where `copiedBytes` and an
    /// append would make two.
    package func append(to out: inout [UInt8]) {
        withUnsafeBytes { out.append(contentsOf: $0) }
    }

    /// The bytes read as UTF-8 text (a manifest or a path); invalid
    /// sequences are repaired, as `String(decoding:as:)` does.
    package var utf8Text: String {
        withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// True when these bytes are exactly `bytes`. Compared with `memcmp`:
    /// a manifest is compared on every message that arrives encoded.
    package func equals(_ bytes: [UInt8]) -> Bool {
        guard byteCount == bytes.count else { return false }
        guard byteCount > 0 else { return true }
        return withUnsafeBytes { mine in
            bytes.withUnsafeBytes { theirs in memcmp(mine.baseAddress!, theirs.baseAddress!, byteCount) == 0 }
        }
    }

    /// True when these bytes are `text`'s UTF-8.
    package func isUTF8(of text: String) -> Bool {
        withUnsafeBytes { $0.isUTF8(of: text) }
    }
}

// No `Result` of the decoded type here: these run in generic code that is
// not specialized (a reaction, a distributed function's argument), where the
// metadata of a `Result<T, _>` would be looked up on every message.

extension CBORDecoder {
    /// Decodes one whole item from borrowed bytes.
    package func decode<T: Decodable>(_ type: T.Type, from bytes: RawSpan) throws(CBORError) -> T {
        try bytes.withUnsafeBytes { (raw) throws(CBORError) in try decode(type, from: raw) }
    }

    /// Decodes one whole item from borrowed bytes with a decoding object
    /// kept by the caller (an actor cell keeps one). Not reentrant.
    @inlinable
    package func decode<T: Decodable>(
        _ type: T.Type, from bytes: RawSpan, using decoding: CBORDecoding
    ) throws(CBORError) -> T {
        try bytes.withUnsafeBytes { (raw) throws(CBORError) in try decode(type, from: raw, using: decoding) }
    }

    /// Decodes the item at `offset` of borrowed bytes, one of several in a
    /// row, and sets `end` to where it ends.
    package func decode<T: Decodable>(
        _ type: T.Type, from bytes: RawSpan, itemAt offset: Int, depth: Int = 0, end: inout Int
    ) throws(CBORError) -> T {
        try bytes.withUnsafeBytes { (raw) throws(CBORError) in
            try decode(type, from: raw, itemAt: offset, depth: depth, end: &end)
        }
    }
}

extension CBORReader {
    /// Runs `body` with a reader over borrowed bytes, from their start. The
    /// reader must not outlive `body`: it points into `bytes`.
    package static func reading<R>(
        _ bytes: RawSpan, _ body: (inout CBORReader) throws(CBORError) -> R
    ) throws(CBORError) -> R {
        try bytes.withUnsafeBytes { (raw) throws(CBORError) in
            var reader = CBORReader(raw)
            return try body(&reader)
        }
    }
}
