import Foundation
import OscarBase
import OscarCBOR
import OscarCluster
import OscarMembership
import OscarRemote
import OscarRuntime

/// A call to a distributed function, as it travels: an ask whose message is
/// this and whose reply is a `DistributedOutcome`. Riding on the ask path
/// gives calls the same pending table, timeouts and typed errors as
/// messages.
///
/// This is the form that nodes which only pass a call on (a pool routee, a
/// virtual-actor host) and the CLI work with: the arguments stay encoded.
/// A caller sends it as a `TypedCall`, whose reply it decodes as its own
/// result type.
package struct DistributedCall: Message {
    package typealias Reply = DistributedOutcome<RawCBOR>
    package static var manifest: String { "oscar.distributed.call" }

    /// The function's mangled identifier (`RemoteCallTarget.identifier`),
    /// or a plain function name from the CLI.
    package var target: String
    /// Mangled names of the generic substitutions.
    var generics: [String] = []
    /// The arguments: one CBOR array, each argument an item of it.
    package var arguments = RawCBOR(bytes: [0x80])
    /// The depth of the arguments' array in the payload the call was read
    /// from (`CBORReader.maxDepth`): 1 in a call's own payload, deeper in a
    /// virtual call's. Not sent; an argument is decoded one level deeper.
    var argumentsDepth = 1
}

/// A call is an array on the wire, `[target, generics, [argument, ...]]`,
/// not a map: every call pays for its encoding, and its shape never changes
/// without the protocol version changing. The arguments are items inside
/// it, encoded once by the caller and decoded once by the callee.
extension DistributedCall {
    package init(from decoder: any Decoder) throws {
        guard let cbor = decoder as? CBORDecoding else {
            var c = try decoder.unkeyedContainer()
            target = try c.decode(String.self)
            generics = try c.decode([String].self)
            arguments = try c.decode(RawCBOR.self)
            return
        }
        var r = cbor.reader(at: cbor.position)
        self = try Self.read(&r, depth: cbor.depth, knownTarget: nil)
        cbor.readItem = (cbor.position, r.position)
    }

    /// Reads a call that arrived as a frame's payload (the callee's path).
    /// When its target's text equals `knownTarget` (the last one this
    /// actor was called with), that string is used rather than a new one.
    init(cbor payload: RawSpan, knownTarget: String?) throws(CBORError) {
        self = try CBORReader.reading(payload) { (r) throws(CBORError) in
            let call = try Self.read(&r, depth: 0, knownTarget: knownTarget)
            guard r.isAtEnd else { throw .malformed("trailing bytes after the call", at: r.position) }
            return call
        }
    }

    /// Reads a call, an item at `depth`, in one pass, without a container
    /// per level. Definite and indefinite lengths are both read, as
    /// everywhere in a payload.
    private static func read(
        _ r: inout CBORReader, depth: Int, knownTarget: String?
    ) throws(CBORError)
        -> DistributedCall
    {
        try CBORReader.check(depth: depth)
        let start = r.position
        let head = try r.head()
        guard head.major == 4, head.isIndefinite || head.argument == 3 else {
            throw .malformed("a distributed call is an array of 3 items", at: start)
        }
        try CBORReader.check(depth: depth + 1)
        let target = try Self.target(&r, knownTarget: knownTarget)
        let listStart = r.position
        let list = try r.head()
        guard list.major == 4 else {
            throw .malformed("a call's generic substitutions are not an array", at: listStart)
        }
        var generics: [String] = []
        if list.isIndefinite {
            while !(try r.consumeBreak()) {
                try CBORReader.check(depth: depth + 2)
                generics.append(try text(&r))
            }
        } else {
            let count = try r.checkedLength(list)
            if count > 0 { try CBORReader.check(depth: depth + 2) }
            for _ in 0..<count { generics.append(try text(&r)) }
        }
        let argumentsStart = r.position
        guard try r.peek() >> 5 == 4 else { throw .malformed("a call's arguments are not an array", at: r.position) }
        try r.skipItem(depth: depth + 1)
        let argumentsEnd = r.position
        if head.isIndefinite, !(try r.consumeBreak()) {
            throw .malformed("a distributed call is an array of 3 items", at: r.position)
        }
        return DistributedCall(
            target: target, generics: generics,
            arguments: RawCBOR(bytes: Array(r.bytes[argumentsStart..<argumentsEnd])),
            argumentsDepth: depth + 1)
    }

    /// The call's target. When it is a definite-length text equal to
    /// `knownTarget` (the last one this actor was called with), that string
    /// is used rather than a new one.
    private static func target(_ r: inout CBORReader, knownTarget: String?) throws(CBORError) -> String {
        let start = r.position
        let head = try r.head()
        guard head.major == 3 else { throw .malformed("the call's target is not a text string", at: start) }
        guard !head.isIndefinite, let knownTarget else { return try r.wholeText(head, start: start) }
        let bytes = try r.stringBytes(head)
        if bytes.isUTF8(of: knownTarget) { return knownTarget }
        guard let text = CBORDecoding.SingleValue.validText(bytes) else {
            throw .malformed("the call's target is not UTF-8", at: start)
        }
        return text
    }

    /// A text string, definite or indefinite.
    private static func text(_ r: inout CBORReader) throws(CBORError) -> String {
        let start = r.position
        let head = try r.head()
        guard head.major == 3 else { throw .malformed("expected a text string", at: start) }
        return try r.wholeText(head, start: start)
    }

    package func encode(to encoder: any Encoder) throws {
        if let cbor = encoder as? CBOREncoding {
            // Written straight out: every call is encoded this way.
            cbor.writer.bytes.append(0x83)
            cbor.writer.text(target)
            cbor.writer.head(4, UInt64(generics.count))
            for name in generics { cbor.writer.text(name) }
            cbor.writer.bytes.append(contentsOf: arguments.bytes)
            return
        }
        var c = encoder.unkeyedContainer()
        try c.encode(target)
        try c.encode(generics)
        try c.encode(arguments)
    }
}

/// A caller's call: a `DistributedCall` whose reply decodes straight into
/// the function's result type, so the result is read once, from the frame.
/// Same manifest and bytes as `DistributedCall`.
struct TypedCall<Result: Codable>: Message, CarriesDistributedCall {
    package typealias Reply = DistributedOutcome<Result>
    package static var manifest: String { DistributedCall.manifest }
    package var call: DistributedCall

    init(_ call: DistributedCall) { self.call = call }
    package init(from decoder: any Decoder) throws { call = try DistributedCall(from: decoder) }
    package func encode(to encoder: any Encoder) throws { try call.encode(to: encoder) }
}

/// A message that is a distributed call in another form (`TypedCall`), for
/// a callee handed one without encoding.
protocol CarriesDistributedCall {
    var call: DistributedCall { get }
}

/// How a distributed call ended on the callee's side. On the wire an array
/// led by a tag: `[0, value]`, `[1]`, `[2, type, message, value or null]`.
package enum DistributedOutcome<Value: Codable>: Codable {
    case value(Value)
    case void
    /// A thrown error: its type's name, its description, and, when its type
    /// is `Codable`, its encoding (the caller decides whether to decode it).
    case error(type: String, message: String, value: RawCBOR?)

    package init(from decoder: any Decoder) throws {
        if let cbor = decoder as? CBORDecoding {
            // A value or void outcome is read in one pass (every reply is
            // decoded where it arrives, so it pays for each walk of its
            // bytes). Written out here, not in a helper returning `Self?`,
            // whose optional type's metadata would be looked up per reply.
            var r = cbor.reader(at: cbor.position)
            let start = r.position
            let head = try r.head()
            if head.major == 4, !head.isIndefinite, head.argument == 2 || head.argument == 1 {
                let tag = try r.head()
                if tag.major == 0, tag.argument == 0, head.argument == 2 {
                    let value = try cbor.decodeValue(Value.self, at: r.position, depth: cbor.depth + 1)
                    if let end = cbor.knownEnd(at: r.position) { cbor.readItem = (start, end) }
                    self = .value(value)
                    return
                }
                if tag.major == 0, tag.argument == 1, head.argument == 1 {
                    cbor.readItem = (start, r.position)
                    self = .void
                    return
                }
            }
        }
        var c = try decoder.unkeyedContainer()
        switch try c.decode(Int.self) {
        case 0: self = .value(try c.decode(Value.self))
        case 1: self = .void
        case 2:
            self = .error(
                type: try c.decode(String.self), message: try c.decode(String.self),
                value: try c.decodeIfPresent(RawCBOR.self))
        case let tag:
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "outcome tag \(tag)"))
        }
    }

    /// A value is written as `ReturnedValue` writes it (one place for
    /// `[0, value]`); void straight out; an error through a container.
    package func encode(to encoder: any Encoder) throws {
        if case .value(let value) = self { return try ReturnedValue(value: value).encode(to: encoder) }
        if case .void = self, let cbor = encoder as? CBOREncoding {
            cbor.writer.bytes.append(0x81)
            return cbor.writer.bytes.append(0x01)
        }
        var c = encoder.unkeyedContainer()
        switch self {
        case .value: break  // written above
        case .void: try c.encode(1)
        case .error(let type, let message, let value):
            try c.encode(2)
            try c.encode(type)
            try c.encode(message)
            try c.encode(value)
        }
    }
}

/// The value of a call's result crosses from the connection's loop, where
/// the reply is decoded, to the one task that awaits it: never shared.
/// (`Codable` results need not be `Sendable`.)
extension DistributedOutcome: @unchecked Sendable {}

/// A callee answers a local asker (a pool routee, the CLI) in the form it
/// awaits, as it would be read from the network.
extension DistributedOutcome: ReplyConvertible {}

/// A value a distributed function returned, on its way back: encoded as
/// `DistributedOutcome.value`. Not generic, so that sending it costs no
/// lookup of a generic type's metadata per call.
struct ReturnedValue: Encodable, ReplyConvertible, @unchecked Sendable {
    /// Handed over by the function that returned it, to this reply only.
    package let value: any Encodable

    package func encode(to encoder: any Encoder) throws {
        if let cbor = encoder as? CBOREncoding {
            cbor.writer.bytes.append(0x82)
            cbor.writer.bytes.append(0x00)
            return try cbor.encodeValue(value)
        }
        var c = encoder.unkeyedContainer()
        try c.encode(0)
        try c.encode(value)
    }
}

/// An error thrown by a distributed function on another node whose type the
/// caller does not decode: the remote type's name and the error's
/// description. A type listed in `ClusterSystem.Settings.decodableErrors`
/// arrives as itself instead, the same as from a local call.
public struct RemoteCallError: Error, Sendable, CustomStringConvertible {
    /// The error's type as the callee named it, such as `MyModule.GreeterError`.
    public var typeName: String
    /// The callee's description of the error.
    public var message: String

    public init(typeName: String, message: String) {
        self.typeName = typeName
        self.message = message
    }

    public var description: String { "\(typeName): \(message)" }
}
