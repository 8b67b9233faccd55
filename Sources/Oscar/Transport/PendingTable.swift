/// The asks one association waits on, by correlation id.
///
/// Why not a `Dictionary`: ids are handed out consecutively, so their low
/// bits already spread them over a power-of-two table, and hashing them was
/// a visible part of an ask's cost at W3's rate. Collisions (an ask still
/// waiting when its slot comes round again) probe the next slots; removal
/// shifts later entries back, so no tombstones build up.
struct PendingTable<Value> {
    private var keys: [UInt64]  // 0: empty (ids start at 1)
    private var values: [Value?]
    private var mask: Int
    private(set) var count = 0

    init(capacity: Int = 64) {
        var size = 8
        while size < capacity * 2 { size *= 2 }
        keys = Array(repeating: 0, count: size)
        values = Array(repeating: nil, count: size)
        mask = size - 1
    }

    var isEmpty: Bool { count == 0 }

    /// Adds `value` under `key` (not 0, not already present).
    mutating func insert(_ value: Value, for key: UInt64) {
        precondition(key != 0, "correlation ids start at 1")
        if (count + 1) * 2 > keys.count { grow() }
        var i = Int(truncatingIfNeeded: key) & mask
        while keys[i] != 0 { i = (i + 1) & mask }
        keys[i] = key
        values[i] = value
        count += 1
    }

    /// Removes and returns the value under `key`, if any.
    mutating func remove(_ key: UInt64) -> Value? {
        guard key != 0 else { return nil }
        var i = Int(truncatingIfNeeded: key) & mask
        while keys[i] != key {
            if keys[i] == 0 { return nil }
            i = (i + 1) & mask
        }
        let value = values[i]
        keys[i] = 0
        values[i] = nil
        count -= 1
        // Shift back the entries after the hole that probed past it.
        var hole = i
        var j = (i + 1) & mask
        while keys[j] != 0 {
            let home = Int(truncatingIfNeeded: keys[j]) & mask
            // Does j's probe path from `home` pass through `hole`?
            let passes = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j)
            if passes {
                keys[hole] = keys[j]
                values[hole] = values[j]
                keys[j] = 0
                values[j] = nil
                hole = j
            }
            j = (j + 1) & mask
        }
        return value
    }

    /// Empties the table; returns what it held.
    mutating func removeAll() -> [Value] {
        let all = values.compactMap { $0 }
        for i in keys.indices where keys[i] != 0 {
            keys[i] = 0
            values[i] = nil
        }
        count = 0
        return all
    }

    private mutating func grow() {
        let old = zip(keys, values).filter { $0.0 != 0 }
        keys = Array(repeating: 0, count: keys.count * 2)
        values = Array(repeating: nil, count: keys.count)
        mask = keys.count - 1
        count = 0
        for (key, value) in old { insert(value!, for: key) }
    }
}
