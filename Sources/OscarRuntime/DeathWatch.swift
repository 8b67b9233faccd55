import OscarBase

/// Death watch between nodes, one actor per node at `/system/deathwatch`.
///
/// A node that watches an actor here sends `Watch`; this actor adds the
/// watching node's death-watch actor as a watcher of the target, so the
/// target's `Terminated` travels back when it stops (or at once, if there is
/// no such actor). There, `Terminated` is handed to every local watcher of
/// that actor, and their registrations end, so nobody hears it twice when
/// the node is later removed.
package final class DeathWatch: Reactor {
    package static let path = "/system/deathwatch"

    package init() {}

    struct Watch: Message {
        static var manifest: String { "oscar.deathwatch.watch" }
        var path: String
        /// The watching node's death-watch actor.
        var notify: ActorRef
    }

    private weak var system: ActorSystem?

    package func started(_ context: ActorContext) { system = context.system }

    package static func reactions(_ r: inout Reactions<DeathWatch>) {
        r.on(
            Watch.self,
            do: { me, m in
                guard let system = me.system else { return }
                let target = system.target(at: m.path)
                if let watchable = target as? any Watchable {
                    watchable.addWatcher(m.notify)
                } else {
                    let gone = ActorRef(address: ActorAddress(node: system.node, path: m.path), target: nil)
                    m.notify.tell(Terminated(actor: gone))
                }
            })
        r.on(Terminated.self, do: { me, m in me.system?.remoteActorStopped(m.actor.address) })
    }
}
