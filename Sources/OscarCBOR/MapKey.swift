import Glibc
import OscarBase

/// One key of a map being decoded, as what identifies it: RFC 8949 §5.6
/// makes a map with two equal keys invalid, and Oscar's decoders refuse
/// one (`CBORError.duplicateKey`).
///
/// Keys are equal as data items, not as bytes: a text key is its UTF-8,
/// however it was chunked and whatever the width of its head; any other key
/// is its preferred serialization, so `01` and `18 01` are the same key.
struct MapKey {
    /// The key's UTF-8 in the input (a definite-length text key), when
    /// `owned` is nil.
    package var range: Range<Int>
    /// The identifying bytes when they are not a range of the input: the
    /// joined chunks of an indefinite-length text key, or the preferred
    /// serialization of a key that is not text.
    var owned: [UInt8]?
    var isText: Bool

    /// Reads the key at `r` (an item at `depth`), leaving `r` after it.
    /// Text keys must be valid UTF-8.
    package static func read(_ r: inout CBORReader, depth: Int) throws(CBORError) -> MapKey {
        try CBORReader.check(depth: depth)
        let start = r.position
        let head = try r.head()
        guard head.major == 3 else {
            r.position = start
            let value = try CBORValue.read(&r, depth: depth)
            return MapKey(range: start..<start, owned: value.cbor, isText: false)
        }
        if head.isIndefinite {
            return MapKey(range: start..<start, owned: Array(try r.wholeText(head, start: start).utf8), isText: true)
        }
        let offset = r.position
        let bytes = try r.stringBytes(head)
        guard isUTF8(bytes) else { throw .malformed("text string is not valid UTF-8", at: start) }
        return MapKey(range: offset..<offset + bytes.count, owned: nil, isText: true)
    }

    /// True when `bytes` are valid UTF-8; ASCII costs no allocation.
    package static func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        for byte in bytes where byte >= 0x80 { return String(validating: bytes, as: UTF8.self) != nil }
        return true
    }

    func withBytes<R>(in input: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        if let owned { return owned.withUnsafeBytes(body) }
        return body(UnsafeRawBufferPointer(rebasing: input[range]))
    }

    /// Orders keys (text after the rest, then by length, then by bytes),
    /// so that equal keys sort next to each other.
    package static func compare(_ a: MapKey, _ b: MapKey, in input: UnsafeRawBufferPointer) -> Int {
        if a.isText != b.isText { return a.isText ? 1 : -1 }
        return a.withBytes(in: input) { x in
            b.withBytes(in: input) { y in
                if x.count != y.count { return x.count < y.count ? -1 : 1 }
                guard x.count > 0 else { return 0 }
                return Int(memcmp(x.baseAddress!, y.baseAddress!, x.count))
            }
        }
    }

    /// A key that occurs twice in `keys`, if any. Pairwise for a few keys;
    /// sorted for more, so a map of a million keys costs n log n, not n².
    static func firstDuplicate(_ keys: [MapKey], in input: UnsafeRawBufferPointer) -> MapKey? {
        if keys.count <= 16 {
            for i in keys.indices {
                for j in keys.indices where j > i && compare(keys[i], keys[j], in: input) == 0 { return keys[i] }
            }
            return nil
        }
        let order = keys.indices.sorted { compare(keys[$0], keys[$1], in: input) < 0 }
        for (i, j) in zip(order, order.dropFirst()) where compare(keys[i], keys[j], in: input) == 0 {
            return keys[i]
        }
        return nil
    }

    /// The key in diagnostic notation, for the error that names it.
    func diagnostic(in input: UnsafeRawBufferPointer) -> String {
        guard isText else { return (try? CBORValue(cbor: owned ?? [])).map(\.description) ?? "?" }
        return withBytes(in: input) { "\"" + String(decoding: $0, as: UTF8.self) + "\"" }
    }
}
