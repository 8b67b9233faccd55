import Foundation
import Oscar
import Testing

@testable import OscarCluster

/// JSON built by hand (`/members`, `oscar members --json`, `/health`) is
/// valid whatever text it carries, and JSON read (config files, the CLI's
/// arguments) refuses an object with a repeated key.
@Suite(.timeLimit(.minutes(5))) struct JSONTextTests {
    /// Text with what JSON must escape, and what it need not.
    static let awkward = [
        "q\"uote", "back\\slash", "new\nline", "tab\t", "nul\u{0}", "bell\u{7}", "del\u{7f}",
        "ünï 水 🎉", "\u{2028}", "/", "",
    ]

    static func snapshot(roles: Set<String>) -> MembershipSnapshot {
        let me = NodeAddress(host: "127.0.0.1", port: 7000, uid: 1)
        let other = NodeAddress(host: "10.0.0.\"2", port: 7001, uid: 2)
        return MembershipSnapshot(
            members: [
                Member(node: me, status: .up, roles: roles, upNumber: 1),
                Member(node: other, status: .joining, roles: ["x\"y"]),
            ],
            unreachable: [2], leader: me, observer: me)
    }

    /// The roles as a JSON reader reads them back from the text.
    static func rolesReadBack(_ json: String) throws -> [[String]] {
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        let members = object?["members"] as? [[String: Any]] ?? []
        return members.map { $0["roles"] as? [String] ?? [] }
    }

    @Test func membersJSONStaysValidWhateverTheRoles() throws {
        let view = Self.snapshot(roles: Set(Self.awkward))
        #expect(try Self.rolesReadBack(view.json) == [Self.awkward.sorted(), ["x\"y"]])
        let page = ManagementRoutes.respond(.init(method: "GET", path: "/members"), Self.routeSnapshot(view))
        #expect(try Self.rolesReadBack(page.body) == [Self.awkward.sorted(), ["x\"y"]])
        let health = ManagementRoutes.respond(.init(method: "GET", path: "/health"), Self.routeSnapshot(view))
        #expect(
            (try JSONSerialization.jsonObject(with: Data(health.body.utf8)) as? [String: Any])?["status"] as? String
                == "up")
    }

    @Test func randomRolesRoundTripThroughMembersJSON() throws {
        var rng = SeededRandom(seed: 0x7501E5)
        let pieces = Self.awkward + ["a", "\u{1f}", "\r", "\\u0041", "\"\""]
        for _ in 0..<500 {
            let roles = Set(
                (0..<Int.random(in: 0...4, using: &rng)).map { _ in
                    (0..<Int.random(in: 1...3, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
                })
            let json = Self.snapshot(roles: roles).json
            #expect(try Self.rolesReadBack(json).first == roles.sorted(), "\(json)")
            // And JSONBridge reads what it quotes.
            for role in roles {
                #expect(try JSONBridge.cbor(fromJSON: JSONBridge.quote(role)) == .text(role))
            }
        }
    }

    static func routeSnapshot(_ view: MembershipSnapshot) -> ManagementRoutes.Snapshot {
        ManagementRoutes.Snapshot(
            membership: view, deadLetters: 0, framesIn: 0, framesOut: 0, asksPending: 0, gossipRounds: 0)
    }

    @Test func objectsWithARepeatedKeyAreRefused() throws {
        #expect(throws: JSONBridge.Failure.duplicateKey("a")) { try JSONBridge.cbor(fromJSON: #"{"a": 1, "a": 2}"#) }
        // Equal after unescaping is equal.
        #expect(throws: JSONBridge.Failure.duplicateKey("a")) {
            try JSONBridge.cbor(fromJSON: #"{"a": 1, "\u0061": 2}"#)
        }
        #expect(throws: JSONBridge.Failure.duplicateKey("k")) {
            try JSONBridge.cbor(fromJSON: #"[{"x": {"k": 1, "k": 1}}]"#)
        }
        #expect(try JSONBridge.cbor(fromJSON: #"{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}"#) != .null)
    }

    /// Random JSON values, written with random spacing and escapes: read
    /// back as the value they were written from (objects sorted by key),
    /// and refused exactly when an object repeats a key.
    @Test func randomJSONReadsAsWrittenAndRepeatsAreRefused() throws {
        var rng = SeededRandom(seed: 0x150_4E4D)
        var repeats = 0
        for _ in 0..<3_000 {
            var repeated = false
            let (text, value) = Self.randomJSON(depth: 0, repeated: &repeated, &rng)
            if repeated {
                repeats += 1
                #expect(throws: JSONBridge.Failure.self) { try JSONBridge.cbor(fromJSON: text) }
            } else {
                #expect(try JSONBridge.cbor(fromJSON: text) == value, "\(text)")
                #expect(try JSONBridge.cbor(fromJSON: JSONBridge.json(from: value)) == value)
            }
        }
        #expect(repeats > 100)
        for bad in ["", "{", "[1,]", "{\"a\" 1}", "01", "1.", "-", "\"\u{1}\"", "\"\\ud800\"", "nul", "1 2", "\"\\x\""]
        {
            #expect(throws: JSONBridge.Failure.self, "\(bad)") { try JSONBridge.cbor(fromJSON: bad) }
        }
        for bad in [#"{"$bytes": "abc"}"#, #"{"$bytes": "zz"}"#, #"{"$bytes": 12}"#, #"{"$bytes": ["00"]}"#] {
            #expect(throws: JSONBridge.Failure.self, "\(bad)") { try JSONBridge.cbor(fromJSON: bad) }
        }
        // Beside other keys, `$bytes` is an ordinary key.
        #expect(
            try JSONBridge.cbor(fromJSON: #"{"$bytes": "zz", "a": 1}"#)
                == .map([(.text("$bytes"), .text("zz")), (.text("a"), .unsigned(1))]))
        #expect(try JSONBridge.cbor(fromJSON: #"{"$bytes": ""}"#) == .bytes([]))
        #expect(try JSONBridge.cbor(fromJSON: "18446744073709551615") == .unsigned(.max))
        #expect(try JSONBridge.cbor(fromJSON: "-18446744073709551616") == .negative(.max))
        #expect(try JSONBridge.cbor(fromJSON: "1e2") == .float(100))
        #expect(try JSONBridge.cbor(fromJSON: #""\ud83c\udf89""#) == .text("🎉"))
        #expect(throws: JSONBridge.Failure.self) {
            try JSONBridge.cbor(fromJSON: String(repeating: "[", count: 200) + String(repeating: "]", count: 200))
        }
    }

    static func randomJSON(depth: Int, repeated: inout Bool, _ rng: inout SeededRandom) -> (String, CBORValue) {
        func space() -> String { ["", " ", "\n\t "].randomElement(using: &rng)! }
        let kind = depth > 3 ? Int.random(in: 0..<4, using: &rng) : Int.random(in: 0..<6, using: &rng)
        switch kind {
        case 0:
            let n = Int64.random(in: -1_000_000...1_000_000, using: &rng)
            return ("\(n)", n >= 0 ? .unsigned(UInt64(n)) : .negative(UInt64(-1 - n)))
        case 1:
            let d = Double(Int.random(in: -1000...1000, using: &rng)) / 8
            return ("\(d)", .float(d))
        case 2: return Bool.random(using: &rng) ? ("true", .bool(true)) : ("null", .null)
        case 3:
            if Bool.random(using: &rng) {  // a byte string, as the CLI prints one
                let bytes = (0..<Int.random(in: 0...6, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let hex = Bool.random(using: &rng) ? bytes.hex : bytes.hex.uppercased()
                return (
                    "{" + space() + "\"$bytes\"" + space() + ":" + space() + "\"\(hex)\"" + space() + "}", .bytes(bytes)
                )
            }
            let s = randomString(&rng)
            return (escaped(s, &rng), .text(s))
        case 4:
            var texts: [String] = []
            var values: [CBORValue] = []
            for _ in 0..<Int.random(in: 0...3, using: &rng) {
                let (t, v) = randomJSON(depth: depth + 1, repeated: &repeated, &rng)
                texts.append(space() + t + space())
                values.append(v)
            }
            return ("[" + texts.joined(separator: ",") + "]", .array(values))
        default:
            var texts: [String] = []
            var entries: [String: CBORValue] = [:]
            for _ in 0..<Int.random(in: 0...3, using: &rng) {
                let key = ["a", "b", "é", "k\"", "\n"].randomElement(using: &rng)!
                let (t, v) = randomJSON(depth: depth + 1, repeated: &repeated, &rng)
                if entries.updateValue(v, forKey: key) != nil { repeated = true }
                texts.append(space() + escaped(key, &rng) + space() + ":" + space() + t)
            }
            return (
                "{" + texts.joined(separator: ",") + "}", .map(entries.keys.sorted().map { (.text($0), entries[$0]!) })
            )
        }
    }

    static func randomString(_ rng: inout SeededRandom) -> String {
        let pieces = ["a", "\"", "\\", "\n", "\u{1}", "é", "水", "🎉", "/", " "]
        return (0..<Int.random(in: 0...5, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
    }

    /// `s` as a JSON string, each character escaped or not at random where
    /// JSON allows both.
    static func escaped(_ s: String, _ rng: inout SeededRandom) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            let mustEscape = scalar == "\"" || scalar == "\\" || scalar.value < 0x20
            if mustEscape || Bool.random(using: &rng) {
                for unit in String(scalar).utf16 { out += "\\u" + String(unit, radix: 16).leftPadded(4) }
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
