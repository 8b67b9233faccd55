import Foundation
import Oscar
import Testing

@testable import OscarCBOR

/// What RFC 8949 makes invalid is refused by every reader, as docs/PROTOCOL.md
/// ("Payload encoding") says: text chunks that split a character, maps with
/// two equal keys, and nesting deeper than 128 levels (exactly: depth 127 is
/// read, depth 128 is not). Picked cases, then seeded random searches for a
/// counterexample.
@Suite(.timeLimit(.minutes(5))) struct CBORValidityTests {
    let decoder = CBORDecoder()

    struct AB: Codable, Equatable {
        var a: Int?
        var b: Int?
    }

    /// Reads its own key twice: a repeated key must not be taken for the
    /// second value.
    struct AskTwice: Decodable {
        enum K: CodingKey { case a }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: K.self)
            _ = try c.decode(Int.self, forKey: .a)
            _ = try c.decode(Int.self, forKey: .a)
        }
    }

    /// Arrays in arrays to any depth: `[[[]]]` and so on.
    struct Deep: Decodable {
        var levels = 1
        init(from decoder: any Decoder) throws {
            var c = try decoder.unkeyedContainer()
            if !c.isAtEnd { levels += try c.decode(Deep.self).levels }
        }
    }

    /// Maps in maps: `{"next": {"next": {}}}`.
    struct Chain: Decodable {
        var next: [Chain]?
        enum CodingKeys: CodingKey { case next }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            if let one = try c.decodeIfPresent(Chain.self, forKey: .next) { next = [one] }
        }
    }

    /// Asks for a key that is never there: every key it is given is unknown.
    struct Ignores: Decodable {
        var z: Int?
    }

    // MARK: - Text chunks

    @Test func indefiniteTextWhoseChunksSplitACharacterIsRefused() throws {
        // "é" is c3 a9: whole in one chunk, then split across two.
        let whole = Hex.bytes("7f62c3a9ff")
        let split = Hex.bytes("7f61c361a9ff")
        #expect(try CBORValue(cbor: whole) == .text("é"))
        #expect(try decoder.decode(String.self, from: whole) == "é")
        #expect(throws: CBORError.self) { try CBORValue(cbor: split) }
        #expect(throws: CBORError.self) { try decoder.decode(String.self, from: split) }
        // As a struct's field and as a map key too.
        #expect(throws: CBORError.self) { try decoder.decode([String: Int].self, from: Hex.bytes("a1") + split + [0]) }
        #expect(throws: CBORError.self) { try CBORValue(cbor: Hex.bytes("a1") + split + [0]) }
    }

    @Test func randomChunkingDecodesExactlyWhenEveryCutIsAtACharacter() throws {
        var rng = SeededRandom(seed: 0x7E47_C4)
        let alphabet = Array("aé水𐅑z\u{7f}ü").map(String.init)
        var refused = 0
        for _ in 0..<3_000 {
            let text = (0..<Int.random(in: 1...6, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
                .joined()
            let utf8 = Array(text.utf8)
            // Cut points at any byte; a cut is good only between characters.
            let boundaries = Set(text.unicodeScalars.indices.map { text.utf8.distance(from: text.startIndex, to: $0) })
            let cuts = (1..<utf8.count).filter { _ in Bool.random(using: &rng) }
            var bytes: [UInt8] = [0x7f]
            var from = 0
            for end in cuts + [utf8.count] {
                bytes += Self.textHead(end - from) + utf8[from..<end]
                from = end
            }
            bytes.append(0xff)
            let valid = cuts.allSatisfy { boundaries.contains($0) }
            if valid {
                #expect(try CBORValue(cbor: bytes) == .text(text))
                #expect(try decoder.decode(String.self, from: bytes) == text)
            } else {
                refused += 1
                #expect(throws: CBORError.self) { try CBORValue(cbor: bytes) }
                #expect(throws: CBORError.self) { try decoder.decode(String.self, from: bytes) }
            }
        }
        #expect(refused > 100)
    }

    static func textHead(_ count: Int) -> [UInt8] {
        var w = CBORWriter()
        w.head(3, UInt64(count))
        return w.bytes
    }

    // MARK: - Duplicate keys

    @Test func mapsWithEqualKeysAreRefused() throws {
        let cases: [(String, String)] = [
            ("two text keys", "a2616101616102"),
            ("a text key in a long head", "a261610178016102"),
            ("a chunked text key", "a26161017f6161ff02"),
            ("integers in two widths", "a20100180102"),
            ("an indefinite-length map", "bf6161016161 02ff"),
        ]
        for (name, hex) in cases {
            let bytes = Hex.bytes(hex.replacingOccurrences(of: " ", with: ""))
            #expect(throws: CBORError.self, "\(name)") { try CBORValue(cbor: bytes) }
            #expect(throws: CBORError.self, "\(name)") { try decoder.decode(AB.self, from: bytes) }
            #expect(throws: CBORError.self, "\(name)") { try decoder.decode(Ignores.self, from: bytes) }
            #expect(throws: CBORError.self, "\(name)") { try decoder.decode(AskTwice.self, from: bytes) }
        }
        // The error names the key.
        do {
            _ = try decoder.decode(AB.self, from: Hex.bytes("a2616101616102"))
            Issue.record("refused")
        } catch {
            #expect(error == .duplicateKey("\"a\"", path: ""))
        }
        // Equal keys in an unread tail, and among keys the type never asks for.
        #expect(throws: CBORError.self) { try decoder.decode(AB.self, from: Hex.bytes("a3616101617a02617a03")) }
        // Different keys that merely look alike are fine.
        #expect(try decoder.decode(AB.self, from: Hex.bytes("a3616101616202616302")) == AB(a: 1, b: 2))
        #expect(
            try CBORValue(cbor: Hex.bytes("a20100f93c0000"))
                == .map([(.unsigned(1), .unsigned(0)), (.float(1), .unsigned(0))]))
    }

    /// Random maps over a few keys, written with random heads and chunking:
    /// every reader refuses exactly those with a repeated key.
    @Test func randomMapsAreRefusedExactlyWhenAKeyRepeats() throws {
        var rng = SeededRandom(seed: 0xD0_0B1E)
        let names = ["a", "b", "c", "dd"]
        var duplicates = 0
        for _ in 0..<5_000 {
            let keys = (0..<Int.random(in: 0...4, using: &rng)).map { _ in names.randomElement(using: &rng)! }
            let indefinite = Bool.random(using: &rng)
            var bytes: [UInt8] = indefinite ? [0xbf] : [0xa0 | UInt8(keys.count)]
            for (i, key) in keys.enumerated() {
                bytes += Self.encodeText(key, &rng)
                bytes += CBORValue.unsigned(UInt64(i)).cbor
            }
            if indefinite { bytes.append(0xff) }
            let repeats = Set(keys).count != keys.count
            if repeats {
                duplicates += 1
                #expect(throws: CBORError.self) { try CBORValue(cbor: bytes) }
                #expect(throws: CBORError.self) { try decoder.decode(AB.self, from: bytes) }
                #expect(throws: CBORError.self) { try decoder.decode(Ignores.self, from: bytes) }
                #expect(throws: CBORError.self) { try decoder.decode([String: Int].self, from: bytes) }
            } else {
                let expected = AB(a: keys.firstIndex(of: "a"), b: keys.firstIndex(of: "b"))
                #expect(try decoder.decode(AB.self, from: bytes) == expected)
                #expect(try decoder.decode([String: Int].self, from: bytes).count == keys.count)
                _ = try decoder.decode(Ignores.self, from: bytes)
                _ = try CBORValue(cbor: bytes)
            }
        }
        #expect(duplicates > 1_000)
    }

    /// `text` as a definite string with a random head width, or chunked.
    static func encodeText(_ text: String, _ rng: inout SeededRandom) -> [UInt8] {
        let utf8 = Array(text.utf8)
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: return textHead(utf8.count) + utf8
        case 1: return [0x78, UInt8(utf8.count)] + utf8
        default: return [0x7f] + utf8.flatMap { textHead(1) + [$0] } + [0xff]
        }
    }

    // MARK: - Depth

    /// `n` arrays, one in the other: the innermost is at depth n - 1.
    static func nested(_ n: Int, leaf: [UInt8] = []) -> [UInt8] {
        leaf.isEmpty ? [UInt8](repeating: 0x81, count: n - 1) + [0x80] : [UInt8](repeating: 0x81, count: n) + leaf
    }

    @Test func nestingIsReadToDepth127AndRefusedAtDepth128() throws {
        let limit = CBORReader.maxDepth
        #expect(limit == 128)
        // Arrays: the innermost at depth 127 is read; at 128 it is not.
        let atMax = Self.nested(128)
        let beyond = Self.nested(129)
        #expect(throws: Never.self) { try CBORValue(cbor: atMax) }
        #expect(throws: CBORError.tooDeep(limit: limit)) { try CBORValue(cbor: beyond) }
        #expect(try decoder.decode(Deep.self, from: atMax).levels == 128)
        #expect(throws: CBORError.tooDeep(limit: limit)) { try decoder.decode(Deep.self, from: beyond) }
        #expect(try decoder.decode(RawCBOR.self, from: atMax).bytes == atMax)
        #expect(throws: CBORError.tooDeep(limit: limit)) { try decoder.decode(RawCBOR.self, from: beyond) }
        // A leaf counts: an integer inside 127 arrays is at depth 127.
        #expect(throws: Never.self) { try CBORValue(cbor: Self.nested(127, leaf: [0x00])) }
        #expect(throws: CBORError.tooDeep(limit: limit)) { try CBORValue(cbor: Self.nested(128, leaf: [0x00])) }
        // Skipped as an unknown key's value, the value is at depth 1.
        let field = Hex.bytes("a16178")
        #expect(throws: Never.self) { try decoder.decode(Ignores.self, from: field + Self.nested(127)) }
        #expect(throws: CBORError.tooDeep(limit: limit)) {
            try decoder.decode(Ignores.self, from: field + Self.nested(128))
        }
        // Maps: {"next": ...} 128 deep is read, 129 deep is not.
        func chain(_ n: Int) -> [UInt8] {
            Array([[UInt8]](repeating: Hex.bytes("a1646e657874"), count: n - 1).joined()) + [0xa0]
        }
        #expect(throws: Never.self) { try decoder.decode(Chain.self, from: chain(128)) }
        #expect(throws: CBORError.tooDeep(limit: limit)) { try decoder.decode(Chain.self, from: chain(129)) }
        #expect(throws: CBORError.tooDeep(limit: limit)) { try CBORValue(cbor: chain(129)) }
        // Tags are levels: a date (tag 1 and its number) inside 126 arrays is read, inside 127 it is not.
        let date = Hex.bytes("c1fb41d45dcc1e000000")
        #expect(throws: Never.self) { try decoder.decode(Deepest<Date>.self, from: Self.nested(126, leaf: date)) }
        #expect(throws: CBORError.tooDeep(limit: limit)) {
            try decoder.decode(Deepest<Date>.self, from: Self.nested(127, leaf: date))
        }
    }

    /// The one leaf at the bottom of nested arrays, decoded as a `T`.
    struct Deepest<T: Decodable>: Decodable {
        init(from decoder: any Decoder) throws {
            if var c = try? decoder.unkeyedContainer() {
                _ = try c.decode(Deepest<T>.self)
            } else {
                _ = try decoder.singleValueContainer().decode(T.self)
            }
        }
    }

    /// Random trees of arrays, maps and tags near the limit: read exactly
    /// when their deepest item is at depth 127 or less.
    @Test func randomNestingIsReadExactlyUpToTheLimit() throws {
        var rng = SeededRandom(seed: 0xDE_E9)
        var refused = 0
        for _ in 0..<400 {
            let target = Int.random(in: 120...135, using: &rng)
            var deepest = 0
            let bytes = Self.tree(depth: 0, target: target, deepest: &deepest, &rng)
            if deepest < CBORReader.maxDepth {
                #expect(throws: Never.self) { try CBORValue(cbor: bytes) }
                #expect(throws: Never.self) { try decoder.decode(RawCBOR.self, from: bytes) }
            } else {
                refused += 1
                #expect(throws: CBORError.tooDeep(limit: CBORReader.maxDepth)) { try CBORValue(cbor: bytes) }
                #expect(throws: CBORError.tooDeep(limit: CBORReader.maxDepth)) {
                    try decoder.decode(RawCBOR.self, from: bytes)
                }
            }
        }
        #expect(refused > 50 && refused < 350)
    }

    /// An item at `depth` whose one deep branch reaches about `target`.
    static func tree(depth: Int, target: Int, deepest: inout Int, _ rng: inout SeededRandom) -> [UInt8] {
        deepest = max(deepest, depth)
        guard depth < target else { return [0x01] }
        let inner = tree(depth: depth + 1, target: target, deepest: &deepest, &rng)
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: return [0x82, 0x00] + inner
        case 1: return [0x9f] + inner + [0xff]
        case 2: return [0xa1, 0x61, 0x6b] + inner
        default: return [0xc6] + inner
        }
    }
}
