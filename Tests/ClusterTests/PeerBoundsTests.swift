import Foundation
import Glibc
import Oscar
import OscarTestSupport
import Testing

@testable import OscarCluster
@testable import OscarRemote

/// A reply much larger than its ask, to make replies that do not fit a frame
/// or fill a peer's queue quickly.
struct Inflate: Message {
    typealias Reply = String
    var text: String
    var times: Int
}

final class InflateActor: Reactor {
    static func reactions(_ r: inout Reactions<InflateActor>) {
        r.on(Inflate.self, result: { _, m in String(repeating: m.text, count: min(max(m.times, 0), 64)) })
    }
}

/// What a peer controls is bounded: frames before authentication,
/// connections, replies it does not read, and which connection a reply goes to.
@Suite(.serialized, .timeLimit(.minutes(5))) struct PeerBoundsTests {
    static func node(
        _ configure: (inout ClusterNode.Settings) -> Void = { _ in }
    ) throws -> ClusterNode {
        var settings = ClusterNode.Settings(port: 0, secret: "a-long-cluster-secret", loopCount: 2)
        configure(&settings)
        return try ClusterNode(settings: settings) { actors in
            actors.nodeSingleton("ping") { PingActor() }
            actors.nodeSingleton("inflate") { InflateActor() }
        }
    }

    /// An ask frame, built by hand as a client in another language would.
    static func askFrame<M: Message>(_ message: M, to path: String, correlation: UInt64) throws -> [UInt8] {
        var frame: [UInt8] = []
        let payload = try CBOREncoder().encode(message)
        WireEnvelope.append(
            to: &frame, kind: .ask, correlation: correlation, recipient: path, manifest: M.manifest
        ) { $0.append(contentsOf: payload) }
        return frame
    }

    /// The next reply frame's correlation id and decoded value.
    static func readReply<R: Decodable>(_ peer: RawPeer, as: R.Type) throws -> (UInt64, R)? {
        guard let (kind, rest) = peer.readFrame(), kind == .reply else { return nil }
        return try reply(body: [kind.rawValue] + rest, as: R.self)
    }

    /// A frame body's correlation id and decoded value, if it is a reply.
    static func reply<R: Decodable>(body: [UInt8], as: R.Type) throws -> (UInt64, R)? {
        try body.withUnsafeBytes { frame in
            let envelope = try WireEnvelope.parse(frame)
            guard envelope.kind == .reply else { return nil }
            let payload = Array(UnsafeRawBufferPointer(rebasing: frame[envelope.payload]))
            return (envelope.correlation, try CBORDecoder().decode(R.self, from: payload))
        }
    }

    @Test func beforeTheHandshakeOnlySmallFramesAreAccepted() async throws {
        let b = try Self.node()
        defer { b.shutdown() }
        let port = b.address.port
        try await offThePool {
            let peer = try RawPeer(port: port)
            peer.send(Handshake.preamble)
            peer.send([0x00, 0x10, 0x00, 0x00, WireKind.hello.rawValue])  // announces 1 MiB before any proof
            #expect(peer.read(6) == Handshake.preamble)
            #expect(peer.closedByPeer())
        }
        let a = try Self.node()
        defer { a.shutdown() }
        #expect(try await a.system.ref("oscar://127.0.0.1:\(port)/user/ping")!.ask(Ping(n: 3)).n == 3)
    }

    @Test func connectionsOverTheHandshakeLimitAreRefusedCountedAndTheNodeServesOn() async throws {
        let b = try Self.node { $0.maxHandshakingConnections = 4 }
        defer { b.shutdown() }
        let port = b.address.port
        let idle = try await offThePool { () -> [RawPeer] in
            // Each of these is accepted (the node speaks first) and then sits
            // in its handshake, holding a slot.
            let idle = try (0..<4).map { _ in try RawPeer(port: port) }
            for peer in idle { #expect(peer.read(6) == Handshake.preamble) }
            let refused = try RawPeer(port: port)
            #expect(refused.read(6) == nil)  // closed on arrival, before the preamble
            return idle
        }
        #expect(b.stats.value(.connectionsRefused) >= 1)
        withExtendedLifetime(idle) {}  // closed here: their slots free up
        let a = try Self.node()
        defer { a.shutdown() }
        let ping = a.system.ref("oscar://127.0.0.1:\(port)/user/ping")!
        let answered = await eventually(timeout: .seconds(20)) {
            (try? await ping.ask(Ping(n: 9), timeout: .seconds(2)).n) == 9
        }
        #expect(answered)
    }

    @Test func aPeerThatAsksAndStopsReadingIsCutOff() async throws {
        let b = try Self.node { $0.outboundCapacity = 256 << 10 }
        defer { b.shutdown() }
        let port = b.address.port
        let stats = b.stats
        try await offThePool {
            let peer = try RawPeer(port: port, receiveBuffer: 4096)
            #expect(peer.handshake(secret: "a-long-cluster-secret"))
            // 64 KiB replies that this peer never reads: the node must stop
            // holding them at its bound, not grow.
            let ask = try Self.askFrame(
                Inflate(text: String(repeating: "x", count: 1024), times: 64), to: "/user/inflate", correlation: 1)
            let deadline = ContinuousClock.now + .seconds(60)
            while stats.value(.peersCutOff) == 0, ContinuousClock.now < deadline {
                peer.send(ask)
                if peer.sendFailed { break }
            }
        }
        #expect(await eventually(timeout: .seconds(10)) { stats.value(.peersCutOff) == 1 })
        let a = try Self.node()
        defer { a.shutdown() }
        #expect(try await a.system.ref("oscar://127.0.0.1:\(port)/user/ping")!.ask(Ping(n: 4)).n == 4)
    }

    /// A large reply (16 MB) to a peer whose socket is full: the chunk that the
    /// socket takes only part of (its head and pieces go in one writev) is
    /// queued from where the socket stopped, and the reply arrives whole.
    /// The peer acknowledges chunks without reading them, so the node keeps
    /// writing until the socket is full (loopback takes a window's worth
    /// of chunks at once otherwise), then reads it all.
    @Test func aLargeReplyToAPeerWithAFullSocketArrivesWhole() async throws {
        let b = try Self.node()
        defer { b.shutdown() }
        let text = String((0..<250_003).map { Character(UnicodeScalar(UInt8(97 + $0 * 7 % 26))) })
        let replyBytes = 64 * text.utf8.count
        let peer = try RawPeer(port: b.address.port, receiveBuffer: 4096)
        let stats = b.stats
        let chunksOut = { @Sendable in stats.value(.chunksOut) }
        let stalledAt = try await offThePool { () throws -> Int in
            #expect(peer.handshake(secret: "a-long-cluster-secret"))
            peer.send(try Self.askFrame(Inflate(text: text, times: 64), to: "/user/inflate", correlation: 9))
            // Acknowledge every chunk written, until no more come: the
            // node's socket is full, its last write queued. "No more"
            // counts from the first chunk (the reply takes a while to make).
            let clock = ContinuousClock()
            let deadline = clock.now + .seconds(60)
            while chunksOut() == 0, clock.now < deadline { usleep(1000) }  // polling, with a deadline
            var acknowledged = 0
            var lastChange = clock.now
            while clock.now - lastChange < .milliseconds(500), clock.now < deadline {
                let out = chunksOut()
                if out > acknowledged { lastChange = clock.now }
                while acknowledged < out {
                    peer.send(LargeMessageLane.acknowledgement(LargeMessageLane.chunkBytes))
                    acknowledged += 1
                }
                usleep(1000)  // polling the counter, not waiting for an event
            }
            return chunksOut()
        }
        // More than a window went (the acknowledgements worked), and not
        // all of it (the socket filled: the kernel holds a few MiB).
        #expect(stalledAt > LargeMessageLane.window / LargeMessageLane.chunkBytes)
        #expect(stalledAt * LargeMessageLane.chunkBytes < replyBytes, "the socket never filled")
        let reply = try await offThePool { () throws -> (UInt64, String)? in
            var body: [UInt8] = []
            var length = -1
            while length < 0 || body.count < length {
                guard let (kind, rest) = peer.readFrame(), kind == .chunk, rest.count >= 1 else { return nil }
                let first = rest[0] & LargeMessageLane.firstChunk != 0
                let data = first ? rest.dropFirst(5) : rest.dropFirst()
                if first { length = rest[1..<5].reduce(0) { $0 << 8 | Int($1) } }
                body += data
                peer.send(LargeMessageLane.acknowledgement(data.count))
            }
            return try Self.reply(body: body, as: String.self)
        }
        #expect(reply?.0 == 9)
        #expect(reply?.1 == String(repeating: text, count: 64))
    }

    /// The large lane's window in the shell: one chunk unacknowledged
    /// while small frames go to the same node, four otherwise. A window's
    /// chunks are written in the turn that writes the first, so the reply
    /// to a ping sent after the first chunk arrived comes after the rest
    /// of the window. The linger is set so that the machine's speed does
    /// not decide which window applies (60 s: the ping's reply is always
    /// recent; 0: never).
    @Test(arguments: [(60, 1), (0, 4)])
    func chunksLeaveOneAtATimeWhileSmallFramesGoToTheSameNode(lingerSeconds: Int, window: Int) async throws {
        let b = try Self.node { $0.smallTrafficLinger = .seconds(lingerSeconds) }
        defer { b.shutdown() }
        let port = b.address.port
        let text = String(repeating: "w", count: 100_000)
        let (first, second) = try await offThePool { () throws -> ([WireKind], [WireKind]) in
            let peer = try RawPeer(port: port)
            #expect(peer.handshake(secret: "a-long-cluster-secret"))
            /// Sends a ping and returns the kinds of the frames that came
            /// before its reply (nil: the connection ended).
            func framesBeforeThePongTo(_ n: Int) throws -> [WireKind]? {
                peer.send(try Self.askFrame(Ping(n: n), to: "/user/ping", correlation: UInt64(n)))
                var kinds: [WireKind] = []
                while let (kind, rest) = peer.readFrame() {
                    if kind == .reply, rest.count >= 9, rest[1..<9].reduce(UInt64(0), { $0 << 8 | UInt64($1) }) == n {
                        return kinds
                    }
                    kinds.append(kind)
                }
                return nil
            }
            #expect(try framesBeforeThePongTo(1) == [])  // a small frame went to the peer
            peer.send(try Self.askFrame(Inflate(text: text, times: 64), to: "/user/inflate", correlation: 2))
            #expect(peer.readFrame()?.0 == .chunk)
            let first = try #require(try framesBeforeThePongTo(3), "no pong")
            // Acknowledged: the window opens again by as much.
            peer.send(LargeMessageLane.acknowledgement(window * LargeMessageLane.chunkBytes))
            #expect(peer.readFrame()?.0 == .chunk)
            let second = try #require(try framesBeforeThePongTo(4), "no pong")
            return (first, second)
        }
        // The first chunk was read before the ping: the rest of its window.
        #expect(first == Array(repeating: .chunk, count: window - 1))
        #expect(second == Array(repeating: .chunk, count: window - 1))
    }

    /// The outbound bound is full of this node's own tells (here: it has
    /// no room at all): a peer that still reads gets its replies, and is not
    /// cut off for asking.
    @Test func aPeerThatReadsGetsItsRepliesWhenOurTellsFillTheQueue() async throws {
        let b = try Self.node { $0.outboundCapacity = 0 }
        defer { b.shutdown() }
        let port = b.address.port
        try await offThePool {
            let peer = try RawPeer(port: port)
            #expect(peer.handshake(secret: "a-long-cluster-secret"))
            for n in 1...20 {
                peer.send(try Self.askFrame(Ping(n: n), to: "/user/ping", correlation: UInt64(n)))
                let reply = try Self.readReply(peer, as: Pong.self)
                #expect(reply?.0 == UInt64(n) && reply?.1.n == n)
            }
        }
        #expect(b.stats.value(.peersCutOff) == 0)
    }

    @Test func aReplyTooLargeForAMessageFailsThatAskNotTheConnection() async throws {
        let gate = Gate()
        let b = try ClusterNode(
            settings: .init(port: 0, secret: "a-long-cluster-secret", loopCount: 2, maxMessageSize: 64 << 10)
        ) {
            actors in
            actors.nodeSingleton("ping") { PingActor(gate: gate) }
            actors.nodeSingleton("inflate") { InflateActor() }
        }
        let a = try ClusterNode(
            settings: .init(port: 0, secret: "a-long-cluster-secret", loopCount: 2, maxMessageSize: 64 << 10))
        defer { shutDown(a, b) }
        let base = "oscar://127.0.0.1:\(b.address.port)/user"
        // An ask in flight on the same connection, answered only later.
        let slow = Task { try await a.system.ref("\(base)/ping")!.ask(Slow(), timeout: .seconds(30)) }
        #expect(await eventually(timeout: .seconds(10)) { gate.waiting })
        do {
            _ = try await a.system.ref("\(base)/inflate")!.ask(
                Inflate(text: String(repeating: "y", count: 40 * 1024), times: 4), timeout: .seconds(10))
            Issue.record("a 160 KiB reply arrived over a 64 KiB message limit")
        } catch {
            guard case .messageTooLarge(let bytes, let limit) = error else {
                Issue.record("expected messageTooLarge, got \(error)")
                return
            }
            #expect(bytes > 160 * 1024 && limit == 64 << 10)
        }
        gate.open()
        #expect(try await slow.value == 1)  // the connection survived
    }

    /// On either lane: the bulk lane reads past the message and stages a
    /// refusal; the chunks are skipped.
    @Test(arguments: [true, false])
    func aMessageOverTheReceiversMaximumFailsThatAskNotTheConnection(bulkLane: Bool) async throws {
        let b = try Self.node {
            $0.maxMessageSize = 1 << 20
            $0.bulkLane = bulkLane
        }
        // 64 MiB: a sends what b refuses; on the bulk lane once a small
        // message went to b in the last minute.
        let a = try Self.node {
            $0.bulkLane = bulkLane
            $0.bulkLaneAtIdlePriority = false
            $0.bulkStallTimeout = .seconds(30)
            $0.smallTrafficLinger = .seconds(60)
        }
        defer { shutDown(a, b) }
        let inflate = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/inflate")!
        #expect(try await inflate.ask(Inflate(text: "x", times: 1), timeout: .seconds(30)) == "x")
        do {
            _ = try await inflate.ask(
                Inflate(text: String(repeating: "x", count: 2 << 20), times: 1), timeout: .seconds(30))
            Issue.record("a 2 MiB ask arrived over a 1 MiB maximum")
        } catch {
            guard case .messageTooLarge(let bytes, let limit) = error else {
                Issue.record("expected messageTooLarge, got \(error)")
                return
            }
            #expect(bytes > 2 << 20 && limit == 1 << 20)
        }
        // The connection stayed: the next ask goes through at once.
        let small = try await inflate.ask(Inflate(text: "y", times: 3), timeout: .seconds(30))
        #expect(small == "yyy")
        #expect(b.stats.value(bulkLane ? .bulkMessagesIn : .chunksIn) > 0)
        #expect(b.stats.value(bulkLane ? .chunksIn : .bulkMessagesIn) == 0)
    }

    /// Sizes the wire cannot carry (its lengths are 32-bit) count as the
    /// ceiling, 2 GiB: before, `Int.max` trapped when the node derived its
    /// queue bounds from it, and a message over 4 GiB trapped in the
    /// length's conversion instead of failing with `messageTooLarge`.
    @Test func sizeSettingsAboveTheWiresCeilingCountAsTheCeiling() async throws {
        let b = try Self.node {
            $0.maxMessageSize = .max
            $0.maxFrameSize = .max
        }
        let a = try Self.node { $0.maxMessageSize = 5 << 30 }
        defer { shutDown(a, b) }
        for node in [a, b] {
            #expect(node.transport.settings.maxMessageSize == 1 << 31)
            #expect(node.transport.settings.maxMessageSize <= Int(UInt32.max))
            #expect(node.transport.settings.reassemblyCapacity == 4 << 31)
        }
        #expect(b.transport.settings.maxFrameSize == 1 << 31)
        let inflate = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/inflate")!
        let reply = try await inflate.ask(
            Inflate(text: String(repeating: "z", count: 1 << 20), times: 2), timeout: .seconds(30))
        #expect(reply.utf8.count == 2 << 20)
    }

    @Test func twoClientsAdvertisingTheSameAddressEachGetTheirOwnReplies() async throws {
        let b = try Self.node()
        defer { b.shutdown() }
        let port = b.address.port
        try await offThePool {
            // Both claim 127.0.0.1:1; each is its own incarnation (uid).
            let first = try RawPeer(port: port)
            #expect(first.handshake(secret: "a-long-cluster-secret"))
            let second = try RawPeer(port: port)
            #expect(second.handshake(secret: "a-long-cluster-secret"))
            first.send(try Self.askFrame(Ping(n: 1), to: "/user/ping", correlation: 1))
            second.send(try Self.askFrame(Ping(n: 2), to: "/user/ping", correlation: 1))
            let toFirst = try Self.readReply(first, as: Pong.self)
            let toSecond = try Self.readReply(second, as: Pong.self)
            #expect(toFirst?.0 == 1 && toFirst?.1.n == 1)
            #expect(toSecond?.0 == 1 && toSecond?.1.n == 2)
        }
    }

    /// Reads `count` whole frames, or says where the stream stopped making
    /// sense: a frame whose length is absurd means the stream began or went
    /// on in the middle of a frame.
    static func readFrames(_ peer: RawPeer, count: Int, until kind: WireKind? = nil) -> String {
        for n in 0..<count {
            guard let header = peer.read(4) else { return "ended after \(n) frames" }
            let length = header.reduce(0) { $0 << 8 | Int($1) }
            guard length <= 4 << 20 else { return "a length of \(length) after \(n) frames: mid-frame" }
            guard let body = peer.read(length), let first = body.first else { return "cut inside frame \(n)" }
            guard let k = WireKind(rawValue: first) else { return "kind \(first) after \(n) frames: mid-frame" }
            if k == kind { return "\(k)" }
        }
        return "\(count) frames"
    }

    /// A new incarnation's connection starts at a frame boundary, and the
    /// old one carries what was queued for it and then the reply to its ask,
    /// even when more than the hand-over was waiting mid-frame.
    @Test func aNewIncarnationGetsWholeFramesAndTheOldOneItsReply() async throws {
        let b = try Self.node { $0.loopCount = 1 }
        defer { b.shutdown() }
        let port = b.address.port
        let old = try await offThePool { () -> RawPeer in
            let peer = try RawPeer(port: port, receiveBuffer: 16 << 10)
            #expect(peer.handshake(secret: "a-long-cluster-secret"))
            return peer
        }
        // 20 MB of tells to the slow reader, most of them still queued.
        let slowReader = b.system.ref("oscar://127.0.0.1:1/user/sink")!
        let burster = try b.system.spawn("burst") { Burster() }
        _ = try await burster.ask(TellBurst(target: slowReader, count: 20_000, padding: 1_000), timeout: .seconds(30))
        let fresh = try await offThePool { () -> RawPeer in
            let peer = try RawPeer(port: port)
            #expect(peer.handshake(secret: "a-long-cluster-secret"))
            return peer
        }
        fresh.send(try Self.askFrame(Ping(n: 2), to: "/user/ping", correlation: 1))
        #expect(try await offThePool { Self.readFrames(fresh, count: 10, until: .reply) } == "reply")
        old.send(try Self.askFrame(Ping(n: 1), to: "/user/ping", correlation: 77))
        #expect(try await offThePool { Self.readFrames(old, count: 30_000, until: .reply) } == "reply")
    }

    /// Membership, heartbeats and other system traffic take the control
    /// lane: with no room at all for user frames, the cluster still forms
    /// and system asks are answered, while user asks are refused.
    @Test func aFullUserQueueNeverStopsSystemTraffic() async throws {
        let a = try Self.node { $0.outboundCapacity = 0 }
        let b = try Self.node {
            $0.seeds = [a.address]
            $0.outboundCapacity = 0
        }
        defer { shutDown(a, b) }
        let formed = await eventually(timeout: .seconds(30)) {
            let view = try? await a.membership(of: b.address, timeout: .seconds(2))
            return view?.members.filter { $0.status == .up }.count == 2
        }
        #expect(formed)
        do {
            _ = try await a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!.ask(Ping(n: 1))
            Issue.record("a user ask went out with no room for user frames")
        } catch {
            guard case .outboundFull = error else {
                Issue.record("expected outboundFull, got \(error)")
                return
            }
        }
    }
}
