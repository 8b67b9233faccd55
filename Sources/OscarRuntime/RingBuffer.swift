/// A growable FIFO ring buffer: O(1) append, and insertion and removal at the
/// front, with no allocation once it has reached its working size. Mailboxes
/// use it.
struct RingBuffer<Element> {
    private var storage: [Element?] = []
    private var head = 0
    private(set) var count = 0

    init() {}

    var isEmpty: Bool { count == 0 }

    mutating func append(_ element: Element) {
        if count == storage.count { grow() }
        storage[(head + count) & (storage.count - 1)] = element
        count += 1
    }

    /// Puts `elements` before the current first element, in their order: the
    /// first of them is the next `popFirst()`.
    mutating func prepend(contentsOf elements: [Element]) {
        for element in elements.reversed() {
            if count == storage.count { grow() }
            head = (head - 1) & (storage.count - 1)
            storage[head] = element
            count += 1
        }
    }

    mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head].take()
        head = (head + 1) & (storage.count - 1)
        count -= 1
        return element
    }

    mutating func removeAll() -> [Element] {
        var all: [Element] = []
        all.reserveCapacity(count)
        while let e = popFirst() { all.append(e) }
        return all
    }

    private mutating func grow() {
        let newCapacity = Swift.max(16, storage.count * 2)
        var next = [Element?](repeating: nil, count: newCapacity)
        for i in 0..<count { next[i] = storage[(head + i) & (storage.count - 1)].take() }
        storage = next
        head = 0
    }
}
