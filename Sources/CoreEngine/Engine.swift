import Synchronization

/// Runs a `Core`: holds its current state, applies actions, feeds effects back in
/// as actions, and lets observers await every new state.
///
/// Invariant: actions are applied one at a time, under one lock, in the order
/// they were submitted; `action(a, b)` applies `a` then `b` with no other action
/// in between. Observers see every state in that order.
public final class Engine<C: Core>: Sendable {
    private struct Guarded {
        var state: C.State
        var observers: [Int: AsyncStream<C.State>.Continuation] = [:]
        var nextObserverID = 0
        var effects: [Int: Task<Void, Never>] = [:]
        var nextEffectID = 0
    }

    /// The Core whose `reduce` this engine applies.
    public let core: C
    private let guarded: Mutex<Guarded>

    public init(_ core: C, state: C.State) {
        self.core = core
        self.guarded = Mutex(Guarded(state: state))
    }

    deinit {
        guarded.withLock { g in
            for task in g.effects.values { task.cancel() }
            for observer in g.observers.values { observer.finish() }
        }
    }

    /// The current state.
    public var state: C.State { guarded.withLock { $0.state } }

    /// Applies the actions in order, atomically as a group.
    public func action(_ actions: C.Action...) {
        apply(actions)
    }

    /// Applies the actions in order, atomically as a group.
    public func apply(_ actions: [C.Action]) {
        guarded.withLock { g in
            for action in actions {
                g.state = core.reduce(state: g.state, action: action)
                for observer in g.observers.values { observer.yield(g.state) }
            }
        }
    }

    /// Runs `effect` and applies each action it produces, in order. An error it
    /// throws goes to the Core's `handleError`, and ends that effect only.
    ///
    /// The returned task finishes when the effect's sequence does; cancel it to
    /// stop the effect early. Effects still running when the engine is
    /// deinitialised are cancelled.
    @discardableResult
    public func dispatch<Effect: AsyncSequence & Sendable>(effect: Effect) -> Task<Void, Never>
    where Effect.Element == C.Action {
        // The task is created under the lock, so its own removal (which takes
        // the lock) always comes after its insertion.
        let task = guarded.withLock { g -> Task<Void, Never> in
            g.nextEffectID += 1
            let id = g.nextEffectID
            let task = Task { [weak self] in
                do {
                    for try await action in effect {
                        guard let self, !Task.isCancelled else { break }
                        self.apply([action])
                    }
                } catch {
                    self?.core.handleError(error)
                }
                _ = self?.guarded.withLock { $0.effects.removeValue(forKey: id) }
            }
            g.effects[id] = task
            return task
        }
        return task
    }

    /// A stream that starts with the current state and then yields every new
    /// state in order. It ends when the engine is deinitialised or the consumer
    /// stops iterating.
    public func states() -> AsyncStream<C.State> {
        let (stream, continuation) = AsyncStream<C.State>.makeStream(bufferingPolicy: .unbounded)
        let id = guarded.withLock { g -> Int in
            g.nextObserverID += 1
            g.observers[g.nextObserverID] = continuation
            continuation.yield(g.state)
            return g.nextObserverID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.guarded.withLock { $0.observers.removeValue(forKey: id) }
        }
        return stream
    }
}
