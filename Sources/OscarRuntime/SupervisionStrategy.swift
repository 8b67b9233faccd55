import OscarBase
import OscarCBOR

/// What happens to an actor when one of its reactions throws. Set where the
/// actor is declared (`actors.nodeSingleton("cart", supervision: .restart()) { … }`).
///
/// The ask whose reaction threw always gets `AskError.handlerFailed` with
/// the error's description, whatever the strategy; a tell's error is logged.
/// The message that failed is never delivered again.
///
/// The default is `.resume`, not Akka Typed's stop, because in Oscar a throw
/// is how a reaction answers an ask with a failure: there is no separate
/// error reply. Stopping on a throw would let any peer that can send one bad
/// message remove a named actor for good (nothing re-creates a stopped
/// `/user/counter`), and restarting would let it wipe the actor's state. Keep
/// `.resume` for actors that validate input; choose `.restart` or `.stop`
/// for actors whose state a throw may have left inconsistent. A trap (a
/// crash) is not a thrown error and no strategy catches it.
public struct SupervisionStrategy: Sendable, Hashable, CustomStringConvertible {
    package enum Kind: Sendable, Hashable {
        case resume
        case stop
        case restart(maxRestarts: Int, within: Duration, backoff: Duration, maxBackoff: Duration)
    }

    package let kind: Kind

    /// Keep the actor and its state; it takes the next message. The default.
    public static let resume = SupervisionStrategy(kind: .resume)

    /// Stop the actor after the failed message, as `ActorSystem.stop` does:
    /// waiting messages become dead letters (asks fail with `stopped`), and
    /// watchers get `Terminated`.
    public static let stop = SupervisionStrategy(kind: .stop)

    /// Replace the instance with a fresh one from the actor's factory, keeping
    /// its mailbox: the old instance gets `stopped()`, the new one
    /// `started(_:)`, and messages that waited are handled by the new one.
    ///
    /// - Parameters:
    ///   - maxRestarts: restarts allowed within `within`; the failure after
    ///     them stops the actor instead. Default 3. At least 1.
    ///   - within: the sliding window the restarts are counted in. Default 10 s.
    ///   - backoff: how long the actor waits (messages queue) before its first
    ///     restart in the window; each further restart in the window waits
    ///     twice as long as the one before. Default 100 ms.
    ///   - maxBackoff: the longest wait. Default 5 s.
    public static func restart(
        maxRestarts: Int = 3, within: Duration = .seconds(10), backoff: Duration = .milliseconds(100),
        maxBackoff: Duration = .seconds(5)
    ) -> SupervisionStrategy {
        SupervisionStrategy(
            kind: .restart(
                maxRestarts: max(1, maxRestarts), within: max(.zero, within), backoff: max(.zero, backoff),
                maxBackoff: max(.zero, maxBackoff)))
    }

    /// `.resume`: a thrown error fails its ask and nothing else (see above).
    public static let `default` = SupervisionStrategy.resume

    public var description: String {
        switch kind {
        case .resume: "resume"
        case .stop: "stop"
        case .restart(let n, let window, let backoff, let maxBackoff):
            "restart (at most \(n) within \(window), backoff \(backoff) to \(maxBackoff))"
        }
    }

    /// True when a failure may need a fresh instance, so the actor's factory
    /// must be kept after its first start.
    package var restarts: Bool {
        if case .restart = kind { return true }
        return false
    }
}

/// What a supervised actor does after one failure.
package enum SupervisionDirective: Sendable, Hashable {
    case resume
    /// Restart once `after` has passed; messages wait in the mailbox meanwhile.
    case restart(after: Duration)
    case stop
}

/// The supervision decision for one actor: a pure value with no clock and no
/// I/O. The cell owns one, feeds it each failure with the time it happened,
/// and performs the directive. `oscar node --supervise` decides a crashed
/// node's restarts with the same one (hence `package`).
///
/// Invariant: `restartTimes` holds only restarts granted within `within` of
/// the latest failure, oldest first, and never more than `maxRestarts`.
package struct Supervisor: Sendable {
    let strategy: SupervisionStrategy
    package private(set) var restartTimes: [Duration] = []

    package init(_ strategy: SupervisionStrategy) { self.strategy = strategy }

    /// A reaction threw (or a node crashed) at monotonic time `now` (any
    /// fixed origin).
    package mutating func onFailure(at now: Duration) -> SupervisionDirective {
        switch strategy.kind {
        case .resume: return .resume
        case .stop: return .stop
        case .restart(let maxRestarts, let within, let backoff, let maxBackoff):
            restartTimes.removeAll { now - $0 >= within }
            guard restartTimes.count < maxRestarts else { return .stop }
            let delay = Self.backoff(backoff, doubled: restartTimes.count, capped: maxBackoff)
            restartTimes.append(now)
            return .restart(after: delay)
        }
    }

    /// `base` doubled `times` times, at most `cap`; never overflows.
    package static func backoff(_ base: Duration, doubled times: Int, capped cap: Duration) -> Duration {
        var delay = min(base, cap)
        for _ in 0..<max(0, times) {
            guard delay < cap else { break }
            delay = delay > cap / 2 ? cap : delay * 2
        }
        return delay
    }
}
