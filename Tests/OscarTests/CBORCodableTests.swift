import Foundation
import Oscar
import Testing

struct Inner: Codable, Equatable {
    var name: String
    var tags: [String]
}

enum Shape: Codable, Equatable {
    case circle(radius: Double)
    case rect(w: Int, h: Int)
    case empty
}

struct Everything: Codable, Equatable {
    var int: Int
    var minInt: Int64
    var maxUInt: UInt64
    var negative: Int8
    var double: Double
    var float: Float
    var flag: Bool
    var text: String
    var optionalPresent: String?
    var optionalAbsent: Int?
    var inner: Inner
    var list: [Inner]
    var matrix: [[Int]]
    var dict: [String: Int]
    var shapes: [Shape]
    var data: Data
    var date: Date
    var nothing: [Int?]
}

struct PersonV1: Codable, Equatable {
    var name: String
}

struct PersonV2: Codable, Equatable {
    var name: String
    var email: String?
}

@Suite(.timeLimit(.minutes(5))) struct CBORCodableTests {
    let encoder = CBOREncoder()
    let decoder = CBORDecoder()

    @Test func everyKindOfValueRoundTrips() throws {
        let value = Everything(
            int: 42, minInt: .min, maxUInt: .max, negative: -128, double: -4.1, float: 1.5, flag: true,
            text: "ünïcödé 水 𐅑", optionalPresent: "here", optionalAbsent: nil,
            inner: Inner(name: "in", tags: ["a", "b"]),
            list: (0..<30).map { Inner(name: "n\($0)", tags: []) },
            matrix: [[1, 2], [], [3]], dict: ["x": 1, "y": -2],
            shapes: [.circle(radius: 2.5), .rect(w: 3, h: 4), .empty],
            data: Data([0, 1, 2, 255]), date: Date(timeIntervalSince1970: 1_363_896_240.5),
            nothing: [1, nil, 3])
        let bytes = try encoder.encode(value)
        #expect(try decoder.decode(Everything.self, from: bytes) == value)
    }

    @Test func structsAreMapsWithTextKeys() throws {
        let bytes = try encoder.encode(PersonV1(name: "Ada"))
        #expect(try CBORValue(cbor: bytes) == .map([(.text("name"), .text("Ada"))]))
        #expect(Hex.string(bytes) == "a1646e616d6563416461")
    }

    @Test func anAddedOptionalFieldBreaksNeitherOldNorNewReaders() throws {
        // A newer writer's extra key is ignored by an older reader.
        let new = try encoder.encode(PersonV2(name: "Ada", email: "ada@example.org"))
        #expect(try decoder.decode(PersonV1.self, from: new) == PersonV1(name: "Ada"))
        // An older writer's message decodes in a newer reader with the field nil.
        let old = try encoder.encode(PersonV1(name: "Ada"))
        #expect(try decoder.decode(PersonV2.self, from: old) == PersonV2(name: "Ada", email: nil))
    }

    @Test func keysInAnyOrderAndIndefiniteLengthsDecode() throws {
        // {_ "email": "e", "name": "Ada"}: reversed order, indefinite-length map.
        let bytes = Hex.bytes("bf65656d61696c6165646e616d6563416461ff")
        #expect(try decoder.decode(PersonV2.self, from: bytes) == PersonV2(name: "Ada", email: "e"))
    }

    @Test func containersWithManyEntriesGetLongHeads() throws {
        let big = Dictionary(uniqueKeysWithValues: (0..<300).map { ("k\($0)", $0) })
        let bytes = try encoder.encode(big)
        #expect(bytes[0] == 0xb9)  // map, two-byte count
        #expect(try decoder.decode([String: Int].self, from: bytes) == big)
        let list = Array(0..<70_000)
        #expect(try decoder.decode([Int].self, from: try encoder.encode(list)) == list)
    }

    @Test func wrongTypesAndMissingKeysAreTypedErrors() throws {
        let bytes = try encoder.encode(PersonV1(name: "Ada"))
        #expect(throws: CBORError.typeMismatch(expected: "an integer", found: "a map", path: "")) {
            try decoder.decode(Int.self, from: bytes)
        }
        #expect(throws: CBORError.missingKey("tags", path: "")) {
            try decoder.decode(Inner.self, from: bytes)
        }
        #expect(throws: CBORError.outOfRange("300 for UInt8", path: "")) {
            try decoder.decode(UInt8.self, from: try encoder.encode(300))
        }
    }

    /// A map read in written order is walked once: each primitive steps
    /// the cursor over its own value, and the map's end comes from the
    /// cursor. Mixed with nested values, nils and keys read out of order,
    /// every path still lands on the right bytes and finds trailing ones.
    @Test func mapsReadInOrderAndOutOfOrderDecodeTheSame() throws {
        struct Mixed: Codable, Equatable {
            var a: Int
            var inner: Inner
            var gone: String?
            var b: String
            var list: [Int]
            enum CodingKeys: String, CodingKey { case a, inner, gone, b, list }
        }
        struct OutOfOrder: Decodable {
            var b: String
            var a: Int
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: Mixed.CodingKeys.self)
                b = try c.decode(String.self, forKey: .b)
                a = try c.decode(Int.self, forKey: .a)
            }
        }
        struct ReadsNil: Decodable {
            var a: Int
            var goneIsNil: Bool
            var b: String
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: Mixed.CodingKeys.self)
                a = try c.decode(Int.self, forKey: .a)
                _ = try c.decode(Inner.self, forKey: .inner)
                goneIsNil = try c.decodeNil(forKey: .gone)
                b = try c.decode(String.self, forKey: .b)
            }
        }
        var value = Mixed(
            a: 7, inner: Inner(name: "n", tags: ["x", "y"]), gone: nil, b: "abcdefghijklmnopq", list: [1, 2])
        var bytes = try encoder.encode(value)
        #expect(try decoder.decode(Mixed.self, from: bytes) == value)
        let reordered = try decoder.decode(OutOfOrder.self, from: bytes)
        #expect(reordered.a == 7 && reordered.b == value.b)
        value.gone = "here"
        bytes = try encoder.encode(value)
        let nils = try decoder.decode(ReadsNil.self, from: bytes)
        #expect(nils.a == 7 && !nils.goneIsNil && nils.b == value.b)
        #expect(try decoder.decode(Mixed.self, from: bytes) == value)
        #expect(throws: CBORError.self) { try decoder.decode(Mixed.self, from: bytes + [0x00]) }
        #expect(throws: CBORError.self) {
            try decoder.decode(PersonV1.self, from: try encoder.encode(PersonV1(name: "Ada")) + [0x01])
        }
    }

    /// Text takes an ASCII fast path word by word, then byte by byte: an
    /// invalid byte anywhere is still refused, and other UTF-8 still decodes.
    @Test func textIsValidatedOnEveryPath() throws {
        for text in ["", "abc", "abcdefghijklmnop", "abcdefghijklmnopq", "héllo, wörld ✓ 🎉", "abcdefgh✓"] {
            #expect(try decoder.decode(String.self, from: try encoder.encode(text)) == text)
        }
        let ascii = Array("abcdefghijklmnopqrs".utf8)  // 19 bytes: two words and a tail of 3
        for bad in [0, 7, 8, 15, 16, 18] {
            var bytes = ascii
            bytes[bad] = 0xff
            #expect(throws: CBORError.self, "0xff at \(bad)") {
                try decoder.decode(String.self, from: [0x73] + bytes)
            }
        }
    }

    /// `Data` is read straight from a definite-length byte string (one copy)
    /// and joined from an indefinite-length one: random sizes across every
    /// length head, random chunkings, and a cut string that must be refused.
    @Test func bytesDecodeAsDataWhateverTheirLengthAndChunking() throws {
        func head(_ count: Int) -> [UInt8] {
            switch count {
            case ..<24: [0x40 | UInt8(count)]
            case ..<256: [0x58, UInt8(count)]
            case ..<65_536: [0x59, UInt8(count >> 8), UInt8(count & 0xff)]
            default: [0x5a] + (0..<4).reversed().map { UInt8((count >> (8 * $0)) & 0xff) }
            }
        }
        var random = SplitMix64(seed: 20_261_203)
        for round in 0..<200 {
            let size = [Int.random(in: 0...30, using: &random), Int.random(in: 0...70_000, using: &random)][round % 2]
            let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
            let definite = head(size) + bytes
            #expect(try decoder.decode(Data.self, from: definite) == Data(bytes), "size \(size)")
            #expect(try encoder.encode(Data(bytes)) == definite, "size \(size)")
            var indefinite: [UInt8] = [0x5f]
            var at = 0
            while at < size {
                let chunk = Int.random(in: 1...(size - at), using: &random)
                indefinite += head(chunk) + bytes[at..<at + chunk]
                at += chunk
            }
            indefinite.append(0xff)
            #expect(try decoder.decode(Data.self, from: indefinite) == Data(bytes), "size \(size), chunked")
            if size > 0 {
                #expect(throws: CBORError.self, "size \(size), cut") {
                    try decoder.decode(Data.self, from: Array(definite.dropLast()))
                }
            }
        }
    }

    @Test func hostileInputIsRefusedWithoutTrapping() throws {
        let cases: [(String, String)] = [
            ("truncated string", "6a616263"),
            ("huge declared byte string", "5bffffffffffffffff00"),
            ("huge declared array", "9bffffffffffffffff"),
            ("huge declared map", "bb7fffffffffffffff"),
            ("reserved additional info", "1c"),
            ("lone break", "ff"),
            ("indefinite integer", "1f"),
            ("invalid UTF-8", "62c328"),
            ("trailing bytes", "0000"),
            ("empty input", ""),
        ]
        for (name, hex) in cases {
            #expect(throws: CBORError.self, "\(name)") { try CBORValue(cbor: Hex.bytes(hex)) }
            #expect(throws: CBORError.self, "\(name)") { try decoder.decode(Everything.self, from: Hex.bytes(hex)) }
        }
        let deep = [UInt8](repeating: 0x81, count: 100_000) + [0x00]
        #expect(throws: CBORError.tooDeep(limit: 128)) { try CBORValue(cbor: deep) }
        #expect(throws: CBORError.self) { try decoder.decode([[[[[[Int]]]]]].self, from: deep) }
    }
}
