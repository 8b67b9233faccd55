import Foundation
import Glibc
import Oscar
import OscarTestSupport
import Synchronization
import Testing

@testable import OscarCluster
@testable import OscarRemote

/// A numbered message, with padding that makes some of them large.
struct PaddedNumber: Message {
    var number: Int
    var padding: Data
}

struct ReceivedNumbers: Message {
    typealias Reply = [Int]
}

/// Keeps the numbers it was told, in the order they arrived.
final class NumberRecorder: Reactor {
    private var numbers: [Int] = []

    static func reactions(_ r: inout Reactions<NumberRecorder>) {
        r.on(PaddedNumber.self, do: { me, m in me.numbers.append(m.number) })
        r.on(ReceivedNumbers.self, result: { me, _ in me.numbers })
    }
}

/// The bulk lane (see `BulkLane`): large messages on a second connection,
/// delivered in their place among the sender's frames, with what a peer
/// sends on it held to the node's bounds.
@Suite(.serialized, .timeLimit(.minutes(5))) struct BulkLaneTests {
    static let secret = "a-long-cluster-secret"

    /// A node on the bulk lane, its threads at normal priority (these tests
    /// check behaviour; `SCHED_IDLE` is for the benchmarks), that keeps a
    /// message on the lane however slowly it moves (30 s), unless
    /// `configure` says otherwise.
    static func node(_ configure: (inout ClusterNode.Settings) -> Void = { _ in }) throws -> ClusterNode {
        var settings = ClusterNode.Settings(port: 0, secret: secret, loopCount: 2)
        settings.bulkLane = true
        settings.bulkLaneAtIdlePriority = false
        settings.bulkStallTimeout = .seconds(30)
        configure(&settings)
        return try ClusterNode(settings: settings) { actors in
            actors.nodeSingleton("inflate") { InflateActor() }
            actors.nodeSingleton("recorder") { NumberRecorder() }
        }
    }

    /// Tells from one sender to one actor arrive in the order sent, whatever
    /// mix of small and large messages they are: a search over random mixes
    /// (sizes from 0 bytes to 3 MiB). The first is small, so with the bulk
    /// lane and a linger of a minute every large one takes it; without the
    /// lane, chunks.
    @Test(arguments: [1, 2, 3, 4] as [UInt64], [true, false])
    func tellsOfEverySizeArriveInTheOrderSent(seed: UInt64, bulkLane: Bool) async throws {
        let b = try Self.node()
        let a = try Self.node {
            $0.bulkLane = bulkLane
            $0.smallTrafficLinger = .seconds(60)
        }
        defer { stopAll(a, b) }
        var random = SplitMix64(seed: seed)
        let recorder = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/recorder")!
        let count = 60
        var large = 0
        for number in 0..<count {
            let isLarge = number > 0 && random.next() % 10 < 3
            let size = isLarge ? 70_000 + Int(random.next() % UInt64(3 << 20)) : Int(random.next() % 100)
            if isLarge { large += 1 }
            recorder.tell(PaddedNumber(number: number, padding: Data(repeating: UInt8(number & 0xff), count: size)))
        }
        // The ask goes to the same actor, so it arrives after every tell.
        let numbers = try await recorder.ask(ReceivedNumbers(), timeout: .seconds(120))
        #expect(numbers == Array(0..<count), "seed \(seed): \(large) large messages")
        #expect(a.stats.value(.bulkMessagesOut) == (bulkLane ? large : 0))
        #expect(a.stats.value(.bulkFallbacks) == 0)
        #expect(b.stats.value(.bulkMessagesIn) == (bulkLane ? large : 0))
        #expect((a.stats.value(.chunksOut) >= large) == !bulkLane)
        // Each message gave back the room it took in B's reassembly bound
        // before it was delivered (the lane once took it twice: 16 messages
        // of 16 MiB filled the bound).
        #expect(b.transport.reassemblyInUse == 0)
        #expect(b.transport.staged.count == 0)
    }

    /// A raw peer with one identity on both of its connections: the main
    /// one and a bulk one.
    static func rawPeers(port: Int) throws -> (main: RawPeer, bulk: RawPeer, node: NodeAddress) {
        let node = NodeAddress.local(host: "127.0.0.1", port: 1)
        let main = try RawPeer(port: port)
        let bulk = try RawPeer(port: port)
        try #require(main.handshake(secret: secret, as: node))
        try #require(bulk.handshake(secret: secret, as: node, bulk: true))
        return (main, bulk, node)
    }

    /// A message that came on the bulk lane waits for its commit: an ask
    /// sent after it on the main connection is answered first, and the
    /// commit delivers it. A commit for a message that never came does
    /// nothing, and the connection goes on.
    @Test func aBulkMessageIsDeliveredByItsCommitNotBefore() async throws {
        let b = try Self.node()
        defer { b.shutdown() }
        let (main, bulk, _) = try Self.rawPeers(port: b.address.port)
        // Its reply is empty (times: 0): small, on the main connection.
        let large = try PeerBoundsTests.askFrame(
            Inflate(text: String(repeating: "l", count: 100_000), times: 0), to: "/user/inflate", correlation: 1)
        bulk.send(BulkLane.header(id: 7, length: large.count - 4) + large.dropFirst(4))
        #expect(bulk.read(8).map { BulkLane.readUInt64($0) } == 7)  // staged

        main.send(try PeerBoundsTests.askFrame(Inflate(text: "s", times: 2), to: "/user/inflate", correlation: 2))
        let first = try #require(try PeerBoundsTests.readReply(main, as: String.self))
        #expect(first.0 == 2 && first.1 == "ss")

        main.send(BulkLane.commitFrame(3))  // nothing staged under it (ids only grow)
        main.send(BulkLane.commitFrame(7))
        let second = try #require(try PeerBoundsTests.readReply(main, as: String.self))
        #expect(second.0 == 1 && second.1 == "")
        #expect(b.stats.value(.bulkMessagesIn) == 1)
        #expect(b.transport.staged.count == 0)
    }

    /// A message over the node's maximum is read past, not kept: its
    /// commit answers the ask with `messageTooLarge`. A header that
    /// declares nothing closes the bulk connection and only it.
    @Test func whatAPeerSendsOnTheBulkLaneIsHeldToTheNodesBounds() async throws {
        let b = try Self.node { $0.maxMessageSize = 1 << 20 }
        defer { b.shutdown() }
        let (main, bulk, _) = try Self.rawPeers(port: b.address.port)
        let over = try PeerBoundsTests.askFrame(
            Inflate(text: String(repeating: "o", count: 2 << 20), times: 1), to: "/user/inflate", correlation: 5)
        bulk.send(BulkLane.header(id: 1, length: over.count - 4) + over.dropFirst(4))
        #expect(bulk.read(8).map { BulkLane.readUInt64($0) } == 1)
        main.send(BulkLane.commitFrame(1))
        let (kind, rest) = try #require(main.readFrame())
        #expect(kind == .failure)
        let failure = [kind.rawValue] + rest
        let error = try failure.withUnsafeBytes { frame in
            let envelope = try WireEnvelope.parse(frame)
            #expect(envelope.correlation == 5)
            return try CBORDecoder().decode(
                AskError.self, from: Array(UnsafeRawBufferPointer(rebasing: frame[envelope.payload])))
        }
        guard case .messageTooLarge(_, let limit) = error else {
            Issue.record("expected messageTooLarge, got \(error)")
            return
        }
        #expect(limit == 1 << 20)

        bulk.send(BulkLane.header(id: 2, length: 0))
        #expect(bulk.closedByPeer())
        main.send(try PeerBoundsTests.askFrame(Inflate(text: "k", times: 3), to: "/user/inflate", correlation: 6))
        let reply = try #require(try PeerBoundsTests.readReply(main, as: String.self))
        #expect(reply.0 == 6 && reply.1 == "kkk")
    }

    /// A bulk lane that makes no progress (here a receiver that takes the
    /// connection and never reads; on a busy machine, threads at
    /// `SCHED_IDLE` that find no free core) does not hold the message: it
    /// starts again in chunks on the main connection and arrives whole.
    @Test func aMessageOnABulkLaneThatStallsGoesInChunksInstead() async throws {
        let a = try Self.node {
            $0.smallTrafficLinger = .seconds(60)
            $0.bulkStallTimeout = .milliseconds(500)
        }
        defer { a.shutdown() }
        let listener = try RawListener()
        let b = NodeAddress.local(host: "127.0.0.1", port: listener.port)
        let target = a.system.ref("oscar://127.0.0.1:\(listener.port)/user/recorder")!
        target.tell(PaddedNumber(number: 0, padding: Data()))  // small: the bulk lane from now on
        let size = 3 << 20
        target.tell(PaddedNumber(number: 1, padding: Data(repeating: 7, count: size)))
        let (main, bulk) = try await offThePool { () -> (RawPeer?, RawPeer?) in
            guard let main = listener.accept(), main.acceptHandshake(secret: Self.secret, as: b) else {
                return (nil, nil)
            }
            guard let bulk = listener.accept(), bulk.acceptHandshake(secret: Self.secret, as: b) else {
                return (main, nil)
            }
            return (main, bulk)
        }
        let mainPeer = try #require(main)
        _ = try #require(bulk)  // accepted, authenticated, never read
        // The small tell, then the large one in chunks, each acknowledged.
        let (chunked, kinds) = try await offThePool { () -> (Int, [WireKind]) in
            var chunked = 0
            var kinds: [WireKind] = []
            while chunked < size, let (kind, rest) = mainPeer.readFrame() {
                kinds.append(kind)
                guard kind == .chunk else { continue }
                let count = rest.count - 1 - (rest[0] & LargeMessageLane.firstChunk != 0 ? 4 : 0)
                chunked += count
                mainPeer.send(LargeMessageLane.acknowledgement(count))
            }
            return (chunked, kinds)
        }
        #expect(kinds.first == .tell)
        #expect(chunked > size, "\(chunked) bytes of chunks for a \(size)-byte payload")
        #expect(a.stats.value(.bulkMessagesOut) == 0)
        #expect(a.stats.value(.bulkFallbacks) == 1)
    }

    /// Tells five numbers, every other one large, from `a` to the recorder
    /// of the node at `port`, and checks they all arrived in order, the
    /// large ones in chunks.
    static func fiveInOrderInChunks(from a: ClusterNode, to port: Int) async throws {
        let recorder = a.system.ref("oscar://127.0.0.1:\(port)/user/recorder")!
        for number in 0..<5 {
            let size = number % 2 == 1 ? 200_000 : 10
            recorder.tell(PaddedNumber(number: number, padding: Data(repeating: 1, count: size)))
        }
        #expect(try await recorder.ask(ReceivedNumbers(), timeout: .seconds(60)) == Array(0..<5))
        #expect(a.stats.value(.bulkMessagesOut) == 0)
        #expect(a.stats.value(.chunksOut) >= 8)
    }

    /// A node that did not opt in refuses bulk connections in the
    /// handshake; its peer sends its large messages in chunks, in order.
    @Test func aNodeWithoutTheLaneGetsChunks() async throws {
        let b = try Self.node { $0.bulkLane = false }
        let a = try Self.node { $0.smallTrafficLinger = .seconds(60) }
        defer { stopAll(a, b) }
        try await Self.fiveInOrderInChunks(from: a, to: b.address.port)
    }

    /// A bulk connection that ends after its handshake (here refused by a
    /// receiver that has as many bulk connections as it takes) loses
    /// nothing: each message starts again in chunks, in its place.
    @Test func aBulkConnectionRefusedAfterItsHandshakeLosesNothing() async throws {
        let b = try Self.node { $0.maxInboundConnections = 2 }
        let a = try Self.node { $0.smallTrafficLinger = .seconds(60) }
        defer { stopAll(a, b) }
        let port = b.address.port
        // Two bulk connections from raw peers take b's two places.
        let holders = try await offThePool { () -> [RawPeer] in
            try (0..<2).map { _ in
                let peer = try RawPeer(port: port)
                #expect(peer.handshake(secret: Self.secret, bulk: true))
                return peer
            }
        }
        try await Self.fiveInOrderInChunks(from: a, to: port)
        #expect(a.stats.value(.bulkFallbacks) >= 1)
        withExtendedLifetime(holders) {}
    }

    /// Bytes cross a socket whole and in order through a copier, both ways,
    /// and its thread runs at normal priority when not asked to be idle.
    /// (That a node's copiers, and only they, run at `SCHED_IDLE` is
    /// checked on a node process, in `LargeMessageTests`: with an idle
    /// thread in this process, two unrelated asks waited 30 s in three full
    /// runs of six, for a reason not found.) The blocking calls run off
    /// Swift's pool.
    @Test func aCopierCopiesWholeBothWays() async throws {
        /// The scheduling policy (field 41 of `stat`) of thread `id`.
        @Sendable func policy(_ id: Int32) -> Int? {
            guard let stat = try? String(contentsOfFile: "/proc/self/task/\(id)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 38 ? Int(fields[38]) : nil
        }
        var fds: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        let socket = BulkSocket(fd: fds[0], timeout: .seconds(60))
        let peer = BulkSocket(fd: fds[1], timeout: .seconds(60))
        let copier = try #require(BulkCopier.take(idle: false))
        defer { copier.park() }
        let pattern = (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 13) }
        let (received, echoed) = try await offThePool { () throws -> ([UInt8], [UInt8]?) in
            let written = DispatchSemaphore(value: 0)
            Thread {
                try? peer.write(pattern)
                written.signal()
            }.start()
            var received = [UInt8](repeating: 0, count: pattern.count)
            try received.withUnsafeMutableBytes { try socket.read(into: $0, on: copier) }
            written.wait()
            let echoed = Mutex<[UInt8]?>(nil)
            let read = DispatchSemaphore(value: 0)
            Thread {
                echoed.withLock { $0 = try? peer.read(pattern.count) }
                read.signal()
            }.start()
            try pattern.withUnsafeBytes { try socket.write([$0], on: copier) }
            read.wait()
            return (received, echoed.withLock { $0 })
        }
        #expect(received == pattern)
        #expect(echoed == pattern)
        #expect(socket.written.load(ordering: .relaxed) == pattern.count)
        #expect(policy(copier.threadID.load(ordering: .acquiring)) == Int(SCHED_OTHER))
    }

    /// Staged messages are bounded in time and by their sender: a commit
    /// drops its sender's older ones once they are 10 s old (their commits
    /// went on a lost connection), any older than the expiry goes, and an
    /// id staged twice keeps the second; each gives its reassembly bytes
    /// back once.
    @Test func stagedMessagesGoWithALaterCommitOrTheirExpiry() {
        let released = Mutex(0)
        let staged = StagedMessages(release: { bytes in released.withLock { $0 += bytes } })
        func body(_ count: Int) -> StagedMessages.Staged {
            let buffer = LendableBuffer(capacity: count)
            buffer.append(count) { $0.initializeMemory(as: UInt8.self, repeating: 1) }
            return .whole(buffer)
        }
        let start = ContinuousClock.now
        staged.stage(body(10), from: 1, id: 1, now: start)
        staged.stage(body(20), from: 1, id: 2, now: start)
        staged.stage(body(40), from: 2, id: 1, now: start)
        staged.stage(body(80), from: 1, id: 3, now: start)
        guard case .whole(let third) = staged.take(from: 1, id: 3, now: start) else {
            Issue.record("message 3 was not staged")
            return
        }
        #expect(third.count == 80)
        #expect(released.withLock { $0 } == 0)  // 1 and 2 are recent: a commit may still come
        if case .some = staged.take(from: 1, id: 4, now: start + .seconds(11)) { Issue.record("4 was never staged") }
        #expect(released.withLock { $0 } == 30)  // now 1 and 2 of the same sender go
        staged.stage(body(5), from: 2, id: 1, now: start)  // the same id again
        #expect(released.withLock { $0 } == 70)
        #expect(staged.count == 1)
        staged.stage(body(1), from: 3, id: 1, now: start + StagedMessages.expiry + .seconds(1))
        #expect(released.withLock { $0 } == 75)  // sender 2's expired
        #expect(staged.count == 1)
    }
}

private func stopAll(_ nodes: ClusterNode...) { for node in nodes { node.shutdown() } }
