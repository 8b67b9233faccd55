import Distributed
import Foundation

/// Records a call on the caller's side: generic substitutions by mangled
/// name, each argument in CBOR, the return and error types.
public struct ClusterInvocationEncoder: DistributedTargetInvocationEncoder {
    public typealias SerializationRequirement = any Codable
    var call = DistributedCall(target: "")
    private let encoder = CBOREncoder()

    init() {}

    public mutating func recordGenericSubstitution<T>(_ type: T.Type) throws {
        guard let name = TypeNames.name(of: type) else {
            throw RemoteCallError(typeName: "\(type)", message: "has no mangled name to send", value: nil)
        }
        call.generics.append(name)
    }

    public mutating func recordArgument<Value: Codable>(_ argument: RemoteCallArgument<Value>) throws {
        call.arguments.append(Data(try encoder.encode(argument.value)))
    }

    public mutating func recordReturnType<R: Codable>(_ type: R.Type) throws {
        call.returnType = TypeNames.name(of: type)
    }

    public mutating func recordErrorType<E: Error>(_ type: E.Type) throws { call.errorType = TypeNames.name(of: type) }

    public mutating func doneRecording() throws {}
}

/// Reads a call on the callee's side, in the order it was recorded.
public struct ClusterInvocationDecoder: DistributedTargetInvocationDecoder {
    public typealias SerializationRequirement = any Codable
    let call: DistributedCall
    private var next = 0
    private let decoder: CBORDecoder

    init(call: DistributedCall, decoder: CBORDecoder) {
        self.call = call
        self.decoder = decoder
    }

    public mutating func decodeGenericSubstitutions() throws -> [Any.Type] {
        try call.generics.map { name in
            guard let type = TypeNames.type(named: name) else {
                throw RemoteCallError(typeName: name, message: "is not a type this node knows", value: nil)
            }
            return type
        }
    }

    public mutating func decodeNextArgument<Argument: Codable>() throws -> Argument {
        guard next < call.arguments.count else {
            throw AskError.decodeFailed(
                "the call to \(call.target) has \(call.arguments.count) arguments; more were read")
        }
        defer { next += 1 }
        do {
            return try decoder.decode(Argument.self, from: Array(call.arguments[next]))
        } catch {
            throw AskError.decodeFailed(
                "argument \(next + 1) of \(CallableFunctions.signature(of: call.target)) as \(Argument.self): \(error)")
        }
    }

    public mutating func decodeErrorType() throws -> Any.Type? { call.errorType.flatMap(TypeNames.type(named:)) }

    public mutating func decodeReturnType() throws -> Any.Type? { call.returnType.flatMap(TypeNames.type(named:)) }
}

/// Sends a call's outcome back to its caller (a reply to the call's ask).
public struct ClusterResultHandler: DistributedTargetInvocationResultHandler {
    public typealias SerializationRequirement = any Codable
    let reply: (any ReplyTarget)?

    public func onReturn<Success: Codable>(value: Success) async throws {
        reply?.succeed(DistributedReply.value(Data(try CBOREncoder().encode(value))))
    }

    public func onReturnVoid() async throws { reply?.succeed(DistributedReply.void) }

    public func onThrow<Err: Error>(error: Err) async throws {
        // The dynamic type: `Err` is often just `any Error`.
        let thrown: any Error = error
        let value = (thrown as? any Encodable).flatMap { try? CBOREncoder().encode($0) }.map { Data($0) }
        reply?.succeed(
            DistributedReply.error(type: String(reflecting: type(of: thrown)), message: "\(thrown)", value: value))
    }
}
