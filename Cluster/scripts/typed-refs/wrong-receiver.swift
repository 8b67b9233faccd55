// Must not compile: `Quote` names `Pricer` as its receiver, and is sent
// through a ref typed for `Shelf`. (Cluster/scripts/typed-refs.sh)
import Oscar

final class Shelf: Reactor {
    static func reactions(_ r: inout Reactions<Shelf>) {}
}
final class Pricer: Reactor {
    static func reactions(_ r: inout Reactions<Pricer>) {}
}
struct Quote: Message {
    typealias Reply = Int
    typealias Receiver = Pricer
}
func use(_ ref: ActorRef) async throws {
    _ = try await ref.typed(as: Shelf.self).ask(Quote())
}
