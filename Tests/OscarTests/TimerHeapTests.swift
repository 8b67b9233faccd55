import Testing

@testable import OscarRuntime

/// The loop's timer heap against a plain list of deadlines: random inserts,
/// removals from anywhere and expiries, with the heap's handles checked after
/// every step (a reply removes its ask's entry by handle, so a stale or
/// shared handle would remove the wrong timer or none).
@Suite(.timeLimit(.minutes(2))) struct TimerHeapTests {
    final class Entry: TimerEntry {
        var timerDeadline: UInt64 = 0
        var timerSlot = -1
        let id: Int
        init(id: Int) { self.id = id }
        func timerFired() {}
        func timerCancelled() {}
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8]) func agreesWithAModelUnderRandomOperations(seed: UInt64) {
        var rng = SeededRandom(seed: seed)
        var heap = TimerHeap()
        var scheduled: [Entry] = []
        var now: UInt64 = 0
        var nextID = 0
        var peak = 0
        for _ in 0..<4_000 {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                let entry = Entry(id: nextID)
                nextID += 1
                // Few distinct deadlines, so ties are common.
                entry.timerDeadline = now + UInt64.random(in: 0..<40, using: &rng)
                heap.insert(entry)
                scheduled.append(entry)
                peak = max(peak, scheduled.count)
            case 5..<8:
                guard let victim = scheduled.randomElement(using: &rng) else { continue }
                heap.remove(victim)
                #expect(victim.timerSlot == -1)
                scheduled.removeAll { $0 === victim }
                heap.remove(victim)  // a second removal is a no-op
            default:
                now += UInt64.random(in: 0..<8, using: &rng)
                var popped: [Entry] = []
                while let e = heap.popExpired(now: now) { popped.append(e as! Entry) }
                let due = scheduled.filter { $0.timerDeadline <= now }
                #expect(Set(popped.map(\.id)) == Set(due.map(\.id)))
                #expect(popped.map(\.timerDeadline) == popped.map(\.timerDeadline).sorted())
                #expect(popped.allSatisfy { $0.timerSlot == -1 })
                scheduled.removeAll { $0.timerDeadline <= now }
            }
            #expect(heap.count == scheduled.count)
            // Every scheduled entry has a handle of its own; handles are reused,
            // so they stay below the most ever scheduled at once.
            #expect(Set(scheduled.map(\.timerSlot)).count == scheduled.count)
            #expect(scheduled.allSatisfy { $0.timerSlot >= 0 && $0.timerSlot < peak })
            if let earliest = heap.earliest {
                #expect(earliest.timerDeadline == scheduled.map(\.timerDeadline).min())
            }
        }
        #expect(Set(heap.removeAll().map { ($0 as! Entry).id }) == Set(scheduled.map(\.id)))
        #expect(heap.count == 0)
    }
}
