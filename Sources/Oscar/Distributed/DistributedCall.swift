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

/// How a distributed call ended on the callee's side.
enum DistributedReply: Codable, Sendable {
    /// The returned value, CBOR-encoded.
    case value(Data)
    case void
    /// A thrown error: its type's name, its description, and, when its type
    /// is `Codable`, its encoding (the caller decides whether to decode it).
    case error(type: String, message: String, value: Data?)
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
