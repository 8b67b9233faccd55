import Foundation
import Oscar
import Testing

@testable import OscarCBOR
@testable import OscarRemote

/// The large-message lane's two halves, driven directly: whatever the sizes,
/// the order of sends and the timing of acknowledgements, the receiver gets
/// every message whole and in order, and the window holds.
@Suite(.timeLimit(.minutes(5))) struct LargeMessageLaneTests {
    /// The frames a lane hands out, cut by their length prefixes; chunk
    /// frames go through a `Reassembly` as a connection's would.
    struct Receiver {
        var reassembly = Reassembly()
        var reserved = 0
        var delivered: [[UInt8]] = []
        var acknowledged = 0

        mutating func take(_ frame: [UInt8]) throws(WireError) {
            let length = frame[0..<4].reduce(0) { $0 << 8 | Int($1) }
            #expect(length == frame.count - 4)
            #expect(frame.count <= 64 << 10, "a frame of \(frame.count) bytes")
            let body = Array(frame[4...])
            guard body[0] == WireKind.chunk.rawValue else { return delivered.append(body) }
            let first = body[1] & LargeMessageLane.firstChunk != 0
            var reservedNow = reserved
            let outcome = try body.withUnsafeBytes { bytes in
                Result { () throws(WireError) in
                    try reassembly.receive(
                        UnsafeRawBufferPointer(rebasing: bytes[2...]), first: first, maxMessageSize: 64 << 20
                    ) {
                        reservedNow += $0; return true
                    }
                }
            }.get()
            reserved = reservedNow
            acknowledged += body.count - 2 - (first ? 4 : 0)
            if case .whole(let whole) = outcome {
                reserved -= whole.count
                delivered.append(Array(whole.bytes))
            }
        }
    }

    @Test func messagesArriveWholeAndInOrderWhateverTheAcknowledgementTimingAndBufferOffset() throws {
        for seed in UInt64(1)...100 {
            var random = SplitMix64(seed: seed)
            var lane = LargeMessageLane()
            var receiver = Receiver()
            var sent: [[UInt8]] = []
            var acknowledgedToLane = 0
            let count = Int.random(in: 1...8, using: &random)
            for n in 0..<count {
                // Small (sent whole), exactly one chunk, or several.
                let size = [
                    Int.random(in: 1...100, using: &random), LargeMessageLane.chunkBytes,
                    Int.random(in: LargeMessageLane.chunkBytes + 1...5 * LargeMessageLane.chunkBytes, using: &random),
                ][Int.random(in: 0...2, using: &random)]
                var body = [WireKind.tell.rawValue, 0]
                body += (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ n) }
                // Handed over in the buffer it was encoded into, behind other
                // frames (junk here), or alone.
                let ahead = [0, Int.random(in: 1...300, using: &random)][Int.random(in: 0...1, using: &random)]
                // Some of a large body's bytes stay out of the buffer, spliced
                // in from their own storage (as a large `Data` is).
                var buffer = [UInt8](repeating: 0xEE, count: ahead)
                var splices: [CBORSplice] = []
                var cut = 0
                if body.count > LargeMessageLane.chunkBytes, Bool.random(using: &random) {
                    for _ in 0..<Int.random(in: 1...3, using: &random) where cut < body.count {
                        let from = Int.random(in: cut...body.count, using: &random)
                        let to = Int.random(in: from...body.count, using: &random)
                        buffer += body[cut..<from]
                        // Sometimes a slice of a larger `Data`, whose indices do not start at 0.
                        let skip = Int.random(in: 0...2, using: &random) * 17
                        let data = Data(repeating: 0xDD, count: skip) + Data(body[from..<to])
                        splices.append(CBORSplice(offset: buffer.count, data: data[(data.startIndex + skip)...]))
                        cut = to
                    }
                }
                buffer += body[cut...]
                lane.enqueue(
                    buffer, bodyStart: ahead, splices: splices, recipient: "/user/a",
                    whole: body.count <= LargeMessageLane.chunkBytes)
                sent.append(body)
            }
            #expect(lane.holds(recipient: "/user/a"))
            var rounds = 0
            while !lane.isEmpty || acknowledgedToLane < receiver.acknowledged {
                rounds += 1
                #expect(rounds < 10_000, "seed \(seed): the lane stalled")
                if rounds >= 10_000 { break }
                // The association switches windows as small traffic comes and goes.
                let window =
                    Bool.random(using: &random) ? LargeMessageLane.window : LargeMessageLane.windowBesideSmallFrames
                let before = lane.unacknowledged
                if Bool.random(using: &random), let frame = lane.nextFrame(window: window)?.bytes {
                    try receiver.take(frame)
                    if frame[4] == WireKind.chunk.rawValue { #expect(before < window, "seed \(seed)") }
                } else if acknowledgedToLane < receiver.acknowledged {
                    // Acknowledgements come late and in pieces.
                    let part = Int.random(in: 1...(receiver.acknowledged - acknowledgedToLane), using: &random)
                    lane.acknowledged(part)
                    acknowledgedToLane += part
                }
            }
            #expect(receiver.delivered == sent, "seed \(seed)")
            #expect(receiver.reserved == 0)
            #expect(lane.queuedBytes == 0 && lane.unacknowledged == 0)
            #expect(!lane.holds(recipient: "/user/a"))
        }
    }

    /// A chunk goes to the socket as one writev of its pieces; what the
    /// socket does not take is queued, and must be exactly the rest.
    @Test func whatTheSocketLeavesOfAGatheredWriteIsTheRestInOrder() {
        for seed in 1...200 {
            var random = SplitMix64(seed: UInt64(seed))
            let pieces = (0..<Int.random(in: 1...5, using: &random)).map { _ in
                (0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            }
            let all = pieces.flatMap { $0 }
            let taken = Int.random(in: 0...all.count, using: &random)
            let rest = Self.withBuffers(pieces) { buffers in
                Connection.unwritten(buffers, after: taken).flatMap { Array($0) }
            }
            #expect(rest == Array(all[taken...]), "seed \(seed)")
        }
    }

    /// Calls `body` with each array's bytes borrowed.
    static func withBuffers<R>(
        _ arrays: ArraySlice<[UInt8]>, _ buffers: [UnsafeRawBufferPointer] = [],
        _ body: ([UnsafeRawBufferPointer]) -> R
    ) -> R {
        guard let first = arrays.first else { return body(buffers) }
        return first.withUnsafeBytes { withBuffers(arrays.dropFirst(), buffers + [$0], body) }
    }

    static func withBuffers<R>(_ arrays: [[UInt8]], _ body: ([UnsafeRawBufferPointer]) -> R) -> R {
        withBuffers(arrays[...], [], body)
    }

    @Test func aFullWindowStopsChunksButNotTheLaneState() {
        var lane = LargeMessageLane()
        lane.enqueue([UInt8](repeating: 7, count: 10 * LargeMessageLane.chunkBytes), recipient: nil, whole: false)
        var frames = 0
        while lane.nextFrame() != nil { frames += 1 }
        #expect(frames == LargeMessageLane.window / LargeMessageLane.chunkBytes)
        lane.acknowledged(LargeMessageLane.chunkBytes)
        #expect(lane.nextFrame() != nil)
        #expect(lane.nextFrame() == nil)
        // Beside small frames, one chunk at a time.
        #expect(lane.nextFrame(window: LargeMessageLane.windowBesideSmallFrames) == nil)
        lane.acknowledged(LargeMessageLane.window)
        #expect(lane.nextFrame(window: LargeMessageLane.windowBesideSmallFrames) != nil)
        #expect(lane.nextFrame(window: LargeMessageLane.windowBesideSmallFrames) == nil)
        #expect(lane.nextFrame() != nil)
        // A new connection: the message starts again from its first chunk.
        lane.restart()
        let first = lane.nextFrame()?.bytes
        #expect(first.map { $0[5] & LargeMessageLane.firstChunk != 0 } == true)
    }

    @Test func reassemblyRefusesWhatDoesNotAddUpWithoutTrapping() throws {
        func whole(_ bytes: [UInt8]) -> Reassembly.Outcome {
            let buffer = LendableBuffer(capacity: bytes.count)
            bytes.withUnsafeBytes { buffer.append($0) }
            return .whole(buffer)
        }
        func chunk(_ first: Bool, length: Int? = nil, data: Int) -> [UInt8] {
            var bytes: [UInt8] = []
            if let length { LargeMessageLane.appendUInt32(UInt32(length), to: &bytes) }
            return bytes + [UInt8](repeating: 1, count: data)
        }
        func feed(
            _ chunks: [(Bool, [UInt8])], max: Int = 1 << 20, room: Int = 1 << 30
        ) -> Result<Reassembly.Outcome?, WireError> {
            var r = Reassembly()
            var last: Reassembly.Outcome? = nil
            for (first, bytes) in chunks {
                let outcome = bytes.withUnsafeBytes { b in
                    Result { () throws(WireError) in try r.receive(b, first: first, maxMessageSize: max) { $0 <= room }
                    }
                }
                switch outcome {
                case .success(let whole): last = whole
                case .failure(let error): return .failure(error)
                }
            }
            return .success(last)
        }
        // A continuation with no message, a first chunk without its length,
        // a second first chunk, too many bytes, a declared length over the
        // node's room: each a typed error.
        #expect(throws: WireError.self) { try feed([(false, chunk(false, data: 10))]).get() }
        #expect(throws: WireError.self) { try feed([(true, [0, 0])]).get() }
        #expect(throws: WireError.self) {
            try feed([(true, chunk(true, length: 100, data: 10)), (true, chunk(true, length: 100, data: 10))]).get()
        }
        #expect(throws: WireError.self) {
            try feed([(true, chunk(true, length: 100, data: 60)), (false, chunk(false, data: 60))]).get()
        }
        // Over the maximum: that message is refused and its chunks skipped,
        // and the next message is reassembled.
        #expect(
            try feed([(true, chunk(true, length: 2 << 20, data: 12))]).get()
                == .refused(length: 2 << 20, head: [UInt8](repeating: 1, count: 10)))
        #expect(
            try feed([
                (true, chunk(true, length: 2 << 20, data: 3)), (false, chunk(false, data: 50)),
                (true, chunk(true, length: 20, data: 20)),
            ]).get() == whole([UInt8](repeating: 1, count: 20)))
        #expect(throws: WireError.reassemblyFull(5000)) {
            try feed([(true, chunk(true, length: 5000, data: 1))], room: 4096).get()
        }
        #expect(
            try feed([(true, chunk(true, length: 100, data: 60)), (false, chunk(false, data: 40))]).get()
                == whole([UInt8](repeating: 1, count: 100)))
        // Random bytes as chunks never trap.
        var random = SplitMix64(seed: 7)
        for _ in 0..<2000 {
            let chunks = (0..<Int.random(in: 1...4, using: &random)).map { _ in
                (
                    Bool.random(using: &random),
                    (0..<Int.random(in: 0...12, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                )
            }
            _ = feed(chunks, max: 1 << 16)
        }
    }
}

/// The tests compare outcomes; two whole messages are equal when their bytes are.
extension Reassembly.Outcome: Equatable {
    public static func == (a: Self, b: Self) -> Bool {
        switch (a, b) {
        case (.partial, .partial): true
        case (.whole(let x), .whole(let y)): x.bytes.elementsEqual(y.bytes)
        case (.refused(let l, let h), .refused(let m, let i)): l == m && h == i
        default: false
        }
    }
}
