import OscarBase
import OscarRuntime
import Synchronization

extension Receptionist {
    /// Checks a typed ref in under `key`: the key's message must be one its
    /// actor handles (`M.Receiver == A`), so the compiler keeps a key's
    /// listing to actors that take its message.
    public func register<A: Reactor, M: Message>(_ actor: TypedActorRef<A>, as key: ReceptionistKey<M>)
    where M.Receiver == A {
        register(actor.untyped, as: key)
    }

    /// The actors checked in under `key`, as typed refs of the key's
    /// receiver, in address order.
    public func lookup<A: Reactor, M: Message>(typed key: ReceptionistKey<M>) -> [TypedActorRef<A>]
    where M.Receiver == A {
        Self.ordered(lookup(key)).map { TypedActorRef(unchecked: $0) }
    }

    /// A group router over `key`'s listing, as Akka's group router over a
    /// receptionist listing: each message goes to the next actor listed
    /// now, in turn, so it follows the listing as actors check in and out
    /// and nodes come and go.
    public func group<M: Message>(_ key: ReceptionistKey<M>) -> Group<M> { Group(receptionist: self, key: key) }

    /// Sends each message to the next actor of a listing (round robin).
    public final class Group<M: Message>: Sendable {
        let receptionist: Receptionist
        public let key: ReceptionistKey<M>
        private let turn = Atomic<Int>(0)

        init(receptionist: Receptionist, key: ReceptionistKey<M>) {
            self.receptionist = receptionist
            self.key = key
        }

        /// The actor the next message goes to; nil while nobody is listed.
        public func next() -> ActorRef? {
            let listed = Receptionist.ordered(receptionist.lookup(key))
            guard !listed.isEmpty else { return nil }
            let n = turn.add(1, ordering: .relaxed).oldValue
            return listed[Int(UInt(bitPattern: n) % UInt(listed.count))]
        }

        /// Sends `message` to the next listed actor; dropped (at most once)
        /// while nobody is listed.
        public func tell(_ message: M) { next()?.tell(message) }

        /// Asks the next listed actor; `AskError.actorNotFound` (naming the
        /// key) while nobody is listed.
        public func ask(_ message: M, timeout: Duration = .seconds(5)) async throws(AskError) -> M.Reply {
            guard let actor = next() else {
                throw .actorNotFound(ActorAddress(node: receptionist.ref.address.node, path: "/receptionist/\(key.id)"))
            }
            return try await actor.ask(message, timeout: timeout)
        }
    }

    /// A listing in address order, so every caller walks it the same way.
    static func ordered(_ refs: Set<ActorRef>) -> [ActorRef] {
        refs.sorted { "\($0.address)" < "\($1.address)" }
    }
}
