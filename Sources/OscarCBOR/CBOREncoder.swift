import Foundation
import OscarBase

/// Encodes `Encodable` values as CBOR (RFC 8949).
///
/// Keyed containers become maps with text keys, so a reader that does not know
/// a key skips it and an added optional field breaks no older reader. `Data`
/// is a byte string and `Date` is tag 1 (epoch seconds).
///
/// Why it is fast: everything is written into one buffer as it is encoded. A
/// container's head is a placeholder byte, patched with its count when the
/// container closes (inserting bytes only when it has 24 entries or more).
/// That means containers must be filled one after the other, which is what
/// synthesized and ordinary hand-written `Codable` code does.
package struct CBOREncoder: Sendable {
    public init() {}

    public func encode<T: Encodable>(_ value: T) throws(CBORError) -> [UInt8] {
        let encoder = CBOREncoding()
        do {
            try encoder.encodeValue(value)
        } catch let error as CBORError {
            throw error
        } catch {
            throw .invalid("\(error)")
        }
        encoder.closeFrames(downTo: 0)
        return encoder.writer.bytes
    }

    /// Encodes `value` at the end of `buffer`, with no intermediate array: the
    /// transport encodes a message straight into its outbound batch. On
    /// failure `buffer` is left as it was.
    public func encode<T: Encodable>(_ value: T, appendingTo buffer: inout [UInt8]) throws(CBORError) {
        try encode(value, appendingTo: &buffer, using: CBOREncoding(capacity: 0))
    }

    /// As `encode(_:appendingTo:)`, with an encoding object the caller keeps
    /// (a connection keeps one), so a message costs no encoder allocation.
    package func encode<T: Encodable>(
        _ value: T, appendingTo buffer: inout [UInt8], using encoder: CBOREncoding
    )
        throws(CBORError)
    {
        encoder.frames.removeAll(keepingCapacity: true)
        let start = buffer.count
        let splicesBefore = encoder.splices?.count ?? 0
        swap(&encoder.writer.bytes, &buffer)
        defer { swap(&encoder.writer.bytes, &buffer) }
        do {
            try encoder.encodeValue(value)
            encoder.closeFrames(downTo: 0)
        } catch {
            encoder.writer.bytes.removeSubrange(start...)
            encoder.splices?.removeSubrange(splicesBefore...)
            throw (error as? CBORError) ?? .invalid("\(error)")
        }
    }
}

package final class CBOREncoding: Encoder {
    struct Frame {
        package var head: Int
        package var major: UInt8
        package var count: UInt64
    }

    // One encoding, one thread: exclusivity is not checked at run time, which
    // profiling showed costing as much as the encoding itself.
    @exclusivity(unchecked) package var writer: CBORWriter
    @exclusivity(unchecked) var frames: [Frame] = []
    /// Where the value being encoded now begins, to tell a container it
    /// opened from one a sibling left open.
    private var valueStart = -1
    /// Non-nil: a `Data` of `CBORSplice.threshold` bytes or more is not
    /// copied but listed here, in the order of its offsets (see `CBORSplice`).
    package var splices: [CBORSplice]?

    /// `capacity` 0 for an encoding that writes into a buffer it is given
    /// (`encode(_:appendingTo:)`), which then allocates none of its own.
    package init(capacity: Int = 64) { writer = CBORWriter(capacity: capacity) }

    package var codingPath: [any CodingKey] { [] }
    package var userInfo: [CodingUserInfoKey: Any] { [:] }

    package func encodeValue<T: Encodable>(_ value: T) throws {
        if T.self == Data.self {
            let data = value as! Data
            if splices != nil, data.count >= CBORSplice.threshold {
                writer.head(2, UInt64(data.count))
                splices!.append(CBORSplice(offset: writer.bytes.count, data: data))
            } else {
                writer.byteString(data)
            }
        } else if T.self == Date.self {
            writer.head(6, 1)
            writer.double((value as! Date).timeIntervalSince1970)
        } else {
            let depth = frames.count
            let savedStart = valueStart
            valueStart = writer.bytes.count
            try value.encode(to: self)
            closeFrames(downTo: depth)
            valueStart = savedStart
        }
    }

    /// Opens a container for the value being encoded, or returns the one it
    /// already opened (a type may ask for its container twice).
    func openFrame(major: UInt8) -> Int {
        if let last = frames.indices.last, frames[last].head == valueStart, frames[last].major == major {
            return last
        }
        frames.append(Frame(head: writer.bytes.count, major: major, count: 0))
        writer.bytes.append(major << 5)
        return frames.count - 1
    }

    /// Starts the next entry of frame `index`: closes containers a previous
    /// entry left open, and counts the entry.
    @inline(__always)
    func beginEntry(of index: Int) {
        if frames.count > index + 1 { closeFrames(downTo: index + 1) }
        frames[index].count += 1
    }

    func closeFrames(downTo depth: Int) {
        while frames.count > depth {
            let frame = frames.removeLast()
            if frame.count < 24 {
                writer.bytes[frame.head] = frame.major << 5 | UInt8(frame.count)
            } else {
                var head = CBORWriter(capacity: 9)
                head.head(frame.major, frame.count)
                writer.bytes.replaceSubrange(frame.head...frame.head, with: head.bytes)
                // What follows the head moved, spliced bytes' places too.
                if splices != nil {
                    var i = splices!.count - 1
                    while i >= 0, splices![i].offset > frame.head {
                        splices![i].offset += head.bytes.count - 1
                        i -= 1
                    }
                }
            }
        }
    }

    package func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedContainer<Key>(encoder: self, frame: openFrame(major: 5)))
    }

    package func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedContainer(encoder: self, frame: openFrame(major: 4))
    }

    package func singleValueContainer() -> any SingleValueEncodingContainer { SingleValueContainer(encoder: self) }

    // MARK: - Primitives

    @inline(__always) package func write(_ v: Bool) { writer.bool(v) }
    @inline(__always) package func write(_ v: String) { writer.text(v) }
    @inline(__always) package func write(_ v: Double) { writer.double(v) }
    @inline(__always) package func write<I: FixedWidthInteger>(_ v: I) {
        if I.isSigned {
            writer.int(Int64(v))
        } else {
            writer.uint(UInt64(v))
        }
    }

    // MARK: - Containers

    struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        package let encoder: CBOREncoding
        package let frame: Int
        package var codingPath: [any CodingKey] { [] }

        @inline(__always) private func key(_ key: Key) {
            encoder.beginEntry(of: frame)
            encoder.writer.text(key.stringValue)
        }

        func encodeNil(forKey k: Key) throws {
            key(k)
            encoder.writer.null()
        }
        package func encode(_ v: Bool, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: String, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: Double, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: Float, forKey k: Key) throws {
            key(k)
            encoder.write(Double(v))
        }
        package func encode(_ v: Int, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: Int8, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: Int16, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: Int32, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: Int64, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: UInt, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: UInt8, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: UInt16, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: UInt32, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode(_ v: UInt64, forKey k: Key) throws {
            key(k)
            encoder.write(v)
        }
        package func encode<T: Encodable>(_ v: T, forKey k: Key) throws {
            key(k)
            try encoder.encodeValue(v)
        }

        func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type, forKey k: Key
        )
            -> KeyedEncodingContainer<NestedKey>
        {
            key(k)
            encoder.frames.append(Frame(head: encoder.writer.bytes.count, major: 5, count: 0))
            encoder.writer.bytes.append(5 << 5)
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, frame: encoder.frames.count - 1))
        }

        func nestedUnkeyedContainer(forKey k: Key) -> any UnkeyedEncodingContainer {
            key(k)
            encoder.frames.append(Frame(head: encoder.writer.bytes.count, major: 4, count: 0))
            encoder.writer.bytes.append(4 << 5)
            return UnkeyedContainer(encoder: encoder, frame: encoder.frames.count - 1)
        }

        func superEncoder() -> any Encoder {
            key(Key(stringValue: "super")!)
            return encoder
        }

        func superEncoder(forKey k: Key) -> any Encoder {
            key(k)
            return encoder
        }
    }

    struct UnkeyedContainer: UnkeyedEncodingContainer {
        package let encoder: CBOREncoding
        package let frame: Int
        package var codingPath: [any CodingKey] { [] }
        package var count: Int { Int(encoder.frames.indices.contains(frame) ? encoder.frames[frame].count : 0) }

        @inline(__always) private func next() { encoder.beginEntry(of: frame) }

        func encodeNil() throws {
            next()
            encoder.writer.null()
        }
        package func encode(_ v: Bool) throws {
            next()
            encoder.write(v)
        }
        package func encode(_ v: String) throws {
            next()
            encoder.write(v)
        }
        package func encode(_ v: Double) throws {
            next()
            encoder.write(v)
        }
        package func encode(_ v: Float) throws {
            next()
            encoder.write(Double(v))
        }
        package func encode(_ v: Int) throws {
            next()
            encoder.write(v)
        }
        package func encode(_ v: Int64) throws {
            next()
            encoder.write(v)
        }
        package func encode(_ v: UInt64) throws {
            next()
            encoder.write(v)
        }
        package func encode(_ v: UInt8) throws {
            next()
            encoder.write(v)
        }
        package func encode<T: Encodable>(_ v: T) throws {
            next()
            try encoder.encodeValue(v)
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            next()
            encoder.frames.append(Frame(head: encoder.writer.bytes.count, major: 5, count: 0))
            encoder.writer.bytes.append(5 << 5)
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, frame: encoder.frames.count - 1))
        }

        func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            next()
            encoder.frames.append(Frame(head: encoder.writer.bytes.count, major: 4, count: 0))
            encoder.writer.bytes.append(4 << 5)
            return UnkeyedContainer(encoder: encoder, frame: encoder.frames.count - 1)
        }

        func superEncoder() -> any Encoder {
            next()
            return encoder
        }
    }

    struct SingleValueContainer: SingleValueEncodingContainer {
        package let encoder: CBOREncoding
        package var codingPath: [any CodingKey] { [] }

        func encodeNil() throws { encoder.writer.null() }
        package func encode(_ v: Bool) throws { encoder.write(v) }
        package func encode(_ v: String) throws { encoder.write(v) }
        package func encode(_ v: Double) throws { encoder.write(v) }
        package func encode(_ v: Float) throws { encoder.write(Double(v)) }
        package func encode(_ v: Int) throws { encoder.write(v) }
        package func encode(_ v: Int8) throws { encoder.write(v) }
        package func encode(_ v: Int16) throws { encoder.write(v) }
        package func encode(_ v: Int32) throws { encoder.write(v) }
        package func encode(_ v: Int64) throws { encoder.write(v) }
        package func encode(_ v: UInt) throws { encoder.write(v) }
        package func encode(_ v: UInt8) throws { encoder.write(v) }
        package func encode(_ v: UInt16) throws { encoder.write(v) }
        package func encode(_ v: UInt32) throws { encoder.write(v) }
        package func encode(_ v: UInt64) throws { encoder.write(v) }
        package func encode<T: Encodable>(_ v: T) throws { try encoder.encodeValue(v) }
    }
}
