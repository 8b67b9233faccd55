import Oscar
import Testing

@testable import OscarRemote

/// The pending-ask table against a `Dictionary`, with ids that collide on
/// purpose (multiples of the table size) and enough of them to grow it.
@Suite(.timeLimit(.minutes(5))) struct PendingTableTests {
    @Test func behavesLikeADictionaryThroughCollisionsRemovalsAndGrowth() {
        var rng = SeededRandom(seed: 99)
        var table = PendingTable<Int>(capacity: 4)
        var model: [UInt64: Int] = [:]
        var next: UInt64 = 1
        for step in 0..<20_000 {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<4:
                next += 1
                while model[next] != nil { next += 1 }  // taken by a colliding id below
                table.insert(step, for: next)
                model[next] = step
            case 4:
                // An id that lands on an occupied home slot.
                let key = next + 1 + 16 * UInt64.random(in: 1...4, using: &rng)
                guard model[key] == nil else { continue }
                table.insert(step, for: key)
                model[key] = step
            case 5..<9:
                guard let key = model.keys.randomElement(using: &rng) else { continue }
                let removed = table.remove(key)
                let expected = model.removeValue(forKey: key)
                if removed != expected {
                    Issue.record(
                        "step \(step): removing \(key) gave \(String(describing: removed)), expected \(String(describing: expected))"
                    )
                    return
                }
            default:
                let absent = next + 1_000
                #expect(table.remove(absent) == nil)
            }
            if table.count != model.count {
                Issue.record("step \(step): \(table.count) entries, expected \(model.count)")
                return
            }
        }
        #expect(table.ringSize > 8, "colliding ids never made the ring grow")
        for (key, value) in model { #expect(table.remove(key) == value) }
        #expect(table.isEmpty)
    }

    @Test func removeAllReturnsEverythingAndEmpties() {
        var table = PendingTable<String>()
        for i in UInt64(1)...100 { table.insert("v\(i)", for: i) }
        #expect(Set(table.removeAll()) == Set((1...100).map { "v\($0)" }))
        #expect(table.isEmpty && table.remove(5) == nil)
    }
}
