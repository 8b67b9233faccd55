import OscarBase

/// Reads CBOR items from bytes it does not own, checking every length against
/// what is left, so malformed input from the network ends in a `CBORError`
/// and never in a trap or an oversized allocation.
@usableFromInline
package struct CBORReader {
    /// Deepest nesting accepted (docs/PROTOCOL.md, "Payload encoding"). An
    /// item's *depth* is the number of arrays, maps and tags it is inside:
    /// a payload's top item has depth 0, the items and map keys and values
    /// directly in it depth 1, and so on. Chunks of an indefinite-length
    /// string are part of their string, not items of their own. Items of
    /// depth 0 to `maxDepth - 1` are read (128 levels); an item of depth
    /// `maxDepth` is `CBORError.tooDeep`, refused before it is recursed into.
    @usableFromInline static let maxDepth = 128

    /// Throws `tooDeep` for an item at `depth` beyond the limit.
    @inline(__always)
    @inlinable
    package static func check(depth: Int) throws(CBORError) {
        guard depth < maxDepth else { throw .tooDeep(limit: maxDepth) }
    }

    package let bytes: UnsafeRawBufferPointer
    package var position: Int

    package init(_ bytes: UnsafeRawBufferPointer, at position: Int = 0) {
        self.bytes = bytes
        self.position = position
    }

    package var isAtEnd: Bool { position >= bytes.count }

    package struct Head {
        package var major: UInt8
        package var info: UInt8
        /// The head's argument: a value, a length or a count.
        package var argument: UInt64
        package var isIndefinite: Bool { info == 31 }
    }

    @inline(__always)
    package mutating func byte() throws(CBORError) -> UInt8 {
        guard position < bytes.count else { throw .truncated(at: position) }
        defer { position += 1 }
        return bytes[position]
    }

    @inline(__always)
    package mutating func bigEndian(_ count: Int) throws(CBORError) -> UInt64 {
        guard count <= bytes.count - position else { throw .truncated(at: bytes.count) }
        var value: UInt64 = 0
        for i in 0..<count { value = value << 8 | UInt64(bytes[position + i]) }
        position += count
        return value
    }

    package mutating func head() throws(CBORError) -> Head {
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
    package func peek() throws(CBORError) -> UInt8 {
        guard position < bytes.count else { throw .truncated(at: position) }
        return bytes[position]
    }

    /// Consumes a break byte (0xff) if it is next.
    package mutating func consumeBreak() throws(CBORError) -> Bool {
        if try peek() == 0xff {
            position += 1
            return true
        }
        return false
    }

    /// A definite length or count that fits what is left: each byte of a
    /// string, or each item of an array or map, takes at least one byte.
    package func checkedLength(_ head: Head, perItem: Int = 1) throws(CBORError) -> Int {
        let left = UInt64(bytes.count - position)
        guard head.argument <= left / UInt64(perItem) else {
            throw .malformed("declared length \(head.argument) exceeds the \(left) bytes left", at: position)
        }
        return Int(head.argument)
    }

    /// The bytes of a definite-length string whose head was just read.
    package mutating func stringBytes(_ head: Head) throws(CBORError) -> UnsafeRawBufferPointer {
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

    /// Reads a text string (the head was just read, at `start`). Each chunk
    /// of an indefinite-length string must itself be valid UTF-8 (RFC 8949
    /// §3.2.3): a chunk may not end inside a character.
    package mutating func wholeText(_ head: Head, start: Int) throws(CBORError) -> String {
        if !head.isIndefinite {
            guard let text = CBORDecoding.SingleValue.validText(try stringBytes(head)) else {
                throw .malformed("text string is not valid UTF-8", at: start)
            }
            return text
        }
        var joined = ""
        while !(try consumeBreak()) {
            let chunkStart = position
            let chunk = try self.head()
            guard chunk.major == 3, !chunk.isIndefinite else {
                throw .malformed("bad chunk in an indefinite-length string", at: chunkStart)
            }
            guard let text = CBORDecoding.SingleValue.validText(try stringBytes(chunk)) else {
                throw .malformed("a chunk of an indefinite-length text string is not valid UTF-8", at: chunkStart)
            }
            joined += text
        }
        return joined
    }

    /// Steps over one whole item (with everything nested in it), which is
    /// at `depth` (see `maxDepth`).
    package mutating func skipItem(depth: Int) throws(CBORError) {
        try Self.check(depth: depth)
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
