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
    /// The heap's handle for this entry, or -1 when not scheduled. Owned by `TimerHeap`.
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
///
/// Why handles: an entry's `timerSlot` is a handle that stays put while the
/// heap reorders, and the heap itself holds plain integers (deadline and
/// handle). Sifting then moves no references. When the heap held the entries
/// and wrote each moved entry's position into it, every step of a sift
/// retained and released that entry; at W3's rate (a reply removes the
/// earliest of 64 entries per ask) that was 4 % of node A's time.
struct TimerHeap {
    private struct Node {
        var deadline: UInt64
        var handle: Int
    }
    /// The heap, by deadline.
    private var nodes: [Node] = []
    /// By handle: the entry, and where its node is in `nodes`.
    private var entries: [(any TimerEntry)?] = []
    private var positions: [Int] = []
    private var freeHandles: [Int] = []

    package var count: Int { nodes.count }
    var earliest: (any TimerEntry)? { nodes.first.map { entries[$0.handle]! } }

    package mutating func insert(_ entry: any TimerEntry) {
        precondition(entry.timerSlot < 0, "timer is already scheduled")
        let handle: Int
        if let free = freeHandles.popLast() {
            handle = free
            entries[handle] = entry
            positions[handle] = nodes.count
        } else {
            handle = entries.count
            entries.append(entry)
            positions.append(nodes.count)
        }
        entry.timerSlot = handle
        nodes.append(Node(deadline: entry.timerDeadline, handle: handle))
        siftUp(nodes.count - 1)
    }

    /// Removes the entry if it is scheduled; a no-op otherwise.
    package mutating func remove(_ entry: any TimerEntry) {
        let handle = entry.timerSlot
        guard handle >= 0, handle < entries.count, let held = entries[handle], held === entry else { return }
        removeNode(at: positions[handle])
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`.
    mutating func popExpired(now: UInt64) -> (any TimerEntry)? {
        guard let first = nodes.first, first.deadline <= now else { return nil }
        return removeNode(at: 0)
    }

    package mutating func removeAll() -> [any TimerEntry] {
        let all = nodes.map { entries[$0.handle]! }
        for e in all { e.timerSlot = -1 }
        nodes.removeAll()
        entries.removeAll()
        positions.removeAll()
        freeHandles.removeAll()
        return all
    }

    @discardableResult
    private mutating func removeNode(at index: Int) -> any TimerEntry {
        let handle = nodes[index].handle
        let entry = entries[handle].take()!
        entry.timerSlot = -1
        freeHandles.append(handle)
        let last = nodes.removeLast()
        if index < nodes.count {
            nodes[index] = last
            positions[last.handle] = index
            siftDown(index)
            siftUp(positions[last.handle])
        }
        return entry
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard nodes[child].deadline < nodes[parent].deadline else { return }
            swapNodes(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        let count = nodes.count
        while true {
            let left = 2 * parent + 1
            guard left < count else { return }
            var smallest = left
            let right = left + 1
            if right < count, nodes[right].deadline < nodes[left].deadline { smallest = right }
            guard nodes[smallest].deadline < nodes[parent].deadline else { return }
            swapNodes(parent, smallest)
            parent = smallest
        }
    }

    private mutating func swapNodes(_ a: Int, _ b: Int) {
        nodes.swapAt(a, b)
        positions[nodes[a].handle] = a
        positions[nodes[b].handle] = b
    }
}
