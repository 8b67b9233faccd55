/// What an actor knows about its place in the system, handed to `started(_:)`.
public struct ActorContext: Sendable {
    /// This actor's own ref, to pass to others so they can reply.
    public let ref: ActorRef
    /// The system hosting this actor. Unowned: the system owns its actors, not
    /// the other way round, so a system without references can deinitialise.
    public unowned let system: ActorSystem

    /// The system's services.
    public var services: ServiceLocator { system.services }

    /// After this, this actor receives `Terminated` when `other` stops (at
    /// once if it already has). The actor needs a reaction to `Terminated`.
    /// An actor on another node counts as stopped when its node is removed
    /// from the cluster (or downed).
    public func watch(_ other: ActorRef) {
        if let watchable = other.target as? any Watchable {
            watchable.addWatcher(ref)
        } else if other.target?.isRemote == true {
            system.watchRemote(other, by: ref)
        } else {
            ref.tell(Terminated(actor: other))
        }
    }

    /// Undoes `watch`.
    public func unwatch(_ other: ActorRef) {
        if let watchable = other.target as? any Watchable {
            watchable.removeWatcher(ref)
        } else if other.target?.isRemote == true {
            system.unwatchRemote(other, by: ref)
        }
    }

    /// Stops this actor once its current message is handled.
    public func stop() { system.stop(ref) }
}
