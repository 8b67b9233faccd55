// Must not compile: `Anything` names no receiver, so no typed ref takes it
// (an untyped `ActorRef` still does). (Cluster/scripts/typed-refs.sh)
import Oscar

final class Shelf: Reactor {
    static func reactions(_ r: inout Reactions<Shelf>) {}
}
struct Anything: Message {}
func use(_ ref: ActorRef) {
    ref.typed(as: Shelf.self).tell(Anything())
}
