import OscarBase

/// What an actor knows about its place in the system, handed to `started(_:)`.
///
/// Safe to keep and use at any time, from any thread: it never reaches a
/// system that is gone. The system is held weakly (the system owns its
/// actors, not the other way round, so a system without references can
/// deinitialise), and everything that needs it checks it first. A system that
/// deinitialises without `shutdown()` still runs its actors' last messages
/// and `stopped()` while it goes; they see `system == nil` then, not a crash.
/// The exceptions are the actor's timers (`timers`) and stash (`stash()`,
/// `unstashAll()`): they belong to its loop, and are used from its reactions.
public struct ActorContext: Sendable {
    /// This actor's own ref, to pass to others so they can reply.
    public let ref: ActorRef
    /// The node this actor runs on (as `system.node`, without the system).
    public let node: NodeAddress
    /// The system's services.
    public let services: ServiceLocator
    /// The actor's cell: its timers and stash live there.
    let cell: ActorCell
    /// The system hosting this actor; nil once it has begun to deinitialise.
    public weak let system: ActorSystem?

    package init(cell: ActorCell, system: ActorSystem) {
        self.ref = cell.ref
        self.node = system.node
        self.services = system.services
        self.system = system
        self.cell = cell
    }

    /// After this, this actor receives `Terminated` when `other` stops (at
    /// once if it already has). The actor needs a reaction to `Terminated`.
    /// An actor on another node counts as stopped when its node is removed
    /// from the cluster (or downed).
    public func watch(_ other: ActorRef) {
        if let watchable = other.target as? any Watchable {
            watchable.addWatcher(ref)
        } else if other.target?.isRemote == true {
            system?.watchRemote(other, by: ref)
        } else {
            ref.tell(Terminated(actor: other))
        }
    }

    /// Undoes `watch`.
    public func unwatch(_ other: ActorRef) {
        if let watchable = other.target as? any Watchable {
            watchable.removeWatcher(ref)
        } else if other.target?.isRemote == true {
            system?.unwatchRemote(other, by: ref)
        }
    }

    /// Stops this actor once its current message is handled.
    public func stop() { cell.stop() }
}
