import OscarBase

/// One CBOR item kept as its encoded bytes: carried through a message
/// without being decoded, and written back byte for byte.
///
/// A distributed call's arguments and result travel this way through the
/// nodes that only pass them on (a pool routee, a virtual-actor host, the
/// CLI), while the two ends decode them as their own types.
///
/// Through Oscar's CBOR coders it is the item itself (checked to be whole
/// when read); other coders see it as a `CBORValue`.
package struct RawCBOR: Codable, Sendable, Hashable {
    /// Exactly one well-formed CBOR item.
    public var bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public init(from decoder: any Decoder) throws {
        guard let cbor = decoder as? CBORDecoding else {
            bytes = try CBORValue(from: decoder).cbor
            return
        }
        let start = cbor.position
        bytes = Array(cbor.bytes[start..<(try cbor.endOfItem(at: start, depth: cbor.depth))])
    }

    public func encode(to encoder: any Encoder) throws {
        guard let cbor = encoder as? CBOREncoding else {
            return try CBORValue(cbor: bytes).encode(to: encoder)
        }
        cbor.writer.bytes.append(contentsOf: bytes)
    }
}
