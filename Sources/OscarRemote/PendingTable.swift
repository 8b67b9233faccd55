import OscarBase
import OscarCBOR
import OscarRuntime

/// The asks one association waits on, by correlation id.
///
/// Why not a `Dictionary`: ids are handed out consecutively, so an id's low
/// bits give it a slot of its own in a power-of-two ring, and hashing them
/// was a visible part of an ask's cost at W3's rate. An id whose slot is
/// still held by an older ask (one with a long timeout, say) goes to a
/// small dictionary instead; when that holds many, the ring doubles.
/// (Linear probing was tried first: consecutive ids fill one long run of
/// slots, and each removal walked all of it.)
struct PendingTable<Value> {
    private var keys: [UInt64]  // 0: empty (ids start at 1)
    private var values: [Value?]
    private var mask: Int
    private var overflow: [UInt64: Value] = [:]
    package private(set) var count = 0

    init(capacity: Int = 64) {
        var size = 8
        while size < capacity * 2 { size *= 2 }
        keys = Array(repeating: 0, count: size)
        values = Array(repeating: nil, count: size)
        mask = size - 1
    }

    package var isEmpty: Bool { count == 0 }

    /// Slots in the ring (it doubles when many ids overflow).
    var ringSize: Int { keys.count }

    /// Adds `value` under `key` (not 0, not already present).
    package mutating func insert(_ value: Value, for key: UInt64) {
        precondition(key != 0, "correlation ids start at 1")
        let i = Int(truncatingIfNeeded: key) & mask
        count += 1
        if keys[i] == 0 {
            keys[i] = key
            values[i] = value
        } else {
            overflow[key] = value
            if overflow.count * 4 > keys.count { grow() }  // recounts
        }
    }

    /// Removes and returns the value under `key`, if any.
    package mutating func remove(_ key: UInt64) -> Value? {
        guard key != 0 else { return nil }
        let i = Int(truncatingIfNeeded: key) & mask
        if keys[i] == key {
            keys[i] = 0
            count -= 1
            defer { values[i] = nil }
            return values[i]
        }
        guard !overflow.isEmpty, let value = overflow.removeValue(forKey: key) else { return nil }
        count -= 1
        return value
    }

    /// Empties the table; returns what it held.
    package mutating func removeAll() -> [Value] {
        var all = values.compactMap { $0 }
        all += overflow.values
        for i in keys.indices where keys[i] != 0 {
            keys[i] = 0
            values[i] = nil
        }
        overflow.removeAll()
        count = 0
        return all
    }

    private mutating func grow() {
        let held = zip(keys, values).filter { $0.0 != 0 }.map { ($0.0, $0.1!) } + overflow.map { ($0.key, $0.value) }
        keys = Array(repeating: 0, count: keys.count * 2)
        values = Array(repeating: nil, count: keys.count)
        mask = keys.count - 1
        overflow.removeAll()
        count = 0
        for (key, value) in held { insert(value, for: key) }
    }
}
