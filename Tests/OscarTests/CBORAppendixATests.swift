import Oscar
import Testing

/// RFC 8949 Appendix A, as a table: each example's bytes decode to the value
/// shown, and (where the example is in preferred serialization) encoding
/// that value gives the same bytes back.
@Suite(.timeLimit(.minutes(5))) struct CBORAppendixATests {
    struct Example: Sendable, CustomTestStringConvertible {
        let hex: String
        let value: CBORValue
        /// False for examples that are valid but not preferred serialization
        /// (indefinite lengths, floats wider than needed).
        let roundTrips: Bool
        var testDescription: String { hex }
    }

    static func ex(_ hex: String, _ value: CBORValue, roundTrips: Bool = true) -> Example {
        Example(hex: hex, value: value, roundTrips: roundTrips)
    }

    /// Computed, not stored: a stored static would live until exit, where
    /// LeakSanitizer counts it.
    static var examples: [Example] {
        [
            ex("00", .unsigned(0)), ex("01", .unsigned(1)), ex("0a", .unsigned(10)), ex("17", .unsigned(23)),
            ex("1818", .unsigned(24)), ex("1819", .unsigned(25)), ex("1864", .unsigned(100)),
            ex("1903e8", .unsigned(1000)), ex("1a000f4240", .unsigned(1_000_000)),
            ex("1b000000e8d4a51000", .unsigned(1_000_000_000_000)),
            ex("1bffffffffffffffff", .unsigned(18_446_744_073_709_551_615)),
            ex("c249010000000000000000", .tagged(2, .bytes([1, 0, 0, 0, 0, 0, 0, 0, 0]))),
            ex("3bffffffffffffffff", .negative(18_446_744_073_709_551_615)),
            ex("c349010000000000000000", .tagged(3, .bytes([1, 0, 0, 0, 0, 0, 0, 0, 0]))),
            ex("20", .negative(0)), ex("29", .negative(9)), ex("3863", .negative(99)), ex("3903e7", .negative(999)),
            ex("f90000", .float(0.0)), ex("f98000", .float(-0.0)), ex("f93c00", .float(1.0)),
            ex("fb3ff199999999999a", .float(1.1)), ex("f93e00", .float(1.5)), ex("f97bff", .float(65504.0)),
            ex("fa47c35000", .float(100000.0)), ex("fa7f7fffff", .float(3.4028234663852886e+38)),
            ex("fb7e37e43c8800759c", .float(1.0e+300)), ex("f90001", .float(5.960464477539063e-8)),
            ex("f90400", .float(0.00006103515625)), ex("f9c400", .float(-4.0)),
            ex("fbc010666666666666", .float(-4.1)), ex("f97c00", .float(.infinity)), ex("f97e00", .float(.nan)),
            ex("f9fc00", .float(-.infinity)),
            ex("fa7f800000", .float(.infinity), roundTrips: false), ex("fa7fc00000", .float(.nan), roundTrips: false),
            ex("faff800000", .float(-.infinity), roundTrips: false),
            ex("fb7ff0000000000000", .float(.infinity), roundTrips: false),
            ex("fb7ff8000000000000", .float(.nan), roundTrips: false),
            ex("fbfff0000000000000", .float(-.infinity), roundTrips: false),
            ex("f4", .bool(false)), ex("f5", .bool(true)), ex("f6", .null), ex("f7", .undefined),
            ex("f0", .simple(16)), ex("f8ff", .simple(255)),
            ex("c074323031332d30332d32315432303a30343a30305a", .tagged(0, .text("2013-03-21T20:04:00Z"))),
            ex("c11a514b67b0", .tagged(1, .unsigned(1_363_896_240))),
            ex("c1fb41d452d9ec200000", .tagged(1, .float(1_363_896_240.5))),
            ex("d74401020304", .tagged(23, .bytes([1, 2, 3, 4]))),
            ex("d818456449455446", .tagged(24, .bytes([0x64, 0x49, 0x45, 0x54, 0x46]))),
            ex("d82076687474703a2f2f7777772e6578616d706c652e636f6d", .tagged(32, .text("http://www.example.com"))),
            ex("40", .bytes([])), ex("4401020304", .bytes([1, 2, 3, 4])),
            ex("60", .text("")), ex("6161", .text("a")), ex("6449455446", .text("IETF")), ex("62225c", .text("\"\\")),
            ex("62c3bc", .text("\u{00fc}")), ex("63e6b0b4", .text("\u{6c34}")), ex("64f0908591", .text("\u{10151}")),
            ex("80", .array([])), ex("83010203", .array([.unsigned(1), .unsigned(2), .unsigned(3)])),
            ex("8301820203820405", nested123),
            ex("98190102030405060708090a0b0c0d0e0f101112131415161718181819", oneTo25),
            ex("a0", .map([])), ex("a201020304", .map([(.unsigned(1), .unsigned(2)), (.unsigned(3), .unsigned(4))])),
            ex(
                "a26161016162820203",
                .map([(.text("a"), .unsigned(1)), (.text("b"), .array([.unsigned(2), .unsigned(3)]))])),
            ex("826161a161626163", .array([.text("a"), .map([(.text("b"), .text("c"))])])),
            ex(
                "a56161614161626142616361436164614461656145",
                .map(["a", "b", "c", "d", "e"].map { (.text($0), .text($0.uppercased())) })),
            ex("5f42010243030405ff", .bytes([1, 2, 3, 4, 5]), roundTrips: false),
            ex("7f657374726561646d696e67ff", .text("streaming"), roundTrips: false),
            ex("9fff", .array([]), roundTrips: false),
            ex("9f018202039f0405ffff", nested123, roundTrips: false),
            ex("9f01820203820405ff", nested123, roundTrips: false),
            ex("83018202039f0405ff", nested123, roundTrips: false),
            ex("83019f0203ff820405", nested123, roundTrips: false),
            ex("9f0102030405060708090a0b0c0d0e0f101112131415161718181819ff", oneTo25, roundTrips: false),
            ex(
                "bf61610161629f0203ffff",
                .map([(.text("a"), .unsigned(1)), (.text("b"), .array([.unsigned(2), .unsigned(3)]))]),
                roundTrips: false),
            ex("826161bf61626163ff", .array([.text("a"), .map([(.text("b"), .text("c"))])]), roundTrips: false),
            ex(
                "bf6346756ef563416d7421ff", .map([(.text("Fun"), .bool(true)), (.text("Amt"), .negative(1))]),
                roundTrips: false),
        ]
    }

    static var nested123: CBORValue {
        .array([
            .unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)]),
        ])
    }
    static var oneTo25: CBORValue { .array((1...25).map { .unsigned(UInt64($0)) }) }

    @Test(arguments: examples)
    func decodesAndReencodes(_ example: Example) throws {
        let bytes = Hex.bytes(example.hex)
        let value = try CBORValue(cbor: bytes)
        #expect(value == example.value)
        if example.roundTrips {
            #expect(Hex.string(example.value.cbor) == example.hex)
        }
    }
}

enum Hex {
    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var it = hex.makeIterator()
        while let a = it.next(), let b = it.next() { out.append(UInt8(String([a, b]), radix: 16)!) }
        return out
    }

    static func string(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}
