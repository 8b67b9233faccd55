import Foundation
import OscarBase

/// Decodes `Decodable` values from CBOR (RFC 8949).
///
/// Unknown map keys are skipped, missing optional keys decode as nil, and both
/// definite and indefinite lengths are read. Every length is checked against
/// the bytes left, nesting is limited (`CBORReader.maxDepth`), a decoded map
/// with two equal keys is refused, and a failure is a `CBORError`: bytes
/// from the network never trap the decoder.
@usableFromInline
package struct CBORDecoder: Sendable {
    /// Made available to `init(from:)` as `decoder.userInfo`; `ActorRef`
    /// reads its `ActorSystem` from here.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Set on a decoder that one thread keeps for the frames it reads (the
    /// transport's I/O loop, for replies): decodes then reuse one decoding
    /// object instead of allocating two per message. `detached` drops it
    /// before the decoder goes to another thread.
    var reusable: ReusableDecoding?

    public init() {}

    /// A copy that decodes with one reused decoding object: for one thread
    /// only (it is not locked).
    package func reusingOneDecoding() -> CBORDecoder {
        var copy = self
        copy.reusable = ReusableDecoding(CBORDecoding(reusableWith: userInfo))
        return copy
    }

    /// A copy without the reused decoding object, safe to use on any thread.
    package var detached: CBORDecoder {
        var copy = self
        copy.reusable = nil
        return copy
    }

    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws(CBORError) -> T {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(CBORError) in try decode(type, from: raw) } }
        return try result.get()
    }

    /// Decodes from bytes that must stay valid for the duration of the call
    /// only (a slice of a reusable read buffer, say).
    public func decode<T: Decodable>(_ type: T.Type, from bytes: UnsafeRawBufferPointer) throws(CBORError) -> T {
        var end = 0
        let value = try decode(type, from: bytes, itemAt: 0, end: &end)
        try Self.checkWhole(bytes, end: end)
        return value
    }

    /// Decodes with a decoding object kept by the caller (an actor cell keeps
    /// one), so a message costs no decoder allocation. Not reentrant.
    ///
    /// Inlinable down to `T(from:)`, so a reaction's decode is specialized
    /// for its message in the module that declares it: run generically, the
    /// metadata look-ups and value-witness calls on the way cost a fifth of
    /// a received message.
    @inlinable
    package func decode<T: Decodable>(
        _ type: T.Type, from bytes: UnsafeRawBufferPointer, using decoding: CBORDecoding
    )
        throws(CBORError) -> T
    {
        var end = 0
        let value = try decodeItem(type, at: 0, of: bytes, using: decoding, end: &end)
        try Self.checkWhole(bytes, end: end)
        return value
    }

    @usableFromInline
    static func checkWhole(_ bytes: UnsafeRawBufferPointer, end: Int) throws(CBORError) {
        guard end == bytes.count else { throw CBORError.malformed("trailing bytes after the item", at: end) }
    }

    /// Decodes the item at `offset` of `bytes`, one of several in a row (a
    /// distributed call's arguments), and sets `end` to where it ends:
    /// where the next one starts. `depth` is the item's depth in the
    /// payload it is part of (`CBORReader.maxDepth`).
    package func decode<T: Decodable>(
        _ type: T.Type, from bytes: UnsafeRawBufferPointer, itemAt offset: Int, depth: Int = 0, end: inout Int
    ) throws(CBORError) -> T {
        if let reusable, !reusable.busy {
            reusable.busy = true  // a decode within this one gets its own object
            defer { reusable.busy = false }
            return try decodeItem(type, at: offset, of: bytes, using: reusable.decoding, depth: depth, end: &end)
        }
        return try decodeItem(
            type, at: offset, of: bytes, using: CBORDecoding(bytes, userInfo: userInfo), depth: depth, end: &end)
    }

    @inlinable
    func decodeItem<T: Decodable>(
        _ type: T.Type, at offset: Int, of bytes: UnsafeRawBufferPointer, using decoding: CBORDecoding,
        depth: Int = 0, end: inout Int
    ) throws(CBORError) -> T {
        decoding.reset(bytes)
        let value: T
        do {
            value = try decoding.decodeValue(T.self, at: offset, depth: depth)
        } catch {
            throw Self.typed(error)
        }
        end = try decoding.end(ofItemAt: offset, depth: depth)
        return value
    }

    /// A failure of `init(from:)` as a `CBORError`: the codec's own errors
    /// as they are, the standard library's `DecodingError` with its path.
    @usableFromInline
    static func typed(_ error: any Error) -> CBORError {
        switch error {
        case let error as CBORError: error
        case let error as DecodingError: .invalid(describe(error))
        default: .invalid("\(error)")
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .dataCorrupted(let c), .keyNotFound(_, let c), .typeMismatch(_, let c), .valueNotFound(_, let c):
            let path = c.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? c.debugDescription : "\(c.debugDescription) at \(path)"
        @unknown default:
            return "\(error)"
        }
    }
}

/// A decoding object kept by one thread (see `CBORDecoder.reusable`).
final class ReusableDecoding: @unchecked Sendable {
    package let decoding: CBORDecoding
    @exclusivity(unchecked) package var busy = false
    init(_ decoding: CBORDecoding) { self.decoding = decoding }
}

@usableFromInline
package final class CBORDecoding: Decoder {
    @exclusivity(unchecked) package private(set) var bytes: UnsafeRawBufferPointer
    package let info: [CodingUserInfoKey: any Sendable]
    // One decode runs on one thread, start to end: these are not checked for
    // exclusivity at run time (the checks cost more than the accesses).
    /// Start of the item the next `init(from:)` decodes.
    @usableFromInline @exclusivity(unchecked) package var position = 0
    @usableFromInline @exclusivity(unchecked) package var codingPath: [any CodingKey] = []
    /// The depth (`CBORReader.maxDepth`) of the item at `position`.
    @usableFromInline @exclusivity(unchecked) package var depth = 0
    /// The state of every map container of this decode, by slot: kept here
    /// rather than in one object per container.
    @exclusivity(unchecked) var maps: [MapState] = []
    /// The keys that maps matched in written order (without an index), each
    /// linked to the one its map matched before (`MapState.lastMatched`).
    @exclusivity(unchecked) var matchedKeys: [(key: Range<Int>, previous: Int)] = []

    @usableFromInline
    func reset(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        position = 0
        depth = 0
        if !codingPath.isEmpty { codingPath.removeAll() }
        maps.removeAll(keepingCapacity: true)
        matchedKeys.removeAll(keepingCapacity: true)
        readItem = (-1, -1)
    }

    package init(_ bytes: UnsafeRawBufferPointer, userInfo: [CodingUserInfoKey: any Sendable]) {
        self.bytes = bytes
        self.info = userInfo
    }

    /// A decoding to keep and reuse: each decode points it at its bytes.
    package convenience init(reusableWith userInfo: [CodingUserInfoKey: any Sendable]) {
        self.init(UnsafeRawBufferPointer(start: nil, count: 0), userInfo: userInfo)
    }

    @usableFromInline package var userInfo: [CodingUserInfoKey: Any] { info }

    var pathText: String { codingPath.map(\.stringValue).joined(separator: ".") }

    package func reader(at offset: Int) -> CBORReader { CBORReader(bytes, at: offset) }

    /// The byte at `offset`, to tell a null from a value: an item that a
    /// head promised but the input does not hold is truncation, not a trap.
    package func byte(at offset: Int) throws(CBORError) -> UInt8 {
        guard offset < bytes.count else { throw .truncated(at: offset) }
        return bytes[offset]
    }

    /// Where the item at `offset`, at `depth`, ends.
    func endOfItem(at offset: Int, depth: Int) throws(CBORError) -> Int {
        var r = reader(at: offset)
        try r.skipItem(depth: depth)
        return r.position
    }

    /// Set by a type that reads its own item in one pass (a distributed
    /// call or outcome): where its item, starting at `start`, ends.
    @exclusivity(unchecked) package var readItem = (start: -1, end: -1)

    /// Where the item at `offset` ends, if a decode of it already knows:
    /// its type read it in one pass (`readItem`), or it is a map read in
    /// order. Nil otherwise: then the item must be walked to find its end.
    package func knownEnd(at offset: Int) -> Int? {
        readItem.start == offset ? readItem.end : consumedMapEnd(at: offset)
    }

    /// Where the map at `offset` ends, when its container read every entry
    /// in order (then its cursor is there): the usual message, whose end
    /// need not be found by walking it a second time. Nil otherwise.
    func consumedMapEnd(at offset: Int) -> Int? {
        guard let first = maps.first, first.start == offset, first.remaining == 0, first.index == nil else {
            return nil
        }
        return first.valuePending ? try? endOfItem(at: first.cursor, depth: first.depth + 1) : first.cursor
    }

    /// Where the whole item at `offset` that this decode just read ends,
    /// once no map of it holds two equal keys.
    @usableFromInline
    func end(ofItemAt offset: Int, depth: Int) throws(CBORError) -> Int {
        try checkUnreadKeys()
        if let end = knownEnd(at: offset) { return end }
        return try endOfItem(at: offset, depth: depth)
    }

    /// Refuses a map with two equal keys among the maps of this decode whose
    /// keys were not all checked as they were read: those that left entries
    /// unread. (A map read in written order checked each key it matched; a
    /// map that built an index checked every key then.)
    func checkUnreadKeys() throws(CBORError) {
        for slot in maps.indices {
            let state = maps[slot]
            guard state.index == nil, state.remaining != 0 else { continue }
            var r = reader(at: state.cursor)
            if state.valuePending { try r.skipItem(depth: state.depth + 1) }
            var keys: [MapKey] = []
            var remaining = state.remaining ?? Int.max
            while remaining > 0 {
                if state.remaining == nil, try r.consumeBreak() { break }
                keys.append(try MapKey.read(&r, depth: state.depth + 1))
                try r.skipItem(depth: state.depth + 1)
                remaining -= 1
            }
            guard !keys.isEmpty else { continue }
            var matched = state.lastMatched
            while matched >= 0 {
                keys.append(MapKey(range: matchedKeys[matched].key, owned: nil, isText: true))
                matched = matchedKeys[matched].previous
            }
            if let twice = MapKey.firstDuplicate(keys, in: bytes) {
                throw .duplicateKey(twice.diagnostic(in: bytes), path: pathText)
            }
        }
    }

    /// Decodes the item at `offset`, which is at `depth`, as a `T`.
    @inlinable
    package func decodeValue<T: Decodable>(_ type: T.Type, at offset: Int, depth: Int) throws -> T {
        if T.self == Data.self || T.self == Date.self {
            return try decodeFoundationValue(T.self, at: offset, depth: depth)
        }
        try CBORReader.check(depth: depth)
        let savedDepth = self.depth
        self.depth = depth
        defer { self.depth = savedDepth }
        let saved = position
        position = offset
        defer { position = saved }
        return try T(from: self)
    }

    /// `Data` and `Date`, which CBOR writes as a byte string and a tagged
    /// number, not as their `Codable` forms.
    @usableFromInline
    func decodeFoundationValue<T: Decodable>(_ type: T.Type, at offset: Int, depth: Int) throws -> T {
        try CBORReader.check(depth: depth)
        if T.self == Data.self {
            var r = reader(at: offset)
            let h = try r.head()
            guard h.major == 2 else { throw mismatch("bytes", h) }
            // A definite-length string (what every encoder here writes) is
            // copied once, straight into the `Data`: through an array it was
            // copied twice, and a 16 MiB message held the loop that decoded it
            // for twice as long. A large one in a lent buffer (a reassembled
            // message) is not copied at all.
            if h.isIndefinite { return Data(try r.wholeString(h)) as! T }  // T is Data: checked above
            let bytes = try r.stringBytes(h)
            return (LendableBuffer.sharedData(bytes) ?? Data(bytes)) as! T
        }
        if T.self == Date.self {
            var r = reader(at: offset)
            let h = try r.head()
            guard h.major == 6, h.argument == 1 else { throw mismatch("a date (tag 1)", h) }
            try CBORReader.check(depth: depth + 1)
            return Date(timeIntervalSince1970: try SingleValue.double(&r, self)) as! T
        }
        preconditionFailure("decodeFoundationValue called for \(T.self)")
    }

    func mismatch(_ expected: String, _ head: CBORReader.Head) -> CBORError {
        let found =
            switch head.major {
            case 0, 1: "an integer"
            case 2: "bytes"
            case 3: "a text string"
            case 4: "an array"
            case 5: "a map"
            case 6: "a tagged item"
            default: head.info == 22 ? "null" : head.info >= 25 && head.info <= 27 ? "a float" : "a simple value"
            }
        return .typeMismatch(expected: expected, found: found, path: pathText)
    }

    @usableFromInline
    package func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(try KeyedContainer<Key>(self, at: position, depth: depth))
    }

    @usableFromInline
    package func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try UnkeyedContainer(self, at: position, depth: depth)
    }

    @usableFromInline
    package func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValue(decoder: self, at: position, depth: depth)
    }

    // MARK: - Keyed

    /// One map being decoded. Lookup walks the entries in the order they
    /// were written, with a cursor, since decoders usually ask for keys in that
    /// order; only a key out of order (or missing) builds an index of all entries.
    struct MapState {
        package struct Entry {
            package var key: MapKey
            package var value: Int
        }
        /// Where the map's head is.
        package var start: Int
        /// The map's depth; its keys and values are one deeper.
        package var depth: Int
        /// Where the next unread entry starts, and how many are left (nil for
        /// an indefinite-length map, which ends at a break byte). While
        /// `valuePending`, the cursor is at the value of the entry just
        /// found, not yet stepped over: reading a primitive steps over it
        /// for free, so the value is not walked twice.
        var cursor: Int
        package var remaining: Int?
        var valuePending = false
        package var index: [Entry]? = nil
        /// After an index hit, where to look first next time.
        var indexCursor = 0
        /// The last key matched in written order, in `matchedKeys`; -1 for none.
        var lastMatched = -1
    }

    struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
        package let decoder: CBORDecoding
        package let slot: Int
        private var state: MapState {
            get { decoder.maps[slot] }
            nonmutating set { decoder.maps[slot] = newValue }
        }
        package let start: Int
        /// The map's depth.
        package let depth: Int
        package var codingPath: [any CodingKey] { decoder.codingPath }

        init(_ decoder: CBORDecoding, at offset: Int, depth: Int) throws {
            self.decoder = decoder
            self.depth = depth
            try CBORReader.check(depth: depth)
            var r = decoder.reader(at: offset)
            let h = try r.head()
            guard h.major == 5 else { throw decoder.mismatch("a map", h) }
            let remaining = h.isIndefinite ? nil : try r.checkedLength(h, perItem: 2)
            // Its keys and values are one level deeper: refused here, once,
            // rather than at each access.
            let isEmpty = try remaining.map { $0 == 0 } ?? (r.peek() == 0xff)
            if !isEmpty { try CBORReader.check(depth: depth + 1) }
            start = offset
            slot = decoder.maps.count
            decoder.maps.append(MapState(start: offset, depth: depth, cursor: r.position, remaining: remaining))
        }

        /// Reads one key at `r` for the in-order path: the byte range of a
        /// definite-length text key, nil for any other key (which sends the
        /// lookup to the index); leaves `r` at the value.
        private func keyRange(_ r: inout CBORReader) throws(CBORError) -> Range<Int>? {
            let keyStart = r.position
            let kh = try r.head()
            guard kh.major == 3, !kh.isIndefinite else {
                r.position = keyStart
                return nil
            }
            let count = try r.checkedLength(kh)
            defer { r.position += count }
            return r.position..<r.position + count
        }

        private func matches(_ range: Range<Int>, _ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
            range.count == utf8.count
                && (utf8.count == 0
                    || memcmp(decoder.bytes.baseAddress! + range.lowerBound, utf8.baseAddress!, utf8.count) == 0)
        }

        private func matches(_ key: MapKey, _ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
            guard key.isText else { return false }
            guard let owned = key.owned else { return matches(key.range, utf8) }
            return owned.count == utf8.count && owned.elementsEqual(utf8)
        }

        /// Notes a key matched in written order, refusing it if this map
        /// already matched it (a type that asks for one key twice would
        /// otherwise read a repeated key as a second one).
        private func noteMatched(_ key: Range<Int>) throws(CBORError) {
            var previous = decoder.maps[slot].lastMatched
            while previous >= 0 {
                let earlier = decoder.matchedKeys[previous]
                if earlier.key.count == key.count,
                    key.isEmpty
                        || memcmp(
                            decoder.bytes.baseAddress! + earlier.key.lowerBound,
                            decoder.bytes.baseAddress! + key.lowerBound, key.count) == 0
                {
                    let text = MapKey(range: key, owned: nil, isText: true)
                    throw .duplicateKey(text.diagnostic(in: decoder.bytes), path: decoder.pathText)
                }
                previous = earlier.previous
            }
            decoder.matchedKeys.append((key, decoder.maps[slot].lastMatched))
            decoder.maps[slot].lastMatched = decoder.matchedKeys.count - 1
        }

        /// Every entry, read once, with each key checked against the others.
        private func buildIndex() throws(CBORError) -> [MapState.Entry] {
            if let index = state.index { return index }
            var r = decoder.reader(at: start)
            let h = try r.head()
            var entries: [MapState.Entry] = []
            var remaining = h.isIndefinite ? Int.max : try r.checkedLength(h, perItem: 2)
            while remaining > 0 {
                if h.isIndefinite, try r.consumeBreak() { break }
                let key = try MapKey.read(&r, depth: depth + 1)
                entries.append(MapState.Entry(key: key, value: r.position))
                try r.skipItem(depth: depth + 1)
                remaining -= 1
            }
            if let twice = MapKey.firstDuplicate(entries.map(\.key), in: decoder.bytes) {
                throw .duplicateKey(twice.diagnostic(in: decoder.bytes), path: decoder.pathText)
            }
            decoder.maps[slot].index = entries
            return entries
        }

        private func find(_ key: Key) throws -> Int? {
            var name = key.stringValue
            return try name.withUTF8 { utf8 throws -> Int? in
                // Fast path: the next entry in written order.
                var current = state
                if current.index == nil, current.remaining.map({ $0 > 0 }) ?? true {
                    if current.valuePending {
                        current.cursor = try decoder.endOfItem(at: current.cursor, depth: depth + 1)
                        current.valuePending = false
                        decoder.maps[slot] = current
                    }
                    var r = decoder.reader(at: current.cursor)
                    let atEnd = current.remaining == nil ? try r.consumeBreak() : false
                    if !atEnd, let key = try keyRange(&r) {
                        if matches(key, utf8) {
                            try noteMatched(key)
                            decoder.maps[slot].cursor = r.position
                            decoder.maps[slot].valuePending = true
                            decoder.maps[slot].remaining = current.remaining.map { $0 - 1 }
                            return r.position
                        }
                    }
                }
                let entries = try buildIndex()
                let n = entries.count
                let start = state.indexCursor
                for step in 0..<n {
                    let i = (start + step) % n
                    if matches(entries[i].key, utf8) {
                        decoder.maps[slot].indexCursor = i + 1
                        return entries[i].value
                    }
                }
                return nil
            }
        }

        private func valueOffset(_ key: Key) throws -> Int {
            guard let offset = try find(key) else {
                throw CBORError.missingKey(key.stringValue, path: decoder.pathText)
            }
            return offset
        }

        var allKeys: [Key] {
            ((try? buildIndex()) ?? []).compactMap { e in
                guard e.key.isText else { return nil }
                return Key(stringValue: e.key.withBytes(in: decoder.bytes) { String(decoding: $0, as: UTF8.self) })
            }
        }

        package func contains(_ key: Key) -> Bool { ((try? find(key)) ?? nil) != nil }

        func decodeNil(forKey key: Key) throws -> Bool {
            let offset = try valueOffset(key)
            let b = try decoder.byte(at: offset)
            return b == 0xf6 || b == 0xf7
        }

        private func primitive<T>(_ key: Key, _ read: (inout CBORReader, CBORDecoding) throws -> T) throws -> T {
            let offset = try valueOffset(key)
            var r = decoder.reader(at: offset)
            do {
                let value = try read(&r, decoder)
                if decoder.maps[slot].valuePending, decoder.maps[slot].cursor == offset {
                    decoder.maps[slot].cursor = r.position
                    decoder.maps[slot].valuePending = false
                }
                return value
            } catch {
                // Only now is the path worth building: read again to report it.
                decoder.codingPath.append(key)
                defer { decoder.codingPath.removeLast() }
                var again = decoder.reader(at: offset)
                return try read(&again, decoder)
            }
        }

        package func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try primitive(key, SingleValue.bool) }
        package func decode(_ type: String.Type, forKey key: Key) throws -> String {
            try primitive(key, SingleValue.string)
        }
        package func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
            try primitive(key, SingleValue.double)
        }
        package func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
            Float(try primitive(key, SingleValue.double))
        }
        package func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
            try primitive(key) { r, d in try SingleValue.integer(&r, d) }
        }
        package func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 {
            try primitive(key) { r, d in try SingleValue.integer(&r, d) }
        }
        package func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 {
            try primitive(key) { r, d in try SingleValue.integer(&r, d) }
        }
        package func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 {
            try primitive(key) { r, d in try SingleValue.integer(&r, d) }
        }
        package func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
            try primitive(key) { r, d in try SingleValue.integer(&r, d) }
        }
        package func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt {
            try primitive(key) { r, d in try SingleValue.integer(&r, d) }
        }
        package func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 {
            try primitive(key) { r, d in try SingleValue.integer(&r, d) }
        }
        package func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 {
            try primitive(key) { r, d in try SingleValue.integer(&r, d) }
        }
        package func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 {
            try primitive(key) { r, d in try SingleValue.integer(&r, d) }
        }
        package func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 {
            try primitive(key) { r, d in try SingleValue.integer(&r, d) }
        }

        package func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            let offset = try valueOffset(key)
            decoder.codingPath.append(key)
            defer { decoder.codingPath.removeLast() }
            return try decoder.decodeValue(T.self, at: offset, depth: depth + 1)
        }

        package func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            guard let offset = try find(key) else { return nil }
            let b = try decoder.byte(at: offset)
            if b == 0xf6 || b == 0xf7 { return nil }
            decoder.codingPath.append(key)
            defer { decoder.codingPath.removeLast() }
            return try decoder.decodeValue(T.self, at: offset, depth: depth + 1)
        }

        func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type, forKey key: Key
        ) throws
            -> KeyedDecodingContainer<NestedKey>
        {
            let offset = try valueOffset(key)
            return KeyedDecodingContainer(try KeyedContainer<NestedKey>(decoder, at: offset, depth: depth + 1))
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try UnkeyedContainer(decoder, at: try valueOffset(key), depth: depth + 1)
        }

        func superDecoder() throws -> any Decoder {
            guard let key = Key(stringValue: "super") else {
                throw CBORError.missingKey("super", path: decoder.pathText)
            }
            return try superDecoder(forKey: key)
        }

        func superDecoder(forKey key: Key) throws -> any Decoder {
            let sub = CBORDecoding(decoder.bytes, userInfo: decoder.info)
            sub.position = try valueOffset(key)
            sub.depth = depth + 1
            sub.codingPath = decoder.codingPath + [key]
            return sub
        }
    }

    // MARK: - Unkeyed

    struct UnkeyedContainer: UnkeyedDecodingContainer {
        package let decoder: CBORDecoding
        package let codingPath: [any CodingKey]
        package let count: Int?
        /// The array's depth; its items are one deeper.
        package let depth: Int
        private let indefinite: Bool
        private let cursor: Cursor
        var currentIndex: Int { cursor.index }
        package var isAtEnd: Bool { cursor.atEnd }

        final class Cursor {
            @exclusivity(unchecked) package var index = 0
            @exclusivity(unchecked) package var position: Int
            var atEnd = false
            init(_ position: Int) { self.position = position }
        }

        init(_ decoder: CBORDecoding, at offset: Int, depth: Int) throws {
            self.decoder = decoder
            self.depth = depth
            try CBORReader.check(depth: depth)
            codingPath = decoder.codingPath
            var r = decoder.reader(at: offset)
            let h = try r.head()
            guard h.major == 4 else { throw decoder.mismatch("an array", h) }
            indefinite = h.isIndefinite
            count = indefinite ? nil : try r.checkedLength(h)
            cursor = Cursor(r.position)
            try refreshEnd()
            if !cursor.atEnd { try CBORReader.check(depth: depth + 1) }
        }

        private func refreshEnd() throws {
            if let count {
                cursor.atEnd = cursor.index >= count
            } else {
                let r = decoder.reader(at: cursor.position)
                cursor.atEnd = try r.peek() == 0xff
            }
        }

        /// The offset of the next element; advances past it.
        private func next() throws -> Int {
            guard !cursor.atEnd else {
                throw CBORError.outOfRange("read past the end of an array", path: decoder.pathText)
            }
            let offset = cursor.position
            cursor.position = try decoder.endOfItem(at: offset, depth: depth + 1)
            cursor.index += 1
            try refreshEnd()
            return offset
        }

        mutating func decodeNil() throws -> Bool {
            guard !cursor.atEnd else { return false }
            let b = try decoder.byte(at: cursor.position)
            guard b == 0xf6 || b == 0xf7 else { return false }
            _ = try next()
            return true
        }

        package mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try decoder.decodeValue(T.self, at: try next(), depth: depth + 1)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type
        ) throws
            -> KeyedDecodingContainer<NestedKey>
        {
            KeyedDecodingContainer(try KeyedContainer<NestedKey>(decoder, at: try next(), depth: depth + 1))
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            try UnkeyedContainer(decoder, at: try next(), depth: depth + 1)
        }

        mutating func superDecoder() throws -> any Decoder {
            let sub = CBORDecoding(decoder.bytes, userInfo: decoder.info)
            sub.position = try next()
            sub.depth = depth + 1
            sub.codingPath = decoder.codingPath
            return sub
        }
    }

    // MARK: - Single values

    package struct SingleValue: SingleValueDecodingContainer {
        package let decoder: CBORDecoding
        package let offset: Int
        /// The item's depth.
        package let depth: Int
        package var codingPath: [any CodingKey] { decoder.codingPath }

        package init(decoder: CBORDecoding, at offset: Int, depth: Int) {
            self.decoder = decoder
            self.offset = offset
            self.depth = depth
        }

        private func read<T>(_ body: (inout CBORReader, CBORDecoding) throws -> T) throws -> T {
            var r = decoder.reader(at: offset)
            return try body(&r, decoder)
        }

        package func decodeNil() -> Bool {
            guard offset < decoder.bytes.count else { return false }
            let b = decoder.bytes[offset]
            return b == 0xf6 || b == 0xf7
        }

        package func decode(_ type: Bool.Type) throws -> Bool { try read(Self.bool) }
        package func decode(_ type: String.Type) throws -> String { try read(Self.string) }
        package func decode(_ type: Double.Type) throws -> Double { try read(Self.double) }
        package func decode(_ type: Float.Type) throws -> Float { Float(try read(Self.double)) }
        package func decode(_ type: Int.Type) throws -> Int { try read { r, d in try Self.integer(&r, d) } }
        package func decode(_ type: Int8.Type) throws -> Int8 { try read { r, d in try Self.integer(&r, d) } }
        package func decode(_ type: Int16.Type) throws -> Int16 { try read { r, d in try Self.integer(&r, d) } }
        package func decode(_ type: Int32.Type) throws -> Int32 { try read { r, d in try Self.integer(&r, d) } }
        package func decode(_ type: Int64.Type) throws -> Int64 { try read { r, d in try Self.integer(&r, d) } }
        package func decode(_ type: UInt.Type) throws -> UInt { try read { r, d in try Self.integer(&r, d) } }
        package func decode(_ type: UInt8.Type) throws -> UInt8 { try read { r, d in try Self.integer(&r, d) } }
        package func decode(_ type: UInt16.Type) throws -> UInt16 { try read { r, d in try Self.integer(&r, d) } }
        package func decode(_ type: UInt32.Type) throws -> UInt32 { try read { r, d in try Self.integer(&r, d) } }
        package func decode(_ type: UInt64.Type) throws -> UInt64 { try read { r, d in try Self.integer(&r, d) } }
        package func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try decoder.decodeValue(T.self, at: offset, depth: depth)
        }

        static func bool(_ r: inout CBORReader, _ d: CBORDecoding) throws -> Bool {
            let h = try r.head()
            guard h.major == 7, h.info == 20 || h.info == 21 else { throw d.mismatch("a bool", h) }
            return h.info == 21
        }

        package static func string(_ r: inout CBORReader, _ d: CBORDecoding) throws -> String {
            let start = r.position
            let h = try r.head()
            guard h.major == 3 else { throw d.mismatch("a text string", h) }
            return try r.wholeText(h, start: start)
        }

        /// The text in `bytes`, or nil if it is not UTF-8. ASCII, the usual
        /// case, takes a copy without the generic validating initialiser,
        /// whose metadata lookups were a tenth of a received message's cost.
        package static func validText(_ bytes: UnsafeRawBufferPointer) -> String? {
            var i = 0
            while i + 8 <= bytes.count {
                guard bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 else {
                    return String(validating: bytes, as: UTF8.self)
                }
                i += 8
            }
            while i < bytes.count {
                guard bytes[i] < 0x80 else { return String(validating: bytes, as: UTF8.self) }
                i += 1
            }
            return String(decoding: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
        }

        static func double(_ r: inout CBORReader, _ d: CBORDecoding) throws -> Double {
            let h = try r.head()
            switch (h.major, h.info) {
            case (7, 25): return HalfFloat.double(fromBits: UInt16(h.argument))
            case (7, 26): return Double(Float(bitPattern: UInt32(h.argument)))
            case (7, 27): return Double(bitPattern: h.argument)
            case (0, _): return Double(h.argument)
            case (1, _): return -1 - Double(h.argument)
            default: throw d.mismatch("a number", h)
            }
        }

        /// Called from closure literals (`{ r, d in try SingleValue.integer(&r, d) }`),
        /// not passed as a function value: inside the containers, which are
        /// generic over an application's coding keys and run unspecialized,
        /// only a call with a concrete integer type gets specialized (passed
        /// as a value, it ran generically: a tenth of a received message).
        static func integer<I: FixedWidthInteger>(_ r: inout CBORReader, _ d: CBORDecoding) throws -> I {
            let h = try r.head()
            switch h.major {
            case 0:
                guard let v = I(exactly: h.argument) else {
                    throw CBORError.outOfRange("\(h.argument) for \(I.self)", path: d.pathText)
                }
                return v
            case 1:
                // -1 - argument, computed without overflow.
                guard I.isSigned, h.argument <= UInt64(Int64.max), let n = I(exactly: -1 - Int64(h.argument)) else {
                    throw CBORError.outOfRange("-1-\(h.argument) for \(I.self)", path: d.pathText)
                }
                return n
            default: throw d.mismatch("an integer", h)
            }
        }
    }
}
