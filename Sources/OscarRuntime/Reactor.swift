/// An actor's behaviour: the reactions it has to each message type it accepts.
///
/// Conform a class and declare its reactions; the runtime does the rest
/// (mailbox, one message at a time, replies, placement on a loop):
///
/// ```swift
/// final class Counter: Reactor {
///     var count = 0
///     static func reactions(_ r: inout Reactions<Counter>) {
///         r.on(Increment.self, do: { me, m in me.count += m.by })   // void
///         r.on(GetCount.self, result: { me, _ in me.count })        // result
///     }
/// }
/// ```
///
/// Why a class confined to one loop rather than a Swift `actor`: reactions run
/// synchronously on the loop that owns the actor's mailbox and sockets, which is
/// what makes same-loop sends cost a function call instead of a thread hop.
/// Instances are not `Sendable`; the compiler keeps them from escaping the
/// reactions, and the runtime touches them only on their loop.
///
/// (Named `Reactor` rather than `Actor` so that files importing Oscar keep
/// Swift's own `Actor` protocol under its usual name.)
public protocol Reactor: AnyObject, SendableMetatype {
    /// Declares the reactions; called once per instance, on its loop.
    static func reactions(_ r: inout Reactions<Self>)

    /// Called on the actor's loop before its first message, with the context
    /// it can keep (its own ref, the system, services, death watch).
    func started(_ context: ActorContext)

    /// Called on the actor's loop after its last message.
    func stopped()

    /// How many messages an instance may hold in its stash
    /// (`ActorContext.stash()`); one more fails with
    /// `ActorContext.StashError.full`. Default 1,000.
    static var stashCapacity: Int { get }
}

extension Reactor {
    public func started(_ context: ActorContext) {}
    public func stopped() {}
    public static var stashCapacity: Int { 1_000 }
}
