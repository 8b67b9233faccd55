import CoreEngine
import Synchronization
import Testing

struct CounterCore: Core {
    enum Action: Sendable, Equatable {
        case increase, decrease, jump(Int), set(Int)
    }
    struct State: Sendable, Equatable {
        var count = 0
        var history: [Int] = []
    }

    let errors: ErrorLog

    func reduce(state: State, action: Action) -> State {
        var s = state
        switch action {
        case .increase: s.count += 1
        case .decrease: s.count -= 1
        case .jump(let n): s.count += n
        case .set(let n): s.count = n
        }
        s.history.append(s.count)
        return s
    }

    func handleError(_ error: any Error) { errors.append(String(describing: error)) }
}

final class ErrorLog: Sendable {
    private let items = Mutex<[String]>([])
    func append(_ s: String) { items.withLock { $0.append(s) } }
    var all: [String] { items.withLock { $0 } }
}

struct Boom: Error, CustomStringConvertible { var description: String { "boom" } }

@Suite(.timeLimit(.minutes(5))) struct EngineTests {
    @Test func reduceIsPureAndDeterministic() {
        let core = CounterCore(errors: ErrorLog())
        let start = CounterCore.State()
        let a = core.reduce(state: start, actions: [.increase, .jump(10), .decrease])
        let b = core.reduce(state: start, actions: [.increase, .jump(10), .decrease])
        #expect(a == b)
        #expect(a.count == 10)
        #expect(start.count == 0)
    }

    @Test func multipleActionsApplyInOrder() {
        let engine = Engine(CounterCore(errors: ErrorLog()), state: .init())
        engine.action(.set(5), .jump(3), .decrease)
        #expect(engine.state.count == 7)
        #expect(engine.state.history == [5, 8, 7])
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
        let engine = Engine(CounterCore(errors: errors), state: .init())
        let effect = AsyncThrowingStream<CounterCore.Action, any Error> { c in
            c.yield(.jump(2))
            c.yield(.jump(3))
            c.finish(throwing: Boom())
        }
        await engine.dispatch(effect: effect).value
        #expect(engine.state.count == 5)
        #expect(errors.all == ["boom"])
        // The engine keeps working after a failed effect.
        engine.action(.increase)
        #expect(engine.state.count == 6)
    }

    @Test func observersSeeTheCurrentStateThenEveryChangeInOrder() async {
        let engine = Engine(CounterCore(errors: ErrorLog()), state: .init())
        engine.action(.set(1))
        let states = engine.states()
        engine.action(.increase, .increase)
        engine.action(.set(40))
        var seen: [Int] = []
        for await state in states {
            seen.append(state.count)
            if seen.count == 4 { break }
        }
        #expect(seen == [1, 2, 3, 40])
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
