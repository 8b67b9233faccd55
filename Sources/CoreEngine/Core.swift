/// A Core is the pure half of a reactive component: a `State`, the `Action`s that
/// change it, and a `reduce` function that applies one action and returns the
/// effects it wants performed.
///
/// Why pure: a Core can be driven by a test or a simulator one action at a time,
/// with no threads, sockets or clocks, and the same actions always give the same
/// state and the same effects. The I/O lives in whoever runs the Core (an
/// `Engine`, or a shell that performs the effects where it runs).
///
/// Why effects are returned, not stored in the state: what to do next belongs to
/// one step, not to the state, so a caller cannot perform a step's effects twice
/// or miss them, and the state holds only what the next step needs.
public protocol Core: Sendable {
    associatedtype State: Sendable
    associatedtype Action: Sendable
    /// What `reduce` asks its runner to do: messages to send, events to
    /// publish. Plain values, so a test can compare them; a Core whose effects
    /// are streams of further actions (`Engine.dispatch(effect:)`) may use
    /// those as its `Effect`. `Never` for a Core with none.
    associatedtype Effect: Sendable = Never
    /// Why `reduce` rejects an action. `Never` (the default) for a Core that
    /// takes every action.
    associatedtype Failure: Error = Never

    /// Applies `action` to `state` and returns the effects to perform, in the
    /// order they are to be performed. Must not perform I/O, read clocks or
    /// use a global random generator.
    ///
    /// To reject an action, throw before changing `state`: the runner then
    /// performs nothing and hands the error to `handleError`.
    func reduce(_ state: inout State, _ action: Action) throws(Failure) -> [Effect]

    /// Called with every action `reduce` rejected, and every error thrown by an
    /// effect dispatched to an engine. The default ignores it.
    func handleError(_ error: any Error)
}

extension Core {
    public func handleError(_ error: any Error) {}

    /// Applies `actions` in order and returns all their effects, in order: the
    /// convenience that tests and simulators use to drive a Core without an
    /// engine. Stops at the first rejected action (the ones before it stay
    /// applied).
    public func reduce(_ state: inout State, _ actions: [Action]) throws(Failure) -> [Effect] {
        var effects: [Effect] = []
        for action in actions { effects += try reduce(&state, action) }
        return effects
    }
}
