import OscarBase

/// Who sees whom as unreachable: each observer's own records, versioned by
/// that observer. Merging keeps, per observer, the record set with the higher
/// version, so only an observer can change its observations and the merge is
/// a join (commutative, associative, idempotent).
package struct Reachability: Codable, Hashable, Sendable {
    public struct Observations: Hashable, Sendable {
        /// Subjects this observer cannot reach.
        public var unreachable: Set<UInt64> = []
        public var version: Int = 0
    }

    /// By observer uid.
    public private(set) var observers: [UInt64: Observations] = [:]

    public init() {}

    /// Records that `observer` now does (or does not) reach `subject`;
    /// returns false when that was already recorded.
    @discardableResult
    public mutating func observe(_ observer: UInt64, reaches subject: UInt64, _ reachable: Bool) -> Bool {
        var o = observers[observer] ?? Observations()
        let changed = reachable ? o.unreachable.remove(subject) != nil : o.unreachable.insert(subject).inserted
        guard changed else { return false }
        o.version += 1
        observers[observer] = o
        return true
    }

    /// True when some observer other than `subject` itself (and among
    /// `observersToCount`) sees it unreachable.
    public func isUnreachable(_ subject: UInt64, countingObservers observersToCount: Set<UInt64>? = nil) -> Bool {
        observers.contains { uid, o in
            uid != subject && (observersToCount?.contains(uid) ?? true) && o.unreachable.contains(subject)
        }
    }

    public func merged(with other: Reachability) -> Reachability {
        merged(with: other, observers: other.observers.keys)
    }

    /// The merge, looking only at `observers`' records: the others are
    /// known to be the same on both sides.
    func merged(with other: Reachability, observers candidates: some Sequence<UInt64>) -> Reachability {
        var out = self
        for uid in candidates {
            guard let theirs = other.observers[uid] else { continue }
            if let mine = out.observers[uid] {
                out.observers[uid] = Self.later(mine, theirs)
            } else {
                out.observers[uid] = theirs
            }
        }
        return out
    }

    /// Higher version wins; equal versions with different content (which one
    /// observer never produces) are settled deterministically so that the
    /// merge stays a join.
    private static func later(_ a: Observations, _ b: Observations) -> Observations {
        if a.version != b.version { return a.version > b.version ? a : b }
        return a.unreachable.sorted().lexicographicallyPrecedes(b.unreachable.sorted()) ? b : a
    }
}

extension Reachability {
    /// Flat, as gossip is (`Gossip`'s coding): observer, version, the
    /// subjects it cannot reach; then the next observer. An observer listed
    /// twice is an error (as a member listed twice is in `Gossip`).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.unkeyedContainer()
        for (observer, o) in observers {
            try c.encode(observer)
            try c.encode(o.version)
            try c.encode(Array(o.unreachable))
        }
    }

    public init(from decoder: any Decoder) throws {
        var c = try decoder.unkeyedContainer()
        while !c.isAtEnd {
            let observer = try c.decode(UInt64.self)
            let version = try c.decode(Int.self)
            let o = Observations(unreachable: Set(try c.decode([UInt64].self)), version: version)
            guard observers.updateValue(o, forKey: observer) == nil else {
                throw DecodingError.dataCorruptedError(in: c, debugDescription: "observer \(observer) listed twice")
            }
        }
    }
}
