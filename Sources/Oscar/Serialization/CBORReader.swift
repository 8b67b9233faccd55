/// Reads CBOR items from bytes it does not own, checking every length against
/// what is left, so malformed input from the network ends in a `CBORError`
/// and never in a trap or an oversized allocation.
struct CBORReader {
    /// Deepest nesting accepted; deeper input is refused, not recursed into.
    static let maxDepth = 128

    let bytes: UnsafeRawBufferPointer
    var position: Int

    init(_ bytes: UnsafeRawBufferPointer, at position: Int = 0) {
        self.bytes = bytes
        self.position = position
    }

    var isAtEnd: Bool { position >= bytes.count }

    struct Head {
        var major: UInt8
        var info: UInt8
        /// The head's argument: a value, a length or a count.
        var argument: UInt64
        var isIndefinite: Bool { info == 31 }
    }

    @inline(__always)
    mutating func byte() throws(CBORError) -> UInt8 {
        guard position < bytes.count else { throw .truncated(at: position) }
        defer { position += 1 }
        return bytes[position]
    }

    @inline(__always)
    mutating func bigEndian(_ count: Int) throws(CBORError) -> UInt64 {
        guard count <= bytes.count - position else { throw .truncated(at: bytes.count) }
        var value: UInt64 = 0
        for i in 0..<count { value = value << 8 | UInt64(bytes[position + i]) }
        position += count
        return value
    }

    mutating func head() throws(CBORError) -> Head {
        let start = position
        let initial = try byte()
        let major = initial >> 5
        let info = initial & 0x1f
        let argument: UInt64
        switch info {
        case 0..<24: argument = UInt64(info)
        case 24: argument = try bigEndian(1)
        case 25: argument = try bigEndian(2)
        case 26: argument = try bigEndian(4)
        case 27: argument = try bigEndian(8)
        case 31:
            guard major >= 2, major != 6 else {
                throw .malformed("indefinite length on major type \(major)", at: start)
            }
            argument = 0
        default: throw .malformed("reserved additional information \(info)", at: start)
        }
        return Head(major: major, info: info, argument: argument)
    }

    /// The next byte, without consuming it.
    func peek() throws(CBORError) -> UInt8 {
        guard position < bytes.count else { throw .truncated(at: position) }
        return bytes[position]
    }

    /// Consumes a break byte (0xff) if it is next.
    mutating func consumeBreak() throws(CBORError) -> Bool {
        if try peek() == 0xff {
            position += 1
            return true
        }
        return false
    }

    /// A definite length or count that fits what is left: each byte of a
    /// string, or each item of an array or map, takes at least one byte.
    func checkedLength(_ head: Head, perItem: Int = 1) throws(CBORError) -> Int {
        let left = UInt64(bytes.count - position)
        guard head.argument <= left / UInt64(perItem) else {
            throw .malformed("declared length \(head.argument) exceeds the \(left) bytes left", at: position)
        }
        return Int(head.argument)
    }

    /// The bytes of a definite-length string whose head was just read.
    mutating func stringBytes(_ head: Head) throws(CBORError) -> UnsafeRawBufferPointer {
        let count = try checkedLength(head)
        defer { position += count }
        return UnsafeRawBufferPointer(rebasing: bytes[position..<position + count])
    }

    /// Reads a text or byte string, joining indefinite-length chunks.
    mutating func wholeString(_ head: Head) throws(CBORError) -> [UInt8] {
        if !head.isIndefinite { return Array(try stringBytes(head)) }
        var joined: [UInt8] = []
        while !(try consumeBreak()) {
            let chunk = try self.head()
            guard chunk.major == head.major, !chunk.isIndefinite else {
                throw .malformed("bad chunk in an indefinite-length string", at: position)
            }
            joined.append(contentsOf: try stringBytes(chunk))
        }
        return joined
    }

    /// Steps over one whole item (with everything nested in it).
    mutating func skipItem(depth: Int = 0) throws(CBORError) {
        guard depth < Self.maxDepth else { throw .tooDeep(limit: Self.maxDepth) }
        let h = try head()
        switch h.major {
        case 0, 1: break
        case 2, 3:
            if h.isIndefinite {
                _ = try wholeString(h)
            } else {
                position += try checkedLength(h)
            }
        case 4, 5:
            let itemsPerEntry = h.major == 5 ? 2 : 1
            if h.isIndefinite {
                while !(try consumeBreak()) { try skipItem(depth: depth + 1) }
            } else {
                let count = try checkedLength(h, perItem: itemsPerEntry)
                for _ in 0..<count * itemsPerEntry { try skipItem(depth: depth + 1) }
            }
        case 6: try skipItem(depth: depth + 1)
        default:
            if h.isIndefinite { throw .malformed("unexpected break", at: position - 1) }
            if h.info == 24 && h.argument < 32 { throw .malformed("simple value in two bytes below 32", at: position) }
        }
    }
}
