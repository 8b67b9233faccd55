import OscarBase
import OscarCBOR
import OscarRuntime
import Synchronization

/// Counters a node keeps for /metrics and the application's metrics handler;
/// atomic, so any loop may count.
package final class NodeStats: Sendable {
    /// The application's handler, if it installed one; fixed at start, so
    /// counting reads no lock.
    private let handler: (any OscarMetrics.Handler)?

    package init(handler: (any OscarMetrics.Handler)? = nil) { self.handler = handler }

    package typealias Counter = OscarMetrics.Counter

    private let framesIn = Atomic<Int>(0)
    private let framesOut = Atomic<Int>(0)
    private let asksPending = Atomic<Int>(0)
    private let gossipRounds = Atomic<Int>(0)
    private let authenticationFailures = Atomic<Int>(0)
    private let connectionsRefused = Atomic<Int>(0)
    private let peersCutOff = Atomic<Int>(0)
    private let tlsRefusals = Atomic<Int>(0)
    private let chunksOut = Atomic<Int>(0)
    private let chunksIn = Atomic<Int>(0)
    private let bulkMessagesOut = Atomic<Int>(0)
    private let bulkMessagesIn = Atomic<Int>(0)
    private let bulkFallbacks = Atomic<Int>(0)

    private func counter<R>(_ counter: Counter, _ body: (borrowing Atomic<Int>) -> R) -> R {
        switch counter {
        case .framesIn: body(framesIn)
        case .framesOut: body(framesOut)
        case .asksPending: body(asksPending)
        case .gossipRounds: body(gossipRounds)
        case .authenticationFailures: body(authenticationFailures)
        case .connectionsRefused: body(connectionsRefused)
        case .peersCutOff: body(peersCutOff)
        case .tlsRefusals: body(tlsRefusals)
        case .chunksOut: body(chunksOut)
        case .chunksIn: body(chunksIn)
        case .bulkMessagesOut: body(bulkMessagesOut)
        case .bulkMessagesIn: body(bulkMessagesIn)
        case .bulkFallbacks: body(bulkFallbacks)
        }
    }

    package func add(_ counter: Counter, _ n: Int = 1) {
        self.counter(counter) { _ = $0.wrappingAdd(n, ordering: .relaxed) }
        handler?.add(n, to: counter)
    }

    package func value(_ counter: Counter) -> Int {
        self.counter(counter) { $0.load(ordering: .relaxed) }
    }
}
