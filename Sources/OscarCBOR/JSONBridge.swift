import Foundation
import OscarBase

/// JSON ↔ CBOR, one to one, for the CLI: objects become maps with text keys,
/// arrays arrays, strings text, integers integers, other numbers floats,
/// booleans and null themselves. Byte strings and tags, which JSON lacks,
/// come out as `{"$bytes": "<hex>"}` and `{"$tag": n, "value": …}`; an
/// object whose one key is `$bytes` goes in as a byte string, so a message
/// with a `Data` in it can be sent from the terminal as it is printed.
package enum JSONBridge {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case invalidJSON(String)
        /// An object has this key twice: which one wins would be a guess.
        case duplicateKey(String)
        /// Valid JSON whose `{"$bytes": …}` does not spell bytes.
        case invalidBytes(String)
        public var description: String {
            switch self {
            case .invalidJSON(let why): "invalid JSON: \(why)"
            case .invalidBytes(let why): why
            case .duplicateKey(let key): "invalid JSON: the key \(quote(key)) appears twice in one object"
            }
        }
    }

    /// Parses JSON text (RFC 8259). An object's keys must differ (RFC 8259
    /// leaves duplicates to the reader; here they are an error, not a silent
    /// choice of one); its entries come out sorted by key. Nesting deeper
    /// than CBOR's limit (`CBORReader.maxDepth`) is refused.
    public static func cbor(fromJSON text: String) throws(Failure) -> CBORValue {
        var reader = JSONReader(Array(text.utf8))
        reader.skipSpace()
        let value = try reader.value(depth: 0)
        reader.skipSpace()
        guard reader.isAtEnd else { throw reader.failure("unexpected text after the value") }
        return value
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

    /// `s` as a JSON string, quoted, with `"`, `\\` and control characters
    /// escaped: for JSON built by hand.
    public static func quote(_ s: String) -> String {
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

/// Reads JSON text byte by byte into CBOR values, with the position of
/// what it refuses.
private struct JSONReader {
    let bytes: [UInt8]
    var i = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { i >= bytes.count }

    func failure(_ what: String) -> JSONBridge.Failure { .invalidJSON("\(what) at byte \(i)") }

    mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0a || bytes[i] == 0x0d || bytes[i] == 0x09 { i += 1 }
    }

    mutating func expect(_ literal: String, _ value: CBORValue) throws(JSONBridge.Failure) -> CBORValue {
        let utf8 = Array(literal.utf8)
        guard bytes.count - i >= utf8.count, bytes[i..<i + utf8.count].elementsEqual(utf8) else {
            throw failure("unexpected character")
        }
        i += utf8.count
        return value
    }

    /// The value at `i`, at `depth` (the top value is at 0).
    mutating func value(depth: Int) throws(JSONBridge.Failure) -> CBORValue {
        guard depth < CBORReader.maxDepth else {
            throw failure("nesting deeper than \(CBORReader.maxDepth) levels")
        }
        guard i < bytes.count else { throw failure("the text ends where a value was expected") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .text(try string())
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "n"): return try expect("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure("unexpected character")
        }
    }

    mutating func object(depth: Int) throws(JSONBridge.Failure) -> CBORValue {
        i += 1
        var entries: [String: CBORValue] = [:]
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") {
            i += 1
            return .map([])
        }
        while true {
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw failure("expected a key") }
            let key = try string()
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw failure("expected ':'") }
            i += 1
            skipSpace()
            let value = try self.value(depth: depth + 1)
            guard entries.updateValue(value, forKey: key) == nil else { throw .duplicateKey(key) }
            skipSpace()
            guard i < bytes.count else { throw failure("the text ends inside an object") }
            if bytes[i] == UInt8(ascii: "}") {
                i += 1
                if entries.count == 1, let spelled = entries[Self.bytesKey] { return try byteString(spelled) }
                return .map(entries.keys.sorted().map { (.text($0), entries[$0] ?? .null) })
            }
            guard bytes[i] == UInt8(ascii: ",") else { throw failure("expected ',' or '}'") }
            i += 1
        }
    }

    /// The key of an object that stands for a byte string.
    static let bytesKey = "$bytes"

    /// The byte string that `{"$bytes": "<hex>"}` spells (the object ends
    /// at `i`).
    func byteString(_ spelled: CBORValue) throws(JSONBridge.Failure) -> CBORValue {
        guard case .text(let hex) = spelled, let bytes = [UInt8](hex: hex) else {
            throw .invalidBytes(
                "{\"$bytes\": …} ending at byte \(i) must hold a string of hex digits, two for each byte")
        }
        return .bytes(bytes)
    }

    mutating func array(depth: Int) throws(JSONBridge.Failure) -> CBORValue {
        i += 1
        var items: [CBORValue] = []
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
            i += 1
            return .array([])
        }
        while true {
            skipSpace()
            items.append(try value(depth: depth + 1))
            skipSpace()
            guard i < bytes.count else { throw failure("the text ends inside an array") }
            if bytes[i] == UInt8(ascii: "]") {
                i += 1
                return .array(items)
            }
            guard bytes[i] == UInt8(ascii: ",") else { throw failure("expected ',' or ']'") }
            i += 1
        }
    }

    /// A string at `i` (at its opening quote), unescaped.
    mutating func string() throws(JSONBridge.Failure) -> String {
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < bytes.count else { throw failure("the text ends inside a string") }
            let b = bytes[i]
            switch b {
            case UInt8(ascii: "\""):
                i += 1
                guard let text = String(validating: out, as: UTF8.self) else { throw failure("invalid UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                guard i + 1 < bytes.count else { throw failure("the text ends inside a string") }
                i += 1
                switch bytes[i] {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5c)
                case UInt8(ascii: "/"): out.append(0x2f)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0c)
                case UInt8(ascii: "n"): out.append(0x0a)
                case UInt8(ascii: "r"): out.append(0x0d)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    i += 1
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        // A high surrogate: a low one must follow.
                        guard bytes.count - i >= 2, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u")
                        else { throw failure("a lone surrogate") }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw failure("a lone surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw failure("a lone surrogate") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                    continue
                default: throw failure("an unknown escape")
                }
                i += 1
            case 0..<0x20: throw failure("a control character in a string")
            default:
                out.append(b)
                i += 1
            }
        }
    }

    /// Four hex digits at `i`, as a number; moves past them.
    mutating func hex4() throws(JSONBridge.Failure) -> UInt32 {
        guard bytes.count - i >= 4 else { throw failure("a short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Character(Unicode.Scalar(bytes[i])).hexDigitValue else {
                throw failure("a bad \\u escape")
            }
            value = value << 4 | UInt32(digit)
            i += 1
        }
        return value
    }

    /// A number: an integer when it has no fraction or exponent and fits 64
    /// bits (major type 0 or 1), a float otherwise.
    mutating func number() throws(JSONBridge.Failure) -> CBORValue {
        let start = i
        func digits() -> Int {
            let first = i
            while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
            return i - first
        }
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        let integerStart = i
        let integerDigits = digits()
        guard integerDigits > 0 else { throw failure("a number without digits") }
        guard integerDigits == 1 || bytes[integerStart] != UInt8(ascii: "0") else {
            throw failure("a number with a leading zero")
        }
        var isInteger = true
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() > 0 else { throw failure("a number without digits after '.'") }
            isInteger = false
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { throw failure("a number without exponent digits") }
            isInteger = false
        }
        let text = String(decoding: bytes[start..<i], as: UTF8.self)
        let digitsText = String(decoding: bytes[integerStart..<i], as: UTF8.self)
        if isInteger, let magnitude = UInt64(digitsText) {
            if !negative { return .unsigned(magnitude) }
            if magnitude > 0 { return .negative(magnitude - 1) }
            return .unsigned(0)
        }
        // -2^64, the least integer CBOR holds, has a magnitude one past UInt64.
        if isInteger, negative, digitsText == "18446744073709551616" { return .negative(.max) }
        guard let double = Double(text), double.isFinite else { throw failure("a number out of range") }
        return .float(double)
    }
}
