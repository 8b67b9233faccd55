// Compiles: each message is sent through a typed ref to the actor it names
// as its Receiver. (Cluster/scripts/typed-refs.sh)
import Oscar

final class Shelf: Reactor {
    var count = 0
    static func reactions(_ r: inout Reactions<Shelf>) {
        r.on(Put.self, do: { me, m in me.count += m.n })
        r.on(Count.self, result: { me, _ in me.count })
    }
}
struct Put: Message {
    typealias Receiver = Shelf
    var n: Int
}
struct Count: Message {
    typealias Reply = Int
    typealias Receiver = Shelf
}
func use(_ ref: ActorRef) async throws {
    let shelf = ref.typed(as: Shelf.self)
    shelf.tell(Put(n: 1))
    _ = try await shelf.ask(Count())
}
