import OscarBase
import OscarCBOR
import Synchronization

/// A value that can be sent to an actor.
///
/// A message names its reply type, so `ask` is typed end to end: asking an
/// `Echo` returns an `Echo.Reply`. Messages are `Codable` so that the same
/// message can cross the network; local sends never encode them.
public protocol Message: Codable, Sendable {
    associatedtype Reply: Codable & Sendable = Done
    /// The actor type that handles this message, for `TypedActorRef`: a
    /// message that names its receiver can be sent through a typed ref to
    /// that actor, and through no other (a compile error). `Never` (the
    /// default): untyped refs only.
    associatedtype Receiver = Never

    /// The name the message type travels under. Defaults to the type's name;
    /// override it when two modules' types share a name.
    static var manifest: String { get }
}

extension Message {
    public static var manifest: String { ManifestCache.name(of: Self.self) }
}

/// Type names, computed once per type: `String(describing:)` walks runtime
/// metadata and costs more than sending the message, so it must not run per
/// send.
enum ManifestCache {
    private static let names = Mutex<[ObjectIdentifier: String]>([:])

    package static func name(of type: Any.Type) -> String {
        let key = ObjectIdentifier(type)
        if let name = names.withLock({ $0[key] }) { return name }
        let name = String(describing: type)
        names.withLock { $0[key] = name }
        return name
    }
}

/// The reply of a message that has nothing to report but its completion: asking
/// a *void* reaction returns `Done()` once the reaction has run.
public struct Done: Codable, Sendable, Hashable {
    public init() {}
}

/// Answered by every actor that does not declare its own reaction to it, with
/// its address: a way to check an actor exists, and (since delivery is FIFO
/// per sender) to know that everything sent to it before has arrived.
public struct Identify: Message {
    public typealias Reply = ActorAddress
    public init() {}
}
