import OscarBase

/// How many changes each node has made to a gossip state: one counter per
/// node, raised by that node alone whenever it changes the state itself.
///
/// Why it exists: a gossip state is the join of what every node did, and a
/// node's own changes are totally ordered by its counter. So the vector
/// names the state exactly: equal vectors mean equal contents, and a vector
/// that dominates another means its state already includes the other's.
/// Comparing two vectors is a walk over two sorted arrays, much cheaper than
/// comparing or merging member tables, which is what lets a stable cluster
/// of a thousand nodes gossip without merging anything.
package struct VersionVector: Hashable, Sendable {
    /// One node's counter.
    public struct Entry: Hashable, Sendable {
        public var node: UInt64
        public var count: UInt64
    }

    /// How two vectors relate.
    public enum Order: Sendable, Equatable {
        case same
        /// This vector is strictly behind the other one.
        case before
        /// This vector is strictly ahead of the other one.
        case after
        /// Each holds changes the other lacks.
        case concurrent
    }

    /// Sorted by node, one entry per node, no zero counts.
    public private(set) var entries: [Entry] = []

    public init() {}

    /// The counter of `node` (0 when it has made no change).
    public subscript(node: UInt64) -> UInt64 {
        guard let i = index(of: node) else { return 0 }
        return entries[i].count
    }

    /// Records one more change made by `node`.
    public mutating func increment(_ node: UInt64) {
        if let i = index(of: node) {
            entries[i].count &+= 1
        } else {
            entries.insert(Entry(node: node, count: 1), at: insertionPoint(of: node))
        }
    }

    public func compare(_ other: VersionVector) -> Order {
        if entries == other.entries { return .same }
        var ahead = false
        var behind = false
        walk(other) { mine, theirs in
            if mine > theirs { ahead = true }
            if mine < theirs { behind = true }
        }
        switch (ahead, behind) {
        case (true, true): return .concurrent
        case (true, false): return .after
        case (false, true): return .before
        case (false, false): return .same
        }
    }

    /// The nodes whose counters differ between the two vectors.
    public func nodesDiffering(from other: VersionVector) -> [UInt64] {
        var out: [UInt64] = []
        walkNodes(other) { node, mine, theirs in if mine != theirs { out.append(node) } }
        return out
    }

    /// The pointwise maximum.
    public func merged(with other: VersionVector) -> VersionVector {
        var out = VersionVector()
        out.entries.reserveCapacity(max(entries.count, other.entries.count))
        walkNodes(other) { node, mine, theirs in out.entries.append(Entry(node: node, count: max(mine, theirs))) }
        return out
    }

    // MARK: - Internals

    /// Visits every node in either vector, in order, with both counters.
    private func walkNodes(_ other: VersionVector, _ visit: (UInt64, UInt64, UInt64) -> Void) {
        var i = 0
        var j = 0
        while i < entries.count, j < other.entries.count {
            let (a, b) = (entries[i], other.entries[j])
            if a.node < b.node {
                visit(a.node, a.count, 0)
                i += 1
            } else if b.node < a.node {
                visit(b.node, 0, b.count)
                j += 1
            } else {
                visit(a.node, a.count, b.count)
                i += 1
                j += 1
            }
        }
        for a in entries[i...] { visit(a.node, a.count, 0) }
        for b in other.entries[j...] { visit(b.node, 0, b.count) }
    }

    private func walk(_ other: VersionVector, _ visit: (UInt64, UInt64) -> Void) {
        walkNodes(other) { _, mine, theirs in visit(mine, theirs) }
    }

    private func insertionPoint(of node: UInt64) -> Int {
        var low = 0
        var high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].node < node { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private func index(of node: UInt64) -> Int? {
        let i = insertionPoint(of: node)
        return i < entries.count && entries[i].node == node ? i : nil
    }
}

extension VersionVector: Codable {
    /// Flat on the wire: node, count, node, count, …
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.unkeyedContainer()
        for e in entries {
            try c.encode(e.node)
            try c.encode(e.count)
        }
    }

    /// Accepts pairs in any order; a node listed twice keeps its larger
    /// count, and zero counts are dropped, so what a peer sends cannot break
    /// the sorted invariant.
    public init(from decoder: any Decoder) throws {
        var c = try decoder.unkeyedContainer()
        var counts: [UInt64: UInt64] = [:]
        while !c.isAtEnd {
            let node = try c.decode(UInt64.self)
            let count = try c.decode(UInt64.self)
            counts[node] = max(counts[node] ?? 0, count)
        }
        entries = counts.filter { $0.value > 0 }.map { Entry(node: $0.key, count: $0.value) }.sorted {
            $0.node < $1.node
        }
    }
}
