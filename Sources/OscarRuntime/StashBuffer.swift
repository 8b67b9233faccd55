/// The messages an actor has set aside to handle later, oldest first, never
/// more than `capacity` of them.
///
/// Invariants: `takeAll` returns them in the order they were added, and
/// `add` refuses one beyond `capacity` rather than growing.
struct StashBuffer<Element> {
    /// At most this many; a capacity below zero counts as zero.
    var capacity: Int {
        didSet { capacity = max(0, capacity) }
    }
    private var items: [Element] = []

    init(capacity: Int) { self.capacity = max(0, capacity) }

    var count: Int { items.count }
    var isFull: Bool { items.count >= capacity }

    /// Adds `element` last; false, and nothing added, when full.
    mutating func add(_ element: Element) -> Bool {
        guard !isFull else { return false }
        items.append(element)
        return true
    }

    /// Empties the buffer, returning what it held, oldest first.
    mutating func takeAll() -> [Element] {
        defer { items = [] }
        return items
    }
}
