import OscarBase

/// Appends CBOR items (RFC 8949) to a byte buffer, in preferred serialization:
/// the shortest head for every length and integer, and the shortest float that
/// keeps a value exactly.
package struct CBORWriter {
    package var bytes: [UInt8] = []

    package init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    @inline(__always)
    package mutating func head(_ major: UInt8, _ value: UInt64) {
        let m = major << 5
        switch value {
        case ..<24: bytes.append(m | UInt8(value))
        case ..<0x100: bytes.append(contentsOf: [m | 24, UInt8(value)])
        case ..<0x1_0000: bytes.append(contentsOf: [m | 25, UInt8(value >> 8), UInt8(truncatingIfNeeded: value)])
        case ..<0x1_0000_0000:
            bytes.append(m | 26)
            appendBigEndian(UInt32(value))
        default:
            bytes.append(m | 27)
            appendBigEndian(value)
        }
    }

    @inline(__always)
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func int(_ value: Int64) {
        if value >= 0 {
            head(0, UInt64(value))
        } else {
            head(1, UInt64(bitPattern: -1 &- value))
        }
    }

    mutating func uint(_ value: UInt64) { head(0, value) }

    package mutating func text(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            head(3, UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func byteString<C: Collection>(_ value: C) where C.Element == UInt8 {
        head(2, UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    mutating func bool(_ value: Bool) { bytes.append(value ? 0xf5 : 0xf4) }
    package mutating func null() { bytes.append(0xf6) }

    mutating func double(_ value: Double) {
        if value.isNaN {
            bytes.append(contentsOf: [0xf9, 0x7e, 0x00])
        } else if let half = HalfFloat.bits(exactly: value) {
            bytes.append(0xf9)
            appendBigEndian(half)
        } else if let single = Float(exactly: value) {
            bytes.append(0xfa)
            appendBigEndian(single.bitPattern)
        } else {
            bytes.append(0xfb)
            appendBigEndian(value.bitPattern)
        }
    }
}

/// IEEE 754 half precision, converted by hand: `Float16` is not available on
/// every platform Swift runs on.
enum HalfFloat {
    /// The half-precision bits of `value`, if it converts without loss.
    package static func bits(exactly value: Double) -> UInt16? {
        guard let f = Float(exactly: value) else { return nil }
        let b = f.bitPattern
        let sign = UInt16(b >> 16) & 0x8000
        let exponent = Int((b >> 23) & 0xff)
        let mantissa = b & 0x7f_ffff
        if exponent == 0xff { return sign | 0x7c00 | UInt16(mantissa >> 13) }  // ±inf (NaN handled by caller)
        if exponent == 0 && mantissa == 0 { return sign }  // ±0
        let e = exponent - 127 + 15
        if e >= 31 { return nil }
        if e >= 1 {
            guard mantissa & 0x1fff == 0 else { return nil }
            return sign | UInt16(e) << 10 | UInt16(mantissa >> 13)
        }
        // Subnormal half: value = m * 2^-24 with m < 1024.
        let shift = 14 - e  // 13 + (1 - e)
        guard shift <= 24 else { return nil }
        let full = mantissa | 0x80_0000
        guard full & ((1 << shift) - 1) == 0 else { return nil }
        return sign | UInt16(full >> shift)
    }

    static func double(fromBits h: UInt16) -> Double {
        let sign: Double = h & 0x8000 != 0 ? -1 : 1
        let exponent = Int((h >> 10) & 0x1f)
        let mantissa = Double(h & 0x3ff)
        switch exponent {
        case 0: return sign * mantissa * 0x1p-24
        case 31: return mantissa == 0 ? sign * .infinity : .nan
        default: return sign * (1 + mantissa / 1024) * Double(sign: .plus, exponent: exponent - 15, significand: 1)
        }
    }
}
