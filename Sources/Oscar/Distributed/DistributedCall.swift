import Foundation

/// A call to a distributed function, as it travels: an ask whose message is
/// this and whose reply is a `DistributedOutcome`. Riding on the ask path
/// gives calls the same pending table, timeouts and typed errors as
/// messages.
///
/// This is the form that nodes which only pass a call on (a pool routee, a
/// virtual-actor host) and the CLI work with: the arguments stay encoded.
/// A caller sends it as a `TypedCall`, whose reply it decodes as its own
/// result type.
struct DistributedCall: Message {
    typealias Reply = DistributedOutcome<RawCBOR>
    static var manifest: String { "oscar.distributed.call" }

    /// The function's mangled identifier (`RemoteCallTarget.identifier`),
    /// or a plain function name from the CLI.
    var target: String
    /// Mangled names of the generic substitutions.
    var generics: [String] = []
    /// The arguments: one CBOR array, each argument an item of it.
    var arguments = RawCBOR(bytes: [0x80])
}

/// A call is an array on the wire, `[target, generics, [argument, ...]]`,
/// not a map: every call pays for its encoding, and its shape never changes
/// without the protocol version changing. The arguments are items inside
/// it, encoded once by the caller and decoded once by the callee.
extension DistributedCall {
    init(from decoder: any Decoder) throws {
        guard let cbor = decoder as? CBORDecoding else {
            var c = try decoder.unkeyedContainer()
            target = try c.decode(String.self)
            generics = try c.decode([String].self)
            arguments = try c.decode(RawCBOR.self)
            return
        }
        // Read in one pass, without a container per level.
        var r = cbor.reader(at: cbor.position)
        let start = r.position
        let head = try r.head()
        guard head.major == 4, head.argument == 3, !head.isIndefinite else {
            throw CBORError.malformed("a distributed call is an array of 3 items", at: start)
        }
        target = try CBORDecoding.SingleValue.string(&r, cbor)
        let list = try r.head()
        guard list.major == 4, !list.isIndefinite else { throw cbor.mismatch("an array of type names", list) }
        generics = []
        for _ in 0..<(try r.checkedLength(list)) { generics.append(try CBORDecoding.SingleValue.string(&r, cbor)) }
        let argumentsStart = r.position
        guard try r.peek() >> 5 == 4 else { throw cbor.mismatch("an array of arguments", try r.head()) }
        try r.skipItem()
        arguments = RawCBOR(bytes: Array(r.bytes[argumentsStart..<r.position]))
    }

    func encode(to encoder: any Encoder) throws {
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
    typealias Reply = DistributedOutcome<Result>
    static var manifest: String { DistributedCall.manifest }
    var call: DistributedCall

    init(_ call: DistributedCall) { self.call = call }
    init(from decoder: any Decoder) throws { call = try DistributedCall(from: decoder) }
    func encode(to encoder: any Encoder) throws { try call.encode(to: encoder) }
}

/// A message that is a distributed call in another form (`TypedCall`), for
/// a callee handed one without encoding.
protocol CarriesDistributedCall {
    var call: DistributedCall { get }
}

/// How a distributed call ended on the callee's side. On the wire an array
/// led by a tag: `[0, value]`, `[1]`, `[2, type, message, value or null]`.
enum DistributedOutcome<Value: Codable>: Codable {
    case value(Value)
    case void
    /// A thrown error: its type's name, its description, and, when its type
    /// is `Codable`, its encoding (the caller decides whether to decode it).
    case error(type: String, message: String, value: RawCBOR?)

    init(from decoder: any Decoder) throws {
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

    func encode(to encoder: any Encoder) throws {
        var c = encoder.unkeyedContainer()
        switch self {
        case .value(let value):
            try c.encode(0)
            try c.encode(value)
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

/// A callee answers a local asker in the asker's form: an outcome of any
/// result type becomes the encoded form a pool routee or the CLI awaits.
extension DistributedOutcome: ReplyConvertible {
    func converted(to type: Any.Type) -> Any? {
        guard type == DistributedOutcome<RawCBOR>.self else { return nil }
        switch self {
        case .value(let value):
            return (try? CBOREncoder().encode(value)).map { DistributedOutcome<RawCBOR>.value(RawCBOR(bytes: $0)) }
        case .void: return DistributedOutcome<RawCBOR>.void
        case .error(let type, let message, let value):
            return DistributedOutcome<RawCBOR>.error(type: type, message: message, value: value)
        }
    }
}

/// An error thrown by a distributed function on another node, as the caller
/// sees it: the remote type's name and the error's description, and the
/// error value itself when its type is `Codable` and the caller's
/// `ClusterSystem.Settings.decodableErrors` lists it.
public struct RemoteCallError: Error, Sendable, CustomStringConvertible {
    /// The error's type as the callee named it, such as `MyModule.GreeterError`.
    public var typeName: String
    /// The callee's description of the error.
    public var message: String
    /// The error value, decoded, when allowed.
    public var value: (any Error & Sendable)?

    public var description: String { "\(typeName): \(message)" }
}
