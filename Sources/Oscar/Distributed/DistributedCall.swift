import Foundation

/// A call to a distributed function, as it travels: an ask whose message is
/// this and whose reply is a `DistributedReply`. Riding on the ask path
/// gives calls the same pending table, timeouts and typed errors as
/// messages.
struct DistributedCall: Message {
    typealias Reply = DistributedReply
    static var manifest: String { "oscar.distributed.call" }

    /// The function's mangled identifier (`RemoteCallTarget.identifier`).
    var target: String
    /// Mangled names of the generic substitutions.
    var generics: [String] = []
    /// Each argument, CBOR-encoded.
    var arguments: [Data] = []
    var returnType: String?
    var errorType: String?
}

/// A call is an array on the wire, `[target, generics, arguments, returnType,
/// errorType]`, not a map: every call pays for its encoding, and its shape
/// never changes without the protocol version changing.
extension DistributedCall {
    init(from decoder: any Decoder) throws {
        var c = try decoder.unkeyedContainer()
        target = try c.decode(String.self)
        generics = try c.decode([String].self)
        arguments = try c.decode([Data].self)
        returnType = try c.decodeIfPresent(String.self)
        errorType = try c.decodeIfPresent(String.self)
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.unkeyedContainer()
        try c.encode(target)
        try c.encode(generics)
        try c.encode(arguments)
        try c.encode(returnType)
        try c.encode(errorType)
    }
}

/// How a distributed call ended on the callee's side. On the wire an array
/// led by a tag: `[0, value]`, `[1]`, `[2, type, message, value]`.
enum DistributedReply: Codable, Sendable {
    /// The returned value, CBOR-encoded.
    case value(Data)
    case void
    /// A thrown error: its type's name, its description, and, when its type
    /// is `Codable`, its encoding (the caller decides whether to decode it).
    case error(type: String, message: String, value: Data?)

    init(from decoder: any Decoder) throws {
        var c = try decoder.unkeyedContainer()
        switch try c.decode(Int.self) {
        case 0: self = .value(try c.decode(Data.self))
        case 1: self = .void
        case 2:
            self = .error(
                type: try c.decode(String.self), message: try c.decode(String.self),
                value: try c.decodeIfPresent(Data.self))
        case let tag:
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "reply tag \(tag)"))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.unkeyedContainer()
        switch self {
        case .value(let bytes):
            try c.encode(0)
            try c.encode(bytes)
        case .void: try c.encode(1)
        case .error(let type, let message, let value):
            try c.encode(2)
            try c.encode(type)
            try c.encode(message)
            try c.encode(value)
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
