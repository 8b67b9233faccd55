import InventoryActors
import Oscar
import OscarTestKit

/// The inventory's chaos workload and its checker: every node moves stock
/// in and out of its own `/user/inventory` and reads it back, asks the
/// `pricing` pool and the `ledger` singleton across the cluster; the check
/// replays each node's movements and finds any read that no order of them
/// explains: stock lost or created.
public enum InventoryChaos {
    static let skus = ["apple", "pear", "plum"]

    public static var operations: ChaosOperations {
        ChaosOperations(
            operations: [
                .init("add", weight: 3) { c in
                    let (sku, n) = (skus[Int(c.draw % 3)], Int(c.draw / 3 % 5) + 1)
                    return await .asking("add \(sku) \(n)") {
                        _ = try await c.ref("/user/inventory").typed(as: Inventory.self).ask(
                            AddStock(sku: sku, count: n), timeout: .seconds(2))
                    }
                },
                .init("remove", weight: 2) { c in
                    let (sku, n) = (skus[Int(c.draw % 3)], Int(c.draw / 3 % 7) + 1)
                    return await .asking("remove \(sku) \(n)") {
                        switch try await c.ref("/user/inventory").typed(as: Inventory.self).ask(
                            RemoveStock(sku: sku, count: n), timeout: .seconds(2))
                        {
                        case .removed(let remaining): "left \(remaining)"
                        case .outOfStock(let available): "short \(available)"
                        }
                    }
                },
                .init("get", weight: 2) { c in
                    let sku = skus[Int(c.draw % 3)]
                    return await .asking("get \(sku) 0") {
                        "is \(try await c.ref("/user/inventory").typed(as: Inventory.self).ask(GetStock(sku: sku), timeout: .seconds(2)))"
                    }
                },
                .init("quote") { c in
                    await .asking("quote apple 2") {
                        "\(try await c.ref("/user/pricing").typed(as: Pricer.self).ask(Quote(sku: "apple", count: 2), timeout: .seconds(2)).total)"
                    }
                },
                .init("ledger") { c in
                    await .asking("ledger - 0") {
                        "\(try await c.ref("/user/ledger").typed(as: Ledger.self).ask(GetLedger(), timeout: .seconds(2)).movements)"
                    }
                },
            ],
            checks: [
                .init("no stock lost or created: every read is explained by the node's own movements", stockCheck),
                .init("every quote is 125 cents a unit", quoteCheck),
            ])
    }

    // MARK: - The stock check

    /// One movement or reading of one SKU on one node incarnation.
    struct Step {
        var op: ChaosHistory.Operation
        var kind: Substring
        var sku: Substring
        var count: Int
        /// What an `.ok` said: `left N`, `short N`, `is N`.
        var said: (word: Substring, value: Int)?

        init?(_ op: ChaosHistory.Operation) {
            let words = (op.detail ?? "").split(separator: " ")
            guard words.count >= 3, let count = Int(words[2]) else { return nil }
            self.op = op
            kind = words[0]
            sku = words[1]
            self.count = count
            if op.outcome == .ok, words.count >= 5, let value = Int(words[4]) { said = (words[3], value) }
        }

        /// The change it certainly made, if it certainly happened.
        var certain: Int? {
            guard op.outcome == .ok else { return nil }
            switch kind {
            case "add": return count
            case "remove": return said?.word == "left" ? -count : 0
            default: return 0
            }
        }

        /// The change it may have made (unknown, or never ended); nil when
        /// it certainly made none.
        var possible: Int? {
            if let certain { return certain }
            guard op.outcome != .fail else { return nil }
            switch kind {
            case "add": return count
            case "remove": return -count
            default: return nil
            }
        }
    }

    /// For every reading (a `get`, or a `remove`'s "left"/"short"), the
    /// stock it saw must lie between the least and the most the node's
    /// movements allow: those certainly done before it was asked, and those
    /// that may have happened before it answered.
    static func stockCheck(_ history: ChaosHistory) -> [String] {
        var findings: [String] = []
        let steps = history.operations().filter { ["add", "remove", "get"].contains($0.name) }.compactMap(Step.init)
        let byIncarnation = Dictionary(grouping: steps) { "\($0.op.node)#\($0.op.uid) \($0.sku)" }
        for (incarnation, steps) in byIncarnation.sorted(by: { $0.key < $1.key }) {
            for reading in steps {
                guard let said = reading.said else { continue }
                // A remove's reading is of the stock before it: add back what it took.
                let seen = said.word == "left" ? said.value + reading.count : said.value
                let (asked, answered) = (reading.op.invokedAt, reading.op.endedAt ?? UInt64.max)
                var low = 0
                var high = 0
                for step in steps where step.op != reading.op {
                    let endedBefore = (step.op.endedAt ?? UInt64.max) < asked
                    let startedBefore = step.op.invokedAt < answered
                    if endedBefore, let change = step.certain {
                        low += change
                        high += change
                    } else if startedBefore, let change = step.possible {
                        if change > 0 { high += change } else { low += change }
                    }
                }
                if seen < max(low, 0) || seen > high {
                    findings.append(
                        "\(incarnation): \(reading.op.name) #\(reading.op.op) saw \(seen), but its movements allow "
                            + "\(max(low, 0))...\(high): stock \(seen < low ? "lost" : "created")")
                }
            }
        }
        return findings
    }

    static func quoteCheck(_ history: ChaosHistory) -> [String] {
        history.operations(named: "quote").compactMap { op in
            guard op.outcome == .ok, let total = op.detail?.split(separator: " ").last, total != "250" else {
                return nil
            }
            return "quote #\(op.op) on \(op.node) priced 2 units at \(total), not 250"
        }
    }
}
