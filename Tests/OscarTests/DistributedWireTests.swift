import Foundation
import Oscar
import Testing

@testable import OscarDistributed

/// The bytes of a distributed call and of its outcome (docs/PROTOCOL.md,
/// "Distributed calls"), and their readers on hostile input.
@Suite(.timeLimit(.minutes(5))) struct DistributedWireTests {
    struct Point: Codable, Equatable {
        var x: Int
        var label: String
    }

    /// A call as a caller records it: two arguments, encoded once each.
    static func call() throws -> DistributedCall {
        var arguments: [UInt8] = [0x82]
        try CBOREncoder().encode(Point(x: 1, label: "a"), appendingTo: &arguments)
        try CBOREncoder().encode("second", appendingTo: &arguments)
        return DistributedCall(target: "$s4Demo7GreeterC5greetyS2SYaKFTE", arguments: RawCBOR(bytes: arguments))
    }

    @Test func aCallIsThreeItemsWithItsArgumentsInline() throws {
        let call = try Self.call()
        let bytes = try CBOREncoder().encode(call)
        // [target, [], [argument, argument]]: the arguments are items, not byte strings.
        #expect(
            try CBORValue(cbor: bytes)
                == .array([
                    .text(call.target), .array([]),
                    .array([.map([(.text("x"), .unsigned(1)), (.text("label"), .text("a"))]), .text("second")]),
                ]))
        for read in [
            try CBORDecoder().decode(DistributedCall.self, from: bytes),
            try DistributedCall(cbor: bytes.span.bytes, knownTarget: call.target),
            try DistributedCall(cbor: bytes.span.bytes, knownTarget: "$sOther"),
        ] {
            #expect(read.target == call.target && read.generics == [] && read.arguments == call.arguments)
        }
        // A typed call is the same bytes.
        #expect(try CBOREncoder().encode(TypedCall<String>(call)) == bytes)
    }

    @Test func argumentsAreReadInOrderAndNoMoreThanThereAre() throws {
        var decoder = try ClusterInvocationDecoder(call: try Self.call(), decoder: CBORDecoder())
        #expect(try decoder.decodeNextArgument() as Point == Point(x: 1, label: "a"))
        #expect(try decoder.decodeNextArgument() as String == "second")
        // Failures the runtime passes on as thrown: answered as decodeFailed, not as an outcome.
        #expect(Self.notStarted { _ = try decoder.decodeNextArgument() as String })

        var wrongType = try ClusterInvocationDecoder(call: try Self.call(), decoder: CBORDecoder())
        #expect(Self.notStarted { _ = try wrongType.decodeNextArgument() as Int })

        // An indefinite-length array of arguments reads the same.
        var indefinite = try Self.call()
        indefinite.arguments.bytes[0] = 0x9f
        indefinite.arguments.bytes.append(0xff)
        var reader = try ClusterInvocationDecoder(call: indefinite, decoder: CBORDecoder())
        #expect(reader.count == 2)
        #expect(try reader.decodeNextArgument() as Point == Point(x: 1, label: "a"))
        #expect(try reader.decodeNextArgument() as String == "second")

        let notAnArray = DistributedCall(target: "f", arguments: RawCBOR(bytes: [0x01]))
        #expect(throws: CBORError.self) { _ = try ClusterInvocationDecoder(call: notAnArray, decoder: CBORDecoder()) }
    }

    /// True when `body` throws a `decodeFailed` that stops the call.
    static func notStarted(_ body: () throws -> Void) -> Bool {
        do {
            try body()
            return false
        } catch let error as CallNotStarted {
            if case .decodeFailed = error.failure { return true }
            return false
        } catch {
            return false
        }
    }

    /// Decoders accept definite and indefinite lengths anywhere in a call:
    /// every mix of them reads as the same call.
    @Test func callsOfAnyMixOfDefiniteAndIndefiniteLengthsReadTheSame() throws {
        let call = try Self.call()
        var rng = SeededRandom(seed: 0x1DEF)
        for _ in 0..<500 {
            var bytes: [UInt8] = []
            let outer = Bool.random(using: &rng)
            bytes += outer ? [0x9f] : [0x83]
            bytes += CBORValidityTests.encodeText(call.target, &rng)
            let generics = ["Si", "SS"].prefix(Int.random(in: 0...2, using: &rng))
            let list = Bool.random(using: &rng)
            bytes += list ? [0x9f] : [0x80 | UInt8(generics.count)]
            for name in generics { bytes += CBORValidityTests.encodeText(name, &rng) }
            if list { bytes.append(0xff) }
            let arguments = Bool.random(using: &rng)
            bytes += arguments ? [0x9f] : [0x82]
            bytes += try CBOREncoder().encode(Point(x: 1, label: "a")) + (try CBOREncoder().encode("second"))
            if arguments { bytes.append(0xff) }
            if outer { bytes.append(0xff) }
            for read in [
                try CBORDecoder().decode(DistributedCall.self, from: bytes),
                try DistributedCall(cbor: bytes.span.bytes, knownTarget: call.target),
            ] {
                #expect(read.target == call.target && read.generics == Array(generics))
                var decoder = try ClusterInvocationDecoder(call: read, decoder: CBORDecoder())
                #expect(decoder.count == 2)
                #expect(try decoder.decodeNextArgument() as Point == Point(x: 1, label: "a"))
                #expect(try decoder.decodeNextArgument() as String == "second")
            }
            // A fourth item, or a missing break, is still refused.
            if outer {
                let extra = Array(bytes.dropLast()) + [0x00, 0xff]
                #expect(throws: CBORError.self) {
                    try DistributedCall(cbor: extra.span.bytes, knownTarget: nil)
                }
                #expect(throws: CBORError.self) {
                    try DistributedCall(cbor: Array(bytes.dropLast()).span.bytes, knownTarget: nil)
                }
            }
        }
    }

    @Test func outcomesAreATagAndTheValueItself() throws {
        let point = Point(x: 7, label: "p")
        let returned = try CBOREncoder().encode(ReturnedValue(value: point))
        #expect(returned == (try CBOREncoder().encode(DistributedOutcome<Point>.value(point))))
        #expect(returned.prefix(2) == [0x82, 0x00])
        guard case .value(let typed) = try CBORDecoder().decode(DistributedOutcome<Point>.self, from: returned) else {
            Issue.record("a value outcome")
            return
        }
        #expect(typed == point)
        // Passed on undecoded, then decoded where the type is known.
        guard case .value(let raw) = try CBORDecoder().decode(DistributedOutcome<RawCBOR>.self, from: returned) else {
            Issue.record("a value outcome")
            return
        }
        #expect(try CBORDecoder().decode(Point.self, from: raw.bytes) == point)

        #expect(try CBOREncoder().encode(DistributedOutcome<Done>.void) == [0x81, 0x01])
        let error = DistributedOutcome<Done>.error(type: "M.E", message: "bad", value: RawCBOR(bytes: [0x05]))
        guard
            case .error("M.E", "bad", let value) = try CBORDecoder().decode(
                DistributedOutcome<Point>.self, from: try CBOREncoder().encode(error))
        else {
            Issue.record("an error outcome")
            return
        }
        #expect(value == RawCBOR(bytes: [0x05]))
    }

    /// A callee answers a local asker that awaits the encoded form.
    @Test func aTypedOutcomeConvertsToTheEncodedForm() throws {
        let converted = ReturnedValue(value: "hi").converted(to: DistributedOutcome<RawCBOR>.self)
        guard case .value(let raw) = converted as? DistributedOutcome<RawCBOR> else {
            Issue.record("converted: \(String(describing: converted))")
            return
        }
        #expect(raw.bytes == (try CBOREncoder().encode("hi")))
        #expect(DistributedOutcome<Int>.void.converted(to: DistributedOutcome<RawCBOR>.self) != nil)
        #expect(ReturnedValue(value: "hi").converted(to: Int.self) == nil, "not an outcome: refused")
    }

    @Test func rawItemsTravelThroughOtherCodersAsValues() throws {
        let raw = RawCBOR(bytes: try CBOREncoder().encode(["a": 1]))
        let json = try JSONEncoder().encode(raw)
        #expect(try JSONDecoder().decode(RawCBOR.self, from: json).bytes.isEmpty == false)
        // An item that is not whole is refused where it is read.
        #expect(throws: CBORError.self) { _ = try CBORDecoder().decode(RawCBOR.self, from: [0x82, 0x01]) }
    }

    @Test func callAndOutcomeReadersOnlyEverThrowTypedErrors() async throws {
        var rng = SeededRandom(seed: 0xD157_2026)
        let corpus = [
            try CBOREncoder().encode(try Self.call()),
            try CBOREncoder().encode(ReturnedValue(value: Point(x: 1, label: "z"))),
            try CBOREncoder().encode(DistributedOutcome<Done>.error(type: "T", message: "m", value: nil)),
        ]
        var read = 0
        for i in 0..<20_000 {
            if i % 1_000 == 0 { await Task.yield() }
            let input = FuzzTests.mutate(corpus[i % corpus.count], &rng)
            if (try? DistributedCall(cbor: input.span.bytes, knownTarget: "x")) != nil { read += 1 }
            if let call = try? CBORDecoder().decode(DistributedCall.self, from: input),
                var decoder = try? ClusterInvocationDecoder(call: call, decoder: CBORDecoder())
            {
                _ = try? decoder.decodeNextArgument() as Point
            }
            if (try? CBORDecoder().decode(DistributedOutcome<Point>.self, from: input)) != nil { read += 1 }
        }
        #expect(read > 100, "some mutations stay valid, so the readers' success paths ran")
    }
}
