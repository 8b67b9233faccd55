import OscarTestKit
import Testing

@testable import InventoryChaos

/// The stock check against histories written by hand and at random: it
/// passes what a correct inventory could have done, and finds stock lost or
/// created.
@Suite(.timeLimit(.minutes(1))) struct StockCheckTests {
    /// A history of one node: each operation invoked at `t` and answered at
    /// `t + 0.5` (nil outcome: never answered, as when its process is
    /// killed; then it has no detail, and nothing follows it in that
    /// incarnation).
    static func history(_ steps: [(t: UInt64, outcome: ChaosEvent.Kind?, detail: String)]) -> ChaosHistory {
        var events: [ChaosEvent] = []
        for (op, step) in steps.enumerated() {
            let name = String(step.detail.split(separator: " ")[0])
            events.append(ChaosEvent(t: step.t * 10, node: "n1", kind: .invoke, uid: 1, op: op, target: name))
            if let outcome = step.outcome {
                events.append(
                    ChaosEvent(
                        t: step.t * 10 + 5, node: "n1", kind: outcome, uid: 1, op: op, target: name,
                        detail: step.detail))
            }
        }
        return ChaosHistory(events)
    }

    @Test func readsThatMovementsExplainPass() {
        let h = Self.history([
            (1, .ok, "add apple 5"), (2, .ok, "remove apple 2 left 3"), (3, .ok, "get apple 0 is 3"),
            (4, .timeout, "add apple 4"), (5, .ok, "get apple 0 is 7"), (6, .ok, "remove apple 9 short 7"),
            (7, .fail, "add apple 100"), (8, .ok, "get apple 0 is 7"),
        ])
        #expect(InventoryChaos.stockCheck(h).isEmpty, "\(InventoryChaos.stockCheck(h))")
    }

    @Test func lostStockIsFound() {
        let h = Self.history([(1, .ok, "add apple 5"), (2, .ok, "get apple 0 is 4")])
        #expect(InventoryChaos.stockCheck(h).first?.contains("lost") == true)
    }

    @Test func createdStockIsFound() {
        let h = Self.history([(1, .ok, "add apple 5"), (2, .ok, "remove apple 2 left 5")])
        #expect(InventoryChaos.stockCheck(h).first?.contains("created") == true)
    }

    /// Random serial histories of a correct inventory pass; the same
    /// history with one reading off by one fails.
    @Test(arguments: 1...30) func randomHistoriesOfACorrectInventoryPassAndATamperedOneFails(seed: UInt64) {
        var state = seed &* 0x9E37_79B9_7F4A_7C15
        func next(_ n: UInt64) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % n)
        }
        var stock = 0
        var steps: [(t: UInt64, outcome: ChaosEvent.Kind?, detail: String)] = []
        for t in 1...40 {
            switch next(4) {
            case 0:
                let n = next(5) + 1
                let outcome: ChaosEvent.Kind = [.ok, .ok, .timeout][next(3)]
                // An unknown add may or may not have happened: decide.
                if outcome == .ok || next(2) == 0 { stock += n }
                steps.append((UInt64(t), outcome, "add apple \(n)"))
            case 1:
                let n = next(7) + 1
                if n <= stock {
                    stock -= n
                    steps.append((UInt64(t), .ok, "remove apple \(n) left \(stock)"))
                } else {
                    steps.append((UInt64(t), .ok, "remove apple \(n) short \(stock)"))
                }
            default:
                steps.append((UInt64(t), .ok, "get apple 0 is \(stock)"))
            }
        }
        // The process killed during a last add: it never answered.
        if next(2) == 0 { steps.append((41, nil, "add apple 3")) }
        #expect(InventoryChaos.stockCheck(Self.history(steps)).isEmpty)
        guard let i = steps.lastIndex(where: { $0.detail.hasPrefix("get") }) else { return }
        steps[i].detail = "get apple 0 is \(stock + 1 + 1000)"
        #expect(!InventoryChaos.stockCheck(Self.history(steps)).isEmpty)
    }
}
