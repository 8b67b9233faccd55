/// A value that can be sent to an actor.
///
/// A message names its reply type, so `ask` is typed end to end: asking an
/// `Echo` returns an `Echo.Reply`. Messages are `Codable` so that the same
/// message can cross the network; local sends never encode them.
public protocol Message: Codable, Sendable {
    associatedtype Reply: Codable & Sendable = Done

    /// The name the message type travels under. Defaults to the type's name;
    /// override it when two modules' types share a name.
    static var manifest: String { get }
}

extension Message {
    public static var manifest: String { String(describing: Self.self) }
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
