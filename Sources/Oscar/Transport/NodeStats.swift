import Synchronization

/// Counters a node keeps for /metrics; atomic, so any loop may count.
final class NodeStats: Sendable {
    enum Counter { case framesIn, framesOut, asksPending, gossipRounds }

    private let framesIn = Atomic<Int>(0)
    private let framesOut = Atomic<Int>(0)
    private let asksPending = Atomic<Int>(0)
    private let gossipRounds = Atomic<Int>(0)

    func add(_ counter: Counter, _ n: Int = 1) {
        switch counter {
        case .framesIn: framesIn.wrappingAdd(n, ordering: .relaxed)
        case .framesOut: framesOut.wrappingAdd(n, ordering: .relaxed)
        case .asksPending: asksPending.wrappingAdd(n, ordering: .relaxed)
        case .gossipRounds: gossipRounds.wrappingAdd(n, ordering: .relaxed)
        }
    }

    func value(_ counter: Counter) -> Int {
        switch counter {
        case .framesIn: framesIn.load(ordering: .relaxed)
        case .framesOut: framesOut.load(ordering: .relaxed)
        case .asksPending: asksPending.load(ordering: .relaxed)
        case .gossipRounds: gossipRounds.load(ordering: .relaxed)
        }
    }
}
