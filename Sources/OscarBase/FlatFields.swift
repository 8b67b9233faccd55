/// Records coded as fields in a row of an unkeyed container, with no map
/// and no keys: for the membership messages every node codes many times a
/// second, where a keyed container's key search per field was most of the
/// cost (docs/BENCHMARKS.md, "An idle cluster").
extension NodeAddress {
    /// host, port, uid.
    package func encodeFields(to fields: inout any UnkeyedEncodingContainer) throws {
        try fields.encode(host)
        try fields.encode(port)
        try fields.encode(uid)
    }

    package init(fields: inout any UnkeyedDecodingContainer) throws {
        self.init(
            host: try fields.decode(String.self), port: try fields.decode(Int.self), uid: try fields.decode(UInt64.self)
        )
    }
}
