// Must not compile: a `Pricer` checked in under a key whose message
// `Quote` names `Shelf`. (Cluster/scripts/typed-refs.sh)
import Oscar

final class Shelf: Reactor {
    static func reactions(_ r: inout Reactions<Shelf>) {}
}
final class Pricer: Reactor {
    static func reactions(_ r: inout Reactions<Pricer>) {}
}
struct Quote: Message {
    typealias Receiver = Shelf
}
func use(_ node: ClusterNode, _ ref: ActorRef) {
    node.receptionist.register(ref.typed(as: Pricer.self), as: ReceptionistKey<Quote>("quotes"))
}
