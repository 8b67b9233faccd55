import OscarBase

/// Any CBOR data item, for code that does not know the Swift type ahead: the
/// CLI's JSON bridge, diagnostics, and the RFC 8949 Appendix A tests.
package indirect enum CBORValue: Sendable, Equatable, CustomStringConvertible {
    case unsigned(UInt64)
    /// The negative integer -1 - n.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    case map([(key: CBORValue, value: CBORValue)])
    case tagged(UInt64, CBORValue)
    case bool(Bool)
    case null
    case undefined
    case simple(UInt8)
    case float(Double)

    public static func == (a: CBORValue, b: CBORValue) -> Bool {
        switch (a, b) {
        case (.unsigned(let x), .unsigned(let y)), (.negative(let x), .negative(let y)): x == y
        case (.bytes(let x), .bytes(let y)): x == y
        case (.text(let x), .text(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.map(let x), .map(let y)):
            x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        case (.tagged(let t, let x), .tagged(let u, let y)): t == u && x == y
        case (.bool(let x), .bool(let y)): x == y
        case (.null, .null), (.undefined, .undefined): true
        case (.simple(let x), .simple(let y)): x == y
        case (.float(let x), .float(let y)): x == y || (x.isNaN && y.isNaN)
        default: false
        }
    }

    // MARK: - Reading and writing

    /// Decodes exactly one item from `bytes`; trailing bytes are an error.
    package init(cbor bytes: [UInt8]) throws(CBORError) {
        let result = bytes.withUnsafeBytes { raw -> Result<CBORValue, CBORError> in
            var reader = CBORReader(raw)
            do throws(CBORError) {
                let value = try CBORValue.read(&reader, depth: 0)
                guard reader.isAtEnd else { throw .malformed("trailing bytes after the item", at: reader.position) }
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        self = try result.get()
    }

    /// Reads the item at `r`, which is at `depth` (`CBORReader.maxDepth`).
    package static func read(_ r: inout CBORReader, depth: Int) throws(CBORError) -> CBORValue {
        try CBORReader.check(depth: depth)
        let start = r.position
        let h = try r.head()
        switch h.major {
        case 0: return .unsigned(h.argument)
        case 1: return .negative(h.argument)
        case 2: return .bytes(try r.wholeString(h))
        case 3: return .text(try r.wholeText(h, start: start))
        case 4:
            var items: [CBORValue] = []
            if h.isIndefinite {
                while !(try r.consumeBreak()) { items.append(try read(&r, depth: depth + 1)) }
            } else {
                let count = try r.checkedLength(h)
                items.reserveCapacity(count)
                for _ in 0..<count { items.append(try read(&r, depth: depth + 1)) }
            }
            return .array(items)
        case 5:
            var entries: [(key: CBORValue, value: CBORValue)] = []
            if h.isIndefinite {
                while !(try r.consumeBreak()) {
                    entries.append((try read(&r, depth: depth + 1), try read(&r, depth: depth + 1)))
                }
            } else {
                let count = try r.checkedLength(h, perItem: 2)
                entries.reserveCapacity(count)
                for _ in 0..<count { entries.append((try read(&r, depth: depth + 1), try read(&r, depth: depth + 1))) }
            }
            // Keys are equal as data items: compared in preferred serialization.
            var seen = Set<[UInt8]>()
            for entry in entries where !seen.insert(entry.key.cbor).inserted {
                throw .duplicateKey(entry.key.description, path: "")
            }
            return .map(entries)
        case 6: return .tagged(h.argument, try read(&r, depth: depth + 1))
        default:
            switch h.info {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            case 23: return .undefined
            case 24:
                guard h.argument >= 32 else { throw .malformed("simple value in two bytes below 32", at: start) }
                return .simple(UInt8(h.argument))
            case 25: return .float(HalfFloat.double(fromBits: UInt16(h.argument)))
            case 26: return .float(Double(Float(bitPattern: UInt32(h.argument))))
            case 27: return .float(Double(bitPattern: h.argument))
            case 31: throw .malformed("unexpected break", at: start)
            default: return .simple(h.info)
            }
        }
    }

    /// The item in preferred serialization (definite lengths, shortest heads
    /// and floats).
    public var cbor: [UInt8] {
        var w = CBORWriter()
        write(to: &w)
        return w.bytes
    }

    package func write(to w: inout CBORWriter) {
        switch self {
        case .unsigned(let n): w.head(0, n)
        case .negative(let n): w.head(1, n)
        case .bytes(let b): w.byteString(b)
        case .text(let s): w.text(s)
        case .array(let items):
            w.head(4, UInt64(items.count))
            for item in items { item.write(to: &w) }
        case .map(let entries):
            w.head(5, UInt64(entries.count))
            for (k, v) in entries {
                k.write(to: &w)
                v.write(to: &w)
            }
        case .tagged(let tag, let item):
            w.head(6, tag)
            item.write(to: &w)
        case .bool(let b): w.bool(b)
        case .null: w.null()
        case .undefined: w.bytes.append(0xf7)
        case .simple(let v):
            if v < 24 { w.bytes.append(0xe0 | v) } else { w.bytes.append(contentsOf: [0xf8, v]) }
        case .float(let d): w.double(d)
        }
    }

    // MARK: - Diagnostics

    public var description: String {
        switch self {
        case .unsigned(let n): "\(n)"
        case .negative(let n): n == .max ? "-18446744073709551616" : "-\(n + 1)"
        case .bytes(let b): "h'" + b.hex + "'"
        case .text(let s): "\"\(s)\""
        case .array(let items): "[" + items.map(\.description).joined(separator: ", ") + "]"
        case .map(let entries): "{" + entries.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case .tagged(let t, let v): "\(t)(\(v))"
        case .bool(let b): "\(b)"
        case .null: "null"
        case .undefined: "undefined"
        case .simple(let v): "simple(\(v))"
        case .float(let d): d.isNaN ? "NaN" : d.isInfinite ? (d < 0 ? "-Infinity" : "Infinity") : "\(d)"
        }
    }
}

extension String {
    package func leftPadded(_ width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

extension Array where Element == UInt8 {
    /// Lowercase hex, two digits a byte. From a table: a large byte string
    /// (a reply the CLI prints) would otherwise cost a String per byte.
    package var hex: String {
        var out: [UInt8] = []
        out.reserveCapacity(2 * count)
        for byte in self {
            out.append(Self.hexDigits[Int(byte >> 4)])
            out.append(Self.hexDigits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes that hex text spells, two digits (either case) a byte;
    /// nil for an odd count or any other character.
    package init?(hex text: some StringProtocol) {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var i = 0
        while i < digits.count {
            guard let high = value(digits[i]), let low = value(digits[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
            i += 2
        }
        self = bytes
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

/// Through Oscar's CBOR coders a `CBORValue` is written and read as itself,
/// byte for byte; other coders see a best-effort mapping.
extension CBORValue: Codable {
    public init(from decoder: any Decoder) throws {
        if let cbor = decoder as? CBORDecoding {
            var reader = cbor.reader(at: cbor.position)
            self = try CBORValue.read(&reader, depth: cbor.depth)
            return
        }
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? c.decode(Int64.self) {
            self = i >= 0 ? .unsigned(UInt64(i)) : .negative(UInt64(-1 - i))
        } else if let d = try? c.decode(Double.self) {
            self = .float(d)
        } else {
            self = .text(try c.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        if let cbor = encoder as? CBOREncoding {
            write(to: &cbor.writer)
            return
        }
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}
