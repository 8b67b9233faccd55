import Foundation

/// JSON ↔ CBOR, one to one, for the CLI: objects become maps with text keys,
/// arrays arrays, strings text, integers integers, other numbers floats,
/// booleans and null themselves. Byte strings and tags, which JSON lacks,
/// come out as `{"$bytes": "<hex>"}` and `{"$tag": n, "value": …}`.
public enum JSONBridge {
    public enum Failure: Error, CustomStringConvertible {
        case invalidJSON(String)
        public var description: String {
            switch self {
            case .invalidJSON(let why): "invalid JSON: \(why)"
            }
        }
    }

    public static func cbor(fromJSON text: String) throws(Failure) -> CBORValue {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        } catch {
            throw .invalidJSON((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)")
        }
        return convert(object)
    }

    private static func convert(_ object: Any) -> CBORValue {
        switch object {
        case let dictionary as [String: Any]:
            return .map(dictionary.keys.sorted().map { (.text($0), convert(dictionary[$0]!)) })
        case let array as [Any]: return .array(array.map(convert))
        case let string as String: return .text(string)
        case let number as NSNumber:
            // Foundation marks what the JSON text was: c = true/false,
            // d/f = a number with a fraction or exponent, Q = a large unsigned.
            switch String(cString: number.objCType) {
            case "c": return .bool(number.boolValue)
            case "d", "f": return .float(number.doubleValue)
            case "Q": return .unsigned(number.uint64Value)
            default:
                let int = number.int64Value
                return int >= 0 ? .unsigned(UInt64(int)) : .negative(UInt64(-1 - int))
            }
        default: return .null
        }
    }

    /// A value decoded from JSON text through its own `Decodable` shape (as
    /// CBOR would carry it); nil if the text is not JSON or not that shape.
    public static func decode<T: Decodable>(_ type: T.Type, fromJSON text: String) -> T? {
        guard let value = try? cbor(fromJSON: text), let bytes = try? CBOREncoder().encode(value) else { return nil }
        return try? CBORDecoder().decode(type, from: bytes)
    }

    /// Compact JSON text for a value's `Encodable` shape; nil if it cannot
    /// be encoded.
    public static func json<T: Encodable>(encoding value: T) -> String? {
        guard let bytes = try? CBOREncoder().encode(value), let cbor = try? CBORValue(cbor: bytes) else { return nil }
        return json(from: cbor)
    }

    /// Compact JSON text for a CBOR value.
    public static func json(from value: CBORValue) -> String {
        switch value {
        case .unsigned(let n): "\(n)"
        case .negative: value.description
        case .bytes(let b): "{\"$bytes\":\"\(b.hex)\"}"
        case .text(let s): quote(s)
        case .array(let items): "[" + items.map(json(from:)).joined(separator: ",") + "]"
        case .map(let entries):
            "{"
                + entries.map { entry in
                    let key = if case .text(let s) = entry.key { s } else { entry.key.description }
                    return quote(key) + ":" + json(from: entry.value)
                }.joined(separator: ",") + "}"
        case .tagged(let tag, let v): "{\"$tag\":\(tag),\"value\":\(json(from: v))}"
        case .bool(let b): "\(b)"
        case .null, .undefined: "null"
        case .simple(let v): "{\"$simple\":\(v)}"
        case .float(let d): d.isFinite ? "\(d)" : "null"
        }
    }

    private static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += "\\u" + String(scalar.value, radix: 16).leftPadded(4)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
