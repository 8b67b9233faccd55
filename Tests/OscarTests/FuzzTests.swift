import Foundation
import Oscar
import OscarTestSupport
import Testing

@testable import OscarDistributed
@testable import OscarRemote

/// Random and mutated inputs into the decoders: they may fail, but only with
/// their typed errors, and never trap. Fixed seed, so a failure replays.
///
/// The loops run on threads of their own (`offThePool`): Swift Testing runs
/// tests on the cooperative pool, one thread per core, and seconds of
/// decoding there (minutes under the sanitizer) starved the suites beside
/// them past their time limits.
@Suite(.serialized, .timeLimit(.minutes(8))) struct FuzzTests {
    static let iterations = 100_000

    /// Valid encodings to mutate.
    static func corpus() throws -> [[UInt8]] {
        let e = CBOREncoder()
        return [
            try e.encode(PersonV2(name: "Ada", email: "ada@example.org")),
            try e.encode(Inner(name: "x", tags: ["a", "bb", "ccc"])),
            try e.encode([Shape.circle(radius: 1), .rect(w: 2, h: 3), .empty]),
            try e.encode(["k": [1, 2, 3], "j": [-1, -1_000_000]]),
            try e.encode(Data(repeating: 7, count: 40)),
            Hex.bytes("9f018202039f0405ffff"),
            Hex.bytes("bf6346756ef563416d7421ff"),
            // Keys chunked, in long heads, and repeated; text in chunks.
            Hex.bytes("a3646e616d6563416461657461677381617f6161ff01"),
            Hex.bytes("bf646e616d657f61416164ff78046e616d6500ff"),
            try e.encode(DistributedCall(target: "greet", arguments: RawCBOR(bytes: [0x82, 0x61, 0x78, 0x01]))),
        ]
    }

    static func mutate(_ input: [UInt8], _ rng: inout SeededRandom) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            switch Int.random(in: 0..<5, using: &rng) {
            case 0 where !bytes.isEmpty:
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] = .random(in: 0...255, using: &rng)
            case 1 where !bytes.isEmpty: bytes.removeSubrange(Int.random(in: 0..<bytes.count, using: &rng)...)
            case 2: bytes.insert(.random(in: 0...255, using: &rng), at: Int.random(in: 0...bytes.count, using: &rng))
            case 3 where !bytes.isEmpty:
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
            default: bytes.append(contentsOf: [0x9f, 0xbf, 0x5b, 0xff].shuffled(using: &rng).prefix(2))
            }
        }
        return bytes
    }

    @Test func cborDecodersOnlyEverThrowTypedErrors() async throws {
        let corpus = try Self.corpus()
        let decodedSomething = try await offThePool {
            var rng = SeededRandom(seed: 0x05CA_2026)
            let decoder = CBORDecoder()
            var decodedSomething = 0
            for i in 0..<Self.iterations {
                let input: [UInt8] =
                    i % 4 == 0
                    ? (0..<Int.random(in: 0..<64, using: &rng)).map { _ in .random(in: 0...255, using: &rng) }
                    : Self.mutate(corpus[i % corpus.count], &rng)
                do {
                    _ = try CBORValue(cbor: input)
                    decodedSomething += 1
                } catch {
                    // A CBORError by the signature; reaching here is the point.
                }
                _ = try? decoder.decode(PersonV2.self, from: input)
                _ = try? decoder.decode([Shape].self, from: input)
            }
            return decodedSomething
        }
        // The mutations leave some inputs valid, so both paths were exercised.
        #expect(decodedSomething > 1_000)
        #expect(decodedSomething < Self.iterations)
    }

    @Test func frameAndEnvelopeDecodersOnlyEverThrowTypedErrors() async throws {
        let (frames, errors) = try await offThePool {
            var rng = SeededRandom(seed: 0xF4A3_E5)
            var valid: [UInt8] = []
            WireEnvelope.append(to: &valid, kind: .ask, correlation: 9, recipient: "/user/echo", manifest: "Echo") {
                $0.append(contentsOf: [0xa1, 0x61, 0x74, 0x61, 0x78])
            }
            var frames = 0
            var errors = 0
            for i in 0..<Self.iterations {
                let input: [UInt8] =
                    i % 3 == 0
                    ? (0..<Int.random(in: 0..<48, using: &rng)).map { _ in .random(in: 0...255, using: &rng) }
                    : Self.mutate(valid, &rng)
                let buffer = FrameBuffer(maxFrame: 1024)
                let region = buffer.prepareForRead()
                region.copyBytes(from: input)
                buffer.didRead(input.count)
                do {
                    while let frame = try buffer.nextFrame() {
                        frames += 1
                        _ = try WireEnvelope.parse(frame)
                    }
                } catch {
                    errors += 1
                }
            }
            return (frames, errors)
        }
        #expect(frames > 10_000)
        #expect(errors > 1_000)
    }

    /// JSON text from the CLI and config files: random bytes and mutations
    /// of valid documents are read or refused with `JSONBridge.Failure`.
    @Test func jsonReaderOnlyEverThrowsTypedErrors() async throws {
        let read = try await offThePool {
            var rng = SeededRandom(seed: 0x0_15_0E)
            let corpus = [
                #"{"port": 7100, "roles": ["a", "b\u00e9"], "seeds": null, "x": [1.5e3, -0, true, {}]}"#,
                #"[[[{"k": "\ud83c\udf89\n\"", "j": -18446744073709551616}]]]"#,
            ].map { Array($0.utf8) }
            var read = 0
            for i in 0..<Self.iterations / 4 {
                let input: [UInt8] =
                    i % 4 == 0
                    ? (0..<Int.random(in: 0..<32, using: &rng)).map { _ in .random(in: 0...255, using: &rng) }
                    : Self.mutate(corpus[i % corpus.count], &rng)
                do throws(JSONBridge.Failure) {
                    _ = try JSONBridge.cbor(fromJSON: String(decoding: input, as: UTF8.self))
                    read += 1
                } catch {
                    // Typed by the signature; reaching here is the point.
                }
            }
            return read
        }
        #expect(read > 100)
    }
}
