/// A Core is the pure half of a reactive component: a `State`, the `Action`s that
/// change it, and a `reduce` function with no side effects.
///
/// Why pure: a Core can be driven by a test or a simulator one action at a time,
/// with no threads, sockets or clocks, and the same actions always give the same
/// state. The I/O lives in whoever runs the Core (an `Engine`, or a shell that
/// performs the directives the state asks for).
public protocol Core: Sendable {
    associatedtype State: Sendable
    associatedtype Action: Sendable

    /// Returns the state after `action`. Must not perform I/O or read clocks.
    func reduce(state: State, action: Action) -> State

    /// Called with every error thrown by an effect dispatched to the engine.
    /// The default ignores it.
    func handleError(_ error: any Error)
}

extension Core {
    public func handleError(_ error: any Error) {}

    /// Folds `actions` over `state` in order. The convenience that tests and
    /// simulators use to drive a Core without an engine.
    public func reduce(state: State, actions: [Action]) -> State {
        actions.reduce(state) { reduce(state: $0, action: $1) }
    }
}
