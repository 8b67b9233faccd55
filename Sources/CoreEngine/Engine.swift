import Synchronization

/// Runs a `Core`: holds its current state, applies actions, gets their effects
/// performed, and lets observers await every new state.
///
/// Two ways to drive it:
/// - `send(_:)` applies actions and returns their effects to the caller, who
///   performs them where it runs. A shell confined to an event loop drives its
///   Core this way, with no hop to another executor per action.
/// - `action(_:)` and `dispatch(effect:)` hand the effects to `perform`, given
///   at `init`: for callers on any thread, and for actions that arrive from an
///   asynchronous effect and so have no caller to return effects to.
///
/// Invariant: actions are applied one at a time, under one lock, in the order
/// they were submitted; `send([a, b])` applies `a` then `b` with no other
/// action in between. Observers see every state in that order. A rejected
/// action (`reduce` threw) changes nothing, has no effects, and goes to the
/// Core's `handleError`, after the lock is released (it may call back in).
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
    private let perform: @Sendable (C.Effect, Engine<C>) -> Void

    /// `perform` gets the effects of actions applied by `action(_:)` and by
    /// dispatched effects, in order, outside the engine's lock; it is given the
    /// engine, so it may send further actions or dispatch an effect stream.
    /// The default drops them (right for a Core without effects, or one driven
    /// only through `send`).
    public init(
        _ core: C, state: C.State,
        perform: @escaping @Sendable (_ effect: C.Effect, _ engine: Engine<C>) -> Void = { _, _ in }
    ) {
        self.core = core
        self.guarded = Mutex(Guarded(state: state))
        self.perform = perform
    }

    deinit {
        guarded.withLock { g in
            for task in g.effects.values { task.cancel() }
            for observer in g.observers.values { observer.finish() }
        }
    }

    /// The current state.
    public var state: C.State { guarded.withLock { $0.state } }

    /// Reads the current state under the engine's lock, without copying it:
    /// for a caller that needs a part of a large state. `body` must not call
    /// back into the engine (the lock is not reentrant).
    public func withState<R>(_ body: (C.State) -> R) -> R {
        guarded.withLock { body($0.state) }
    }

    /// Applies `action` and returns its effects, for the caller to perform.
    public func send(_ action: C.Action) -> [C.Effect] {
        let (effects, failure) = guarded.withLock { g -> ([C.Effect], C.Failure?) in
            do throws(C.Failure) {
                let effects = try core.reduce(&g.state, action)
                for observer in g.observers.values { observer.yield(g.state) }
                return (effects, nil)
            } catch {
                return ([], error)
            }
        }
        if let failure { core.handleError(failure) }
        return effects
    }

    /// Applies the actions in order, atomically as a group, and returns all
    /// their effects in order, for the caller to perform. A rejected action
    /// is skipped; the others still apply.
    public func send(_ actions: [C.Action]) -> [C.Effect] {
        let (effects, failures) = guarded.withLock { g -> ([C.Effect], [C.Failure]) in
            var effects: [C.Effect] = []
            var failures: [C.Failure] = []
            for action in actions {
                do throws(C.Failure) {
                    effects += try core.reduce(&g.state, action)
                    for observer in g.observers.values { observer.yield(g.state) }
                } catch {
                    failures.append(error)
                }
            }
            return (effects, failures)
        }
        for failure in failures { core.handleError(failure) }
        return effects
    }

    /// Applies the actions in order, atomically as a group, and hands their
    /// effects to `perform`.
    public func action(_ actions: C.Action...) {
        apply(actions)
    }

    /// Applies the actions in order, atomically as a group, and hands their
    /// effects to `perform`.
    public func apply(_ actions: [C.Action]) {
        for effect in send(actions) { perform(effect, self) }
    }

    /// Runs `effect` and applies each action it produces, in order, as
    /// `action(_:)` does. An error it throws goes to the Core's `handleError`,
    /// and ends that effect only.
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
