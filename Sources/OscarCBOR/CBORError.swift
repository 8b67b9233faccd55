import OscarBase

/// Why bytes could not be read as CBOR, or a CBOR item as the requested type.
/// Decoding input from the network only ever fails with one of these; it never
/// traps.
@usableFromInline
package enum CBORError: Error, Hashable, CustomStringConvertible {
    case truncated(at: Int)
    case malformed(String, at: Int)
    case tooDeep(limit: Int)
    /// A map holds two equal keys (RFC 8949 §5.6: such a map is invalid);
    /// the key is in CBOR diagnostic notation.
    case duplicateKey(String, path: String)
    case typeMismatch(expected: String, found: String, path: String)
    case missingKey(String, path: String)
    case outOfRange(String, path: String)
    /// A type's own `Codable` code refused the value.
    case invalid(String)

    public var description: String {
        switch self {
        case .truncated(let at): "CBOR ends early (at byte \(at))"
        case .malformed(let what, let at): "malformed CBOR at byte \(at): \(what)"
        case .tooDeep(let limit): "CBOR nests deeper than \(limit) levels"
        case .duplicateKey(let k, let p): "a map has the key \(k) twice at \(p.isEmpty ? "the top" : p)"
        case .typeMismatch(let e, let f, let p): "expected \(e) but found \(f) at \(p.isEmpty ? "the top" : p)"
        case .missingKey(let k, let p): "missing key '\(k)' at \(p.isEmpty ? "the top" : p)"
        case .outOfRange(let what, let p): "\(what) out of range at \(p.isEmpty ? "the top" : p)"
        case .invalid(let text): text
        }
    }
}
