/// One bit per member of a gossip state's `current` array, in its order:
/// who has seen the state, who is unreachable, who is down or exiting.
///
/// Why bits: every node reads these on every tick for every member (is the
/// state converged, whom to gossip to) and unites "seen" on most gossip it
/// takes. At 10,000 members a flag per `Bool` made those walks most of a
/// simulated node's tick; 64 members a word makes them 64 times shorter,
/// and counting is a population count.
package struct MemberFlags: Hashable, Sendable {
    private var words: [UInt64]
    /// How many members the flags are for.
    package let count: Int

    /// `count` flags, all clear.
    package init(count: Int) {
        self.count = count
        words = Array(repeating: 0, count: (count + 63) / 64)
    }

    /// `count` flags, all set.
    package static func all(count: Int) -> MemberFlags {
        var flags = MemberFlags(count: count)
        for w in flags.words.indices { flags.words[w] = fullWord(w, count: count) }
        return flags
    }

    /// `count` flags, set where `isSet` says.
    package init(count: Int, where isSet: (Int) -> Bool) {
        self.init(count: count)
        for i in 0..<count where isSet(i) { self[i] = true }
    }

    package subscript(i: Int) -> Bool {
        get { words[i >> 6] & (1 << UInt64(i & 63)) != 0 }
        set {
            precondition(i < count, "flag \(i) of \(count)")  // bits past `count` stay clear
            if newValue { words[i >> 6] |= 1 << UInt64(i & 63) } else { words[i >> 6] &= ~(1 << UInt64(i & 63)) }
        }
    }

    /// Sets every flag `other` has set (the same members, in the same order).
    package mutating func formUnion(_ other: MemberFlags) {
        precondition(count == other.count, "flags for different member lists")
        for w in words.indices { words[w] |= other.words[w] }
    }

    /// The flags set in this and clear in every one of `others`.
    package func subtracting(_ others: MemberFlags...) -> MemberFlags {
        var out = self
        for other in others {
            precondition(count == other.count, "flags for different member lists")
            for w in out.words.indices { out.words[w] &= ~other.words[w] }
        }
        return out
    }

    /// Whether every member's flag is set in at least one of `sets`.
    package static func cover(_ count: Int, _ sets: MemberFlags...) -> Bool {
        for w in 0..<(count + 63) / 64 {
            var word: UInt64 = 0
            for s in sets { word |= s.words[w] }
            let full = fullWord(w, count: count)
            if word & full != full { return false }
        }
        return true
    }

    /// Word `w` with every flag of the `count` set (the last word only
    /// partly: bits past `count` stay clear, so counts stay right).
    private static func fullWord(_ w: Int, count: Int) -> UInt64 {
        let bits = min(64, count - w * 64)
        return bits == 64 ? ~0 : (1 << UInt64(bits)) - 1
    }

    /// How many flags are set.
    package var setCount: Int { words.reduce(0) { $0 + $1.nonzeroBitCount } }

    /// The index of the `n`th set flag (from 0), if there are that many.
    package func indexOfSet(_ n: Int) -> Int? {
        var left = n
        for (w, word) in words.enumerated() {
            let here = word.nonzeroBitCount
            guard left < here else {
                left -= here
                continue
            }
            var rest = word
            for _ in 0..<left { rest &= rest - 1 }  // clear the lowest set bits before it
            return w * 64 + rest.trailingZeroBitCount
        }
        return nil
    }

    /// The indices of the set flags, in order.
    package var setIndices: [Int] {
        var out: [Int] = []
        for (w, word) in words.enumerated() {
            var rest = word
            while rest != 0 {
                out.append(w * 64 + rest.trailingZeroBitCount)
                rest &= rest - 1
            }
        }
        return out
    }
}
