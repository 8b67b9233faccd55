import CLibUV
import OscarBase
import OscarCBOR

/// Something that can sit in a loop's timer heap.
///
/// Objects that already exist per operation (a pending ask, say) conform
/// directly, so arming a timeout allocates nothing more.
package protocol TimerEntry: AnyObject {
    /// Monotonic deadline in nanoseconds (`uv_hrtime` clock).
    var timerDeadline: UInt64 { get set }
    /// Position in the heap, or -1 when not scheduled. Owned by `TimerHeap`.
    var timerSlot: Int { get set }
    /// Called on the loop thread once the deadline has passed.
    func timerFired()
    /// Called on the loop thread when the loop shuts down before the deadline.
    func timerCancelled()
}

/// A cancellable one-shot timer with a closure body.
package final class LoopTimer: TimerEntry {
    @exclusivity(unchecked) package var timerDeadline: UInt64 = 0
    @exclusivity(unchecked) package var timerSlot = -1
    private var body: (() -> Void)?

    package init(_ body: @escaping () -> Void) { self.body = body }

    package func timerFired() {
        let b = body
        body = nil
        b?()
    }

    package func timerCancelled() { body = nil }

    /// True while the timer is scheduled and has not fired.
    public var isPending: Bool { timerSlot >= 0 }
}

/// A binary min-heap of timer entries by deadline, with O(log n) removal.
///
/// Why a heap and not one `uv_timer_t` per timeout: a loop can have hundreds of
/// thousands of asks in flight; one libuv timer armed at the earliest deadline
/// serves them all, and a reply removes its entry at once rather than leaving it
/// to expire.
struct TimerHeap {
    /// The deadline is kept beside its entry, so ordering the heap reads
    /// plain integers instead of calling through the protocol (a reply per
    /// ask removes an entry: that was most of a timer's cost).
    private struct Slot {
        var deadline: UInt64
        var entry: any TimerEntry
    }
    private var slots: [Slot] = []

    package var count: Int { slots.count }
    var earliest: (any TimerEntry)? { slots.first?.entry }

    package mutating func insert(_ entry: any TimerEntry) {
        precondition(entry.timerSlot < 0, "timer is already scheduled")
        entry.timerSlot = slots.count
        slots.append(Slot(deadline: entry.timerDeadline, entry: entry))
        siftUp(slots.count - 1)
    }

    /// Removes the entry if it is scheduled; a no-op otherwise.
    package mutating func remove(_ entry: any TimerEntry) {
        let slot = entry.timerSlot
        guard slot >= 0, slot < slots.count, slots[slot].entry === entry else { return }
        entry.timerSlot = -1
        let last = slots.removeLast()
        guard slot < slots.count else { return }
        slots[slot] = last
        last.entry.timerSlot = slot
        siftDown(slot)
        siftUp(slot)
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`.
    mutating func popExpired(now: UInt64) -> (any TimerEntry)? {
        guard let first = slots.first, first.deadline <= now else { return nil }
        remove(first.entry)
        return first.entry
    }

    package mutating func removeAll() -> [any TimerEntry] {
        let all = slots.map(\.entry)
        for e in all { e.timerSlot = -1 }
        slots.removeAll()
        return all
    }

    // Both sifts work through a mutable span: through the array's subscript
    // every slot update retained and released its entry, half the cost of
    // a reply's removal (W3 removes the root once per ask).
    private mutating func siftUp(_ start: Int) {
        var heap = slots.mutableSpan
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { return }
            Self.swap(&heap, child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var heap = slots.mutableSpan
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            var smallest = left
            let right = left + 1
            if right < heap.count, heap[right].deadline < heap[left].deadline { smallest = right }
            guard heap[smallest].deadline < heap[parent].deadline else { return }
            Self.swap(&heap, parent, smallest)
            parent = smallest
        }
    }

    private static func swap(_ heap: inout MutableSpan<Slot>, _ a: Int, _ b: Int) {
        heap.swapAt(a, b)
        heap[a].entry.timerSlot = a
        heap[b].entry.timerSlot = b
    }
}
