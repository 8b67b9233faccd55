import Distributed
import OscarBase
import OscarCBOR
import OscarCluster
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// Executes calls to distributed functions with their signatures looked up
/// once per function, not once per call.
///
/// The Distributed library's `executeDistributedTarget` demangles the
/// target's name three times on every call (its parameter count, parameter
/// types and return type): about a tenth of a callee's time in W3. Here
/// those types are read once, with the same runtime functions, and kept;
/// each call then goes straight to the runtime's executor
/// (`swift_distributed_execute_target`), as `executeDistributedTarget` does
/// after its lookups.
///
/// - Only functions this program has (`CallableFunctions`) are looked up,
///   so names from the network cannot grow the cache.
/// - Generic functions take the library's path: their types depend on each
///   call's substitutions.
///
/// Deviation from "unsafe pointers only in EventLoop/ and Transport/": the
/// runtime takes its arguments as raw buffers. They are confined to this
/// file, and the buffers a signature keeps live as long as the process.
enum TargetExecution {
    /// What a call needs to know of its target, kept for the process's life.
    struct Signature: @unchecked Sendable {
        /// The identifier's UTF-8 bytes: the runtime finds the function by them.
        package let name: UnsafeMutableBufferPointer<UInt8>
        /// The parameter types, in order (at least one slot, never nil).
        let argumentTypes: UnsafeMutableBufferPointer<Any.Type>
        /// How many parameters the function takes.
        let parameterCount: Int
        /// How to hand the returned value to the result handler; nil for
        /// a function that returns nothing.
        package let result: (any ResultSlot.Type)?
    }

    /// Takes a returned value out of the result buffer and hands it on,
    /// typed: `Returned<R>`, made once per return type, where the type is
    /// still known.
    protocol ResultSlot {
        static var size: Int { get }
        static var alignment: Int { get }
        static func deliver(_ buffer: UnsafeMutableRawPointer, to handler: ClusterResultHandler) async throws
    }

    enum Returned<R: Codable>: ResultSlot {
        package static var size: Int { MemoryLayout<R>.size }
        static var alignment: Int { MemoryLayout<R>.alignment }
        static func deliver(_ buffer: UnsafeMutableRawPointer, to handler: ClusterResultHandler) async throws {
            handler.send(buffer.assumingMemoryBound(to: R.self).move())
        }
    }

    /// How calls to one function are executed, decided at its first call.
    enum Plan: Sendable {
        case direct(Signature)
        /// Generic, unknown here, or a signature the runtime would not
        /// read: the library's path (which also reports what is wrong).
        /// `parameters` is the function's parameter count, when this
        /// program has the function.
        case library(parameters: Int?)

        /// How many arguments a call must carry; nil when not known here.
        var parameterCount: Int? {
            switch self {
            case .direct(let signature): signature.parameterCount
            case .library(let parameters): parameters
            }
        }
    }

    private static let plans = Mutex<[String: Plan]>([:])

    /// The plan for `target`, read once per function this program has.
    package static func plan(for target: String) -> Plan {
        if let known = plans.withLock({ $0[target] }) { return known }
        // Names that are not this program's functions are not looked up (nor
        // kept): they come from the network.
        guard let function = CallableFunctions.function(identifier: target) else { return .library(parameters: nil) }
        let library = Plan.library(parameters: parameterCount(of: target))
        let plan = function.isGeneric ? library : read(target).map(Plan.direct) ?? library
        // Two loops may read the same function at once: the first plan kept
        // wins, and the other's buffers are freed (cached ones live forever).
        let kept = plans.withLock { cache in
            if let first = cache[target] { return first }
            cache[target] = plan
            return plan
        }
        if case .direct(let mine) = plan, case .direct(let first) = kept,
            first.name.baseAddress != mine.name.baseAddress
        {
            mine.name.deallocate()
            mine.argumentTypes.deallocate()
        }
        return kept
    }

    /// The plan of a call that takes the library's path (the direct path is
    /// off or not verified): only the parameter count, read as the library
    /// reads it, so a call with extra arguments is still refused.
    package static func libraryPlan(for target: String) -> Plan {
        .library(parameters: parameterCount(of: target))
    }

    /// Runs `target` on `actor` as `plan` says, decoding its arguments with
    /// `decoder` and handing its outcome (value, nothing, or thrown error)
    /// to `handler`.
    package static func execute(
        _ target: String, _ plan: Plan, on actor: any DistributedActor, decoder: inout ClusterInvocationDecoder,
        handler: ClusterResultHandler
    ) async throws {
        guard case .direct(let signature) = plan else {
            guard let system = actor.actorSystem as? ClusterSystem else {
                throw AskError.handlerFailed("\(actor.id) is not an actor of a ClusterSystem")
            }
            return try await system.executeDistributedTarget(
                on: actor, target: RemoteCallTarget(target), invocationDecoder: &decoder, handler: handler)
        }
        let result = signature.result
        let buffer = UnsafeMutableRawPointer.allocate(
            byteCount: max(result?.size ?? 1, 1), alignment: result?.alignment ?? 1)
        defer { buffer.deallocate() }
        do {
            try await executeTarget(
                on: actor, signature.name.baseAddress!, UInt(signature.name.count), argumentDecoder: &decoder,
                argumentTypes: UnsafeRawPointer(signature.argumentTypes.baseAddress!), resultBuffer: buffer,
                substitutions: nil, witnessTables: nil, numWitnessTables: 0)
        } catch {
            // Nothing was returned: the buffer holds no value to destroy.
            return try await handler.onThrow(error: error)
        }
        if let result {
            try await result.deliver(buffer, to: handler)
        } else {
            try await handler.onReturnVoid()
        }
    }

    /// Reads a non-generic function's parameter and return types.
    private static func read(_ target: String) -> Signature? {
        guard !target.isEmpty else { return nil }  // an empty name is no function, and has no bytes to point at
        let name = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: target.utf8.count)
        _ = name.initialize(from: target.utf8)
        let length = UInt(name.count)
        let count = __getParameterCount(name.baseAddress!, length)
        guard count >= 0,
            _getGenericEnvironmentOfDistributedTarget(name.baseAddress!, length) == nil,
            let returnType = __getReturnTypeInfo(name.baseAddress!, length, nil, nil)
        else {
            name.deallocate()
            return nil
        }
        let types = UnsafeMutableBufferPointer<Any.Type>.allocate(capacity: max(Int(count), 1))
        let read = parameterTypes(
            name.baseAddress!, length, nil, nil, UnsafeMutableRawPointer(types.baseAddress!), Int(count))
        // `.some(nil)` for a function that returns nothing; nil when the
        // returned type is not `Codable` (then the library's path reports it).
        let result: (any ResultSlot.Type)?? =
            returnType == Void.self ? .some(nil) : (returnType as? any Codable.Type).map { slot(for: $0) }
        guard read == count, let result else {
            name.deallocate()
            types.deallocate()
            return nil
        }
        return Signature(name: name, argumentTypes: types, parameterCount: Int(count), result: result)
    }

    private static func slot<R: Codable>(for type: R.Type) -> any ResultSlot.Type { Returned<R>.self }

    /// The parameter count of a function of this program, from its
    /// mangled name; nil if the runtime cannot read it.
    private static func parameterCount(of target: String) -> Int? {
        var name = target
        let count = name.withUTF8 { utf8 in
            utf8.isEmpty ? -1 : __getParameterCount(utf8.baseAddress!, UInt(utf8.count))
        }
        return count >= 0 ? Int(count) : nil
    }
}

/// The runtime's executor of distributed targets, which the Distributed
/// library's `executeDistributedTarget` calls after its lookups: finds the
/// function's accessor by name, which decodes each argument with
/// `decodeNextArgument`, calls the function on the actor, and stores what
/// it returns in `resultBuffer`. Declared as the library declares it.
@_silgen_name("swift_distributed_execute_target")
private func executeTarget<D: DistributedTargetInvocationDecoder>(
    on actor: AnyObject, _ targetName: UnsafePointer<UInt8>, _ targetNameLength: UInt,
    argumentDecoder: inout D, argumentTypes: UnsafeRawPointer, resultBuffer: UnsafeMutableRawPointer,
    substitutions: UnsafeRawPointer?, witnessTables: UnsafeRawPointer?, numWitnessTables: UInt
) async throws

/// Writes a function's parameter types into `types` and returns how many
/// it wrote (the library's `__getParameterTypeInfo`, with a raw pointer).
@_silgen_name("swift_func_getParameterTypeInfo")
private func parameterTypes(
    _ name: UnsafePointer<UInt8>, _ length: UInt, _ genericEnvironment: UnsafeRawPointer?,
    _ genericArguments: UnsafeRawPointer?, _ types: UnsafeMutableRawPointer, _ capacity: Int
) -> Int32
