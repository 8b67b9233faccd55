import CoreEngine
import Synchronization
import Testing

/// A counter that asks for an effect each time it lands on a multiple of ten,
/// and rejects a negative `set`.
struct CounterCore: Core {
    enum Action: Sendable, Equatable {
        case increase, decrease, jump(Int), set(Int)
    }
    struct State: Sendable, Equatable {
        var count = 0
        var history: [Int] = []
    }
    enum Effect: Sendable, Equatable {
        case reached(Int)
    }
    struct Rejected: Error, CustomStringConvertible {
        var value: Int
        var description: String { "rejected \(value)" }
    }

    let errors: ErrorLog

    func reduce(_ state: inout State, _ action: Action) throws(Rejected) -> [Effect] {
        switch action {
        case .increase: state.count += 1
        case .decrease: state.count -= 1
        case .jump(let n): state.count += n
        case .set(let n):
            guard n >= 0 else { throw Rejected(value: n) }
            state.count = n
        }
        state.history.append(state.count)
        return state.count != 0 && state.count % 10 == 0 ? [.reached(state.count)] : []
    }

    func handleError(_ error: any Error) { errors.append(String(describing: error)) }
}

/// A core whose effects are streams of further actions (the seed's kind of
/// effect): `.countTo(n)` asks for a stream of `n` increments.
struct StreamingCore: Core {
    enum Action: Sendable {
        case countTo(Int), increment
    }
    typealias Effect = AsyncStream<Action>

    func reduce(_ state: inout Int, _ action: Action) -> [Effect] {
        switch action {
        case .countTo(let n):
            return [
                AsyncStream { c in
                    for _ in 0..<n { c.yield(.increment) }
                    c.finish()
                }
            ]
        case .increment:
            state += 1
            return []
        }
    }
}

final class Recorder<T: Sendable>: Sendable {
    private let items = Mutex<[T]>([])
    func append(_ item: T) { items.withLock { $0.append(item) } }
    var all: [T] { items.withLock { $0 } }
}

typealias ErrorLog = Recorder<String>

struct Boom: Error, CustomStringConvertible { var description: String { "boom" } }

@Suite(.timeLimit(.minutes(5))) struct EngineTests {
    @Test func reduceIsPureAndDeterministic() throws {
        let core = CounterCore(errors: ErrorLog())
        let start = CounterCore.State()
        var a = start
        var b = start
        let effectsA = try core.reduce(&a, [.increase, .jump(9), .decrease, .jump(11)])
        let effectsB = try core.reduce(&b, [.increase, .jump(9), .decrease, .jump(11)])
        #expect(a == b)
        #expect(effectsA == effectsB)
        #expect(a.count == 20)
        #expect(effectsA == [.reached(10), .reached(20)])
        #expect(start.count == 0)
    }

    @Test func reduceOverActionsStopsAtTheRejectedOne() {
        let core = CounterCore(errors: ErrorLog())
        var state = CounterCore.State()
        #expect(throws: CounterCore.Rejected.self) { try core.reduce(&state, [.jump(10), .set(-1), .increase]) }
        #expect(state.history == [10])
    }

    @Test func sendAppliesAtOnceAndReturnsTheEffects() {
        let performed = Recorder<CounterCore.Effect>()
        let engine = Engine(CounterCore(errors: ErrorLog()), state: .init()) { e, _ in performed.append(e) }
        // No task, no executor hop: the state and the effects are there when
        // `send` returns, and the caller, not `perform`, gets the effects.
        #expect(engine.send(.jump(10)) == [.reached(10)])
        #expect(engine.state.count == 10)
        #expect(engine.send(.increase) == [])
        #expect(engine.send([.jump(9), .increase, .jump(9)]) == [.reached(20), .reached(30)])
        #expect(engine.withState { $0.history } == [10, 11, 20, 21, 30])
        #expect(performed.all.isEmpty)
    }

    @Test func aRejectedActionChangesNothingAndGoesToHandleError() {
        let errors = ErrorLog()
        let engine = Engine(CounterCore(errors: errors), state: .init())
        #expect(engine.send(.set(-3)) == [])
        #expect(engine.state == CounterCore.State())
        #expect(errors.all == ["rejected -3"])
        // In a group, only the rejected action is skipped.
        #expect(engine.send([.jump(9), .set(-1), .increase]) == [.reached(10)])
        #expect(engine.state.history == [9, 10])
        #expect(errors.all == ["rejected -3", "rejected -1"])
    }

    @Test func actionHandsEffectsToPerformInOrder() {
        let performed = Recorder<CounterCore.Effect>()
        let engine = Engine(CounterCore(errors: ErrorLog()), state: .init()) { e, _ in performed.append(e) }
        engine.action(.set(5), .jump(5), .jump(10))
        #expect(engine.state.history == [5, 10, 20])
        #expect(performed.all == [.reached(10), .reached(20)])
    }

    @Test func concurrentMultiActionsAreAtomicGroups() async {
        let engine = Engine(CounterCore(errors: ErrorLog()), state: .init())
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<200 { engine.action(.jump(1_000), .jump(-999)) } }
            }
        }
        #expect(engine.state.count == 8 * 200)
        // Each group applied both halves back to back: every odd-indexed state
        // is exactly 1,000 above the state before it.
        let h = engine.state.history
        #expect(stride(from: 0, to: h.count, by: 2).allSatisfy { i in h[i] - (i == 0 ? 0 : h[i - 1]) == 1_000 })
    }

    @Test func effectActionsAreAppliedAndErrorsGoToHandleError() async {
        let errors = ErrorLog()
        let performed = Recorder<CounterCore.Effect>()
        let engine = Engine(CounterCore(errors: errors), state: .init()) { e, _ in performed.append(e) }
        let effect = AsyncThrowingStream<CounterCore.Action, any Error> { c in
            c.yield(.jump(2))
            c.yield(.jump(8))
            c.finish(throwing: Boom())
        }
        await engine.dispatch(effect: effect).value
        #expect(engine.state.count == 10)
        // Actions from a dispatched effect have no caller: their effects go to `perform`.
        #expect(performed.all == [.reached(10)])
        #expect(errors.all == ["boom"])
        // The engine keeps working after a failed effect.
        engine.action(.increase)
        #expect(engine.state.count == 11)
    }

    @Test func effectsThatAreActionStreamsRunThroughDispatch() async {
        let engine = Engine(StreamingCore(), state: 0) { effect, engine in engine.dispatch(effect: effect) }
        let states = engine.states()
        engine.action(.countTo(3), .countTo(2))
        var last = -1
        for await count in states where count == 5 {
            last = count
            break
        }
        #expect(last == 5)
        #expect(engine.state == 5)
    }

    @Test func observersSeeTheCurrentStateThenEveryChangeInOrder() async {
        let engine = Engine(CounterCore(errors: ErrorLog()), state: .init())
        engine.action(.set(1))
        let states = engine.states()
        engine.action(.increase, .increase)
        _ = engine.send(.set(40))
        _ = engine.send(.set(-1))  // rejected: no new state
        engine.action(.decrease)
        var seen: [Int] = []
        for await state in states {
            seen.append(state.count)
            if seen.count == 5 { break }
        }
        #expect(seen == [1, 2, 3, 40, 39])
    }

    @Test func cancellingAnEffectStopsIt() async {
        let engine = Engine(CounterCore(errors: ErrorLog()), state: .init())
        let (stream, continuation) = AsyncStream<CounterCore.Action>.makeStream()
        let task = engine.dispatch(effect: stream)
        continuation.yield(.increase)
        let states = engine.states()
        for await s in states where s.count == 1 { break }
        task.cancel()
        continuation.yield(.increase)
        continuation.finish()
        await task.value
        #expect(engine.state.count == 1)
    }
}
