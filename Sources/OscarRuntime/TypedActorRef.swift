import OscarBase

/// A ref that accepts only the messages its actor handles, checked by the
/// compiler: `tell` and `ask` take a message whose `Receiver` is `A`, so
/// sending another actor's message (or one that names no receiver) does not
/// compile, where an untyped `ActorRef` would fail at run time with
/// `AskError.unhandled`. It is an `ActorRef` underneath (`untyped`), for the
/// CLI, the receptionist and other dynamic uses.
///
///     struct GetStock: Message {
///         typealias Reply = Int
///         typealias Receiver = Inventory
///         var sku: String
///     }
///     let inventory = ref.typed(as: Inventory.self)
///     let count = try await inventory.ask(GetStock(sku: "apple"))
///
/// Whether the actor at the address *is* an `A` is not checked: `typed(as:)`
/// is the caller's word, as Akka Typed's refs are (a wrong one fails as an
/// untyped ref does).
public struct TypedActorRef<A: Reactor>: Sendable, Hashable, CustomStringConvertible {
    public let untyped: ActorRef

    /// `ref`, taken to be an `A`'s.
    public init(unchecked ref: ActorRef) { untyped = ref }

    public var address: ActorAddress { untyped.address }
    public var description: String { "\(untyped) as \(A.self)" }

    /// Sends `message` one way (at most once).
    @inlinable
    public func tell<M: Message>(_ message: M) where M.Receiver == A { untyped.tell(message) }

    /// Sends `message` and waits for its reply, at most `timeout`.
    @inlinable
    public func ask<M: Message>(_ message: M, timeout: Duration = .seconds(5)) async throws(AskError) -> M.Reply
    where M.Receiver == A {
        try await untyped.ask(message, timeout: timeout)
    }
}

extension ActorRef {
    /// This ref as a typed one: the caller says its actor is an `A`.
    public func typed<A: Reactor>(as _: A.Type) -> TypedActorRef<A> { TypedActorRef(unchecked: self) }
}
