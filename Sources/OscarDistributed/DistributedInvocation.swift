import Distributed
import Foundation
import OscarBase
import OscarCBOR
import OscarCluster
import OscarMembership
import OscarRemote
import OscarRuntime

/// Records a call on the caller's side: generic substitutions by mangled
/// name, and each argument encoded at once into the call's array of
/// arguments, which the frame then carries as it is. The return and error
/// types are not sent: the callee takes them from its own function.
public struct ClusterInvocationEncoder: DistributedTargetInvocationEncoder {
    public typealias SerializationRequirement = any Codable
    var generics: [String] = []
    /// `[argument, ...]`, its head a placeholder until `doneRecording`.
    private var arguments: [UInt8]
    private var count: UInt64 = 0

    init() {
        // Room for the usual small arguments: growing by doubling from one
        // byte cost five allocations a call.
        arguments = []
        arguments.reserveCapacity(128)
        arguments.append(0x80)
    }

    public mutating func recordGenericSubstitution<T>(_ type: T.Type) throws {
        guard let name = TypeNames.name(of: type) else {
            throw RemoteCallError(typeName: "\(type)", message: "has no mangled name to send")
        }
        generics.append(name)
    }

    public mutating func recordArgument<Value: Codable>(_ argument: RemoteCallArgument<Value>) throws {
        try CBOREncoder().encode(argument.value, appendingTo: &arguments)
        count += 1
    }

    public mutating func recordReturnType<R: Codable>(_ type: R.Type) throws {}

    public mutating func recordErrorType<E: Error>(_ type: E.Type) throws {}

    public mutating func doneRecording() throws {
        if count < 24 {
            arguments[0] = 0x80 | UInt8(count)  // the head is one byte: patched in place
        } else {
            var head = CBORWriter(capacity: 9)
            head.head(4, count)
            arguments.replaceSubrange(0..<1, with: head.bytes)
        }
    }

    /// The call to `target` with what was recorded.
    package func call(to target: String) -> DistributedCall {
        DistributedCall(target: target, generics: generics, arguments: RawCBOR(bytes: arguments))
    }
}

/// Reads a call on the callee's side: its arguments in order, each decoded
/// from its place in the call's array as the type the function declares.
public struct ClusterInvocationDecoder: DistributedTargetInvocationDecoder {
    public typealias SerializationRequirement = any Codable
    package let call: DistributedCall
    private let decoder: CBORDecoder
    private var next = 0
    /// Where the next argument starts in `call.arguments`.
    private var position = 0
    /// How many arguments the call carries.
    package private(set) var count = 0
    /// Whether errors name the target by its signature, from the table of
    /// callable functions (part of the direct call path), or by its symbol.
    var describesTarget = true

    /// Reads the head of the call's arguments (of definite or indefinite
    /// length: the items of an indefinite one are counted here).
    init(call: DistributedCall, decoder: CBORDecoder) throws(CBORError) {
        self.call = call
        self.decoder = decoder
        (count, position) = try CBORReader.reading(call.arguments.bytes.span.bytes) { (r) throws(CBORError) in
            let head = try r.head()
            guard head.major == 4 else { throw .malformed("the arguments are not an array", at: 0) }
            let first = r.position
            if !head.isIndefinite { return (try r.checkedLength(head), first) }
            var count = 0
            while !(try r.consumeBreak()) {
                try r.skipItem(depth: call.argumentsDepth + 1)
                count += 1
            }
            return (count, first)
        }
    }

    public mutating func decodeGenericSubstitutions() throws -> [Any.Type] {
        try call.generics.map { name in
            guard let type = TypeNames.type(named: name) else {
                throw CallNotStarted(.decodeFailed("the generic substitution \(name) is not a type this node knows"))
            }
            return type
        }
    }

    public mutating func decodeNextArgument<Argument: Codable>() throws -> Argument {
        guard next < count else {
            throw CallNotStarted(
                .decodeFailed("the call to \(call.target) has \(count) arguments; more were read"))
        }
        next += 1
        do {
            // Generic code that runs unspecialized: no tuple or Result of
            // `Argument`, whose metadata would be looked up on every call.
            let arguments = call.arguments.bytes
            var end = position
            let value = try decoder.decode(
                Argument.self, from: arguments.span.bytes, itemAt: position, depth: call.argumentsDepth + 1, end: &end)
            position = end
            return value
        } catch {
            throw CallNotStarted(
                .decodeFailed(
                    "argument \(next) of \(describesTarget ? CallableFunctions.signature(of: call.target) : call.target) as \(Argument.self): \(error)"
                )
            )
        }
    }

    public mutating func decodeErrorType() throws -> Any.Type? { nil }

    public mutating func decodeReturnType() throws -> Any.Type? { nil }
}

/// Sends a call's outcome back to its caller (a reply to the call's ask),
/// the value encoded once, straight into the reply.
public struct ClusterResultHandler: DistributedTargetInvocationResultHandler {
    public typealias SerializationRequirement = any Codable
    package let reply: (any ReplyTarget)?

    public func onReturn<Success: Codable>(value: Success) async throws { send(value) }

    /// Sends a returned value back. Called by `TargetExecution` directly,
    /// with the value's conformance at hand: `onReturn`, the library's
    /// entry, looks up `Codable`'s two conformances on every call.
    package func send<Success: Encodable>(_ value: Success) { reply?.succeed(ReturnedValue(value: value)) }

    public func onReturnVoid() async throws { reply?.succeed(DistributedOutcome<Done>.void) }

    public func onThrow<Err: Error>(error: Err) async throws {
        // The dynamic type: `Err` is often just `any Error`.
        let thrown: any Error = error
        // The runtime reports an argument that did not decode here too: the
        // function did not run, so the caller gets a failure, not an outcome.
        if let notStarted = thrown as? CallNotStarted {
            reply?.fail(notStarted.failure)
            return
        }
        let value = (thrown as? any Encodable).flatMap { try? CBOREncoder().encode($0) }.map(RawCBOR.init)
        reply?.succeed(
            DistributedOutcome<Done>.error(
                type: String(reflecting: type(of: thrown)), message: "\(thrown)", value: value))
    }
}

/// A call whose arguments do not fit its function: an argument that does
/// not decode as its parameter's type, or a generic substitution this node
/// does not know. Thrown where the runtime reads the arguments, before the
/// function runs, and answered with a failure frame carrying `failure`
/// (docs/PROTOCOL.md, "Distributed calls"), never with an outcome, which
/// would say the function threw.
struct CallNotStarted: Error, CustomStringConvertible {
    package let failure: AskError
    init(_ failure: AskError) { self.failure = failure }
    package var description: String { "\(failure)" }
}
