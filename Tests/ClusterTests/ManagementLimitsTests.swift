import Foundation
import Glibc
import Oscar
import OscarTestSupport
import Testing

/// A management client on a bare socket: blocking, with a receive timeout,
/// so it can hold a connection idle, trickle a request, or send one too big.
final class ManagementClient: @unchecked Sendable {
    let fd: Int32

    /// How a read to the end of the stream ended.
    enum End: Equatable { case closed, reset, timedOut }

    init(port: Int, receiveTimeout seconds: Int = 30) throws {
        fd = try loopbackSocket(port: port, receiveTimeout: seconds)
    }

    deinit { close(fd) }

    /// Sends all of `bytes`; false if the server closed first.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL))
            }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    /// Everything until the server ends the stream, and how it ended.
    func readToEnd() -> (text: String, end: End) {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                out += chunk[..<n]
                continue
            }
            let end: End = n == 0 ? .closed : (errno == EAGAIN || errno == EWOULDBLOCK ? .timedOut : .reset)
            return (String(decoding: out, as: UTF8.self), end)
        }
    }

    /// True while the server has neither sent anything nor closed.
    var quiet: Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) == 0
    }

    /// Waits up to `milliseconds` for something to read (or the end).
    func readable(within milliseconds: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, milliseconds) > 0
    }

    static func status(_ text: String) -> Int { Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0 }

    /// Reads every client until its server ends the stream, all at once,
    /// for at most `timeout` in total: what each received, or nil for one
    /// still open at the end.
    static func readAll(_ clients: [ManagementClient], within timeout: Duration) -> [String?] {
        var received = [[UInt8]](repeating: [], count: clients.count)
        var ended = [Bool](repeating: false, count: clients.count)
        var chunk = [UInt8](repeating: 0, count: 4096)
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while ended.contains(false), clock.now < deadline {
            let waiting = clients.indices.filter { !ended[$0] }
            var fds = waiting.map { pollfd(fd: clients[$0].fd, events: Int16(POLLIN), revents: 0) }
            guard poll(&fds, nfds_t(fds.count), 100) > 0 else { continue }
            for (k, p) in fds.enumerated() where p.revents != 0 {
                let i = waiting[k]
                let n = chunk.withUnsafeMutableBytes { recv(p.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if n > 0 {
                    received[i] += chunk[..<n]
                } else if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
                    ended[i] = true
                }
            }
        }
        return clients.indices.map { ended[$0] ? String(decoding: received[$0], as: UTF8.self) : nil }
    }
}

/// The management endpoint's bounds, from outside: a request timeout, a
/// connection limit and request size limits, over real sockets.
@Suite(.serialized, .timeLimit(.minutes(8))) struct ManagementLimitsTests {
    static func node(_ limits: ManagementLimits = ManagementLimits()) throws -> ClusterNode {
        var settings = ClusterNode.Settings(
            secret: "a-long-cluster-secret", loopCount: 1, membershipTick: .milliseconds(200), httpPort: 0)
        settings.httpLimits = limits
        return try ClusterNode(settings: settings)
    }

    /// `GET /health` on a fresh connection: its status, or 0 without one.
    static func health(port: Int) async throws -> Int {
        try await offThePool {
            let client = try ManagementClient(port: port, receiveTimeout: 10)
            client.send(Array("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            return ManagementClient.status(client.readToEnd().text)
        }
    }

    /// A node whose endpoint answers /health with 200 (the node is up).
    static func healthyNode(_ limits: ManagementLimits = ManagementLimits()) async throws -> (ClusterNode, Int) {
        let node = try node(limits)
        let port = try #require(node.managementPort)
        let up = await eventually(timeout: .seconds(20)) { (try? await health(port: port)) == 200 }
        #expect(up, "the node never reported itself up")
        return (node, port)
    }

    @Test func anIdleConnectionIsAnswered408AndClosedAtTheRequestTimeout() async throws {
        let (node, port) = try await Self.healthyNode(ManagementLimits(requestTimeout: .seconds(1)))
        defer { node.shutdown() }
        let (text, end, elapsed) = try await offThePool {
            let clock = ContinuousClock()
            let start = clock.now
            let client = try ManagementClient(port: port)
            let (text, end) = client.readToEnd()
            return (text, end, clock.now - start)
        }
        #expect(end == .closed, "the server must close an idle connection, not leave it open (\(end))")
        #expect(ManagementClient.status(text) == 408, "\(text)")
        #expect(elapsed >= .milliseconds(900), "closed before its timeout: \(elapsed)")
        #expect(try await Self.health(port: port) == 200)
    }

    /// Bytes arriving do not extend the deadline: a request trickled a byte
    /// at a time (slowloris) is closed at the request timeout all the same.
    @Test func aRequestTrickledAByteAtATimeIsClosedAtTheRequestTimeout() async throws {
        let (node, port) = try await Self.healthyNode(ManagementLimits(requestTimeout: .seconds(1)))
        defer { node.shutdown() }
        let (text, end, elapsed) = try await offThePool {
            let clock = ContinuousClock()
            let start = clock.now
            let client = try ManagementClient(port: port)
            client.send(Array("GET /health HTTP/1.1\r\nX-Slow: ".utf8))
            // One byte every 100 ms (the attack's pace), until the server
            // answers or closes; 20 s is far past the 1 s timeout.
            while clock.now - start < .seconds(20), !client.readable(within: 100) {
                guard client.send([UInt8(ascii: "a")]) else { break }
            }
            let (text, end) = client.readToEnd()
            return (text, end, clock.now - start)
        }
        #expect(end == .closed || end == .reset, "\(end)")
        #expect(elapsed < .seconds(20), "the trickle kept the connection open")
        #expect(text.isEmpty || ManagementClient.status(text) == 408, "\(text)")
    }

    @Test func connectionsOverTheLimitAreRefusedAndHealthAnswersOnceTheyClose() async throws {
        let (node, port) = try await Self.healthyNode(
            ManagementLimits(requestTimeout: .seconds(120), maxConnections: 4))
        defer { node.shutdown() }
        // Four idle connections fill the limit. The server accepts in the
        // order the kernel queued them, so a fifth is the one over it.
        var idle: [ManagementClient] = []
        for _ in 0..<4 { idle.append(try ManagementClient(port: port)) }
        let (text, end) = try await offThePool { try ManagementClient(port: port).readToEnd() }
        #expect(end == .closed, "over the limit: closed at once, not held (\(end))")
        #expect(ManagementClient.status(text) == 503, "\(text)")
        #expect(try await Self.health(port: port) == 503, "no fifth connection while four are open")
        let stillOpen = idle.allSatisfy(\.quiet)
        #expect(stillOpen, "the four within the limit are still open")

        idle.removeAll()  // the clients close them
        #expect(await eventually(timeout: .seconds(20)) { (try? await Self.health(port: port)) == 200 })
    }

    @Test func aHeadOverTheLimitIsRefused431AndOneAtTheLimitIsServed() async throws {
        let limits = ManagementLimits()
        let (node, port) = try await Self.healthyNode(limits)
        defer { node.shutdown() }
        @Sendable func request(headBytes: Int) -> [UInt8] {
            let start = "GET /health HTTP/1.1\r\nX-Pad: "
            let pad = headBytes - start.utf8.count - 4
            return Array((start + String(repeating: "a", count: pad) + "\r\n\r\n").utf8)
        }
        let served = try await offThePool {
            let client = try ManagementClient(port: port)
            client.send(request(headBytes: limits.maxHeaderBytes))
            return client.readToEnd()
        }
        #expect(ManagementClient.status(served.text) == 200, "\(served.text.prefix(80))")
        let refused = try await offThePool {
            let client = try ManagementClient(port: port)
            client.send(request(headBytes: limits.maxHeaderBytes + 1))
            return client.readToEnd()
        }
        #expect(ManagementClient.status(refused.text) == 431, "\(refused.text.prefix(80))")
        #expect(refused.end == .closed, "the refusal is read, then the end: not a reset (\(refused.end))")
        // A head that never ends is refused once it passes the limit, too.
        let endless = try await offThePool {
            let client = try ManagementClient(port: port)
            client.send(Array("GET /health HTTP/1.1\r\n".utf8))
            let line = Array("X-Pad: \(String(repeating: "b", count: 1000))\r\n".utf8)
            while !client.readable(within: 0), client.send(line) {}
            return client.readToEnd()
        }
        #expect(ManagementClient.status(endless.text) == 431, "\(endless.text.prefix(80))")
    }

    @Test func aBodyOverTheLimitIsRefused413AndOneAtTheLimitIsRead() async throws {
        let limits = ManagementLimits()
        let (node, port) = try await Self.healthyNode(limits)
        defer { node.shutdown() }
        @Sendable func post(bodyBytes: Int, sendBody: Bool) throws -> (text: String, end: ManagementClient.End) {
            let client = try ManagementClient(port: port)
            client.send(Array("POST /faults HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(bodyBytes)\r\n\r\n".utf8))
            if sendBody { client.send([UInt8](repeating: UInt8(ascii: " "), count: bodyBytes)) }
            return client.readToEnd()
        }
        // Announced only: refused from the head, before any body is read.
        let announced = try await offThePool { try post(bodyBytes: limits.maxBodyBytes + 1, sendBody: false) }
        #expect(ManagementClient.status(announced.text) == 413, "\(announced.text)")
        #expect(announced.end == .closed)
        // Sent as a client would: the refusal still arrives, then the end.
        let sent = try await offThePool { try post(bodyBytes: limits.maxBodyBytes + 1, sendBody: true) }
        #expect(ManagementClient.status(sent.text) == 413, "\(sent.text)")
        #expect(sent.end == .closed, "\(sent.end)")
        // At the limit the body is read, then judged: it is not signed, so
        // 401, which names the signature (a refusal from the head would not).
        let atLimit = try await offThePool { try post(bodyBytes: limits.maxBodyBytes, sendBody: true) }
        #expect(ManagementClient.status(atLimit.text) == 401, "\(atLimit.text)")
        #expect(atLimit.text.contains("unsigned request"), "\(atLimit.text)")
        #expect(try await Self.health(port: port) == 200)
    }

    /// Bug E: idle connections held the node's descriptors for ever. Now at
    /// most `maxConnections` are held, each for at most the request timeout,
    /// so /health answers on a fresh connection while all 200 are still open
    /// on the client's side.
    @Test func healthAnswersWhileTwoHundredIdleConnectionsAreOpen() async throws {
        let limits = ManagementLimits(requestTimeout: .seconds(5), maxConnections: 64)
        let (node, port) = try await Self.healthyNode(limits)
        defer { node.shutdown() }
        let idle = try await offThePool { try (0..<200).map { _ in try ManagementClient(port: port) } }
        // Every one of them is closed by the server: refused at once (503)
        // or at the request timeout (408).
        let outcomes = try await offThePool {
            ManagementClient.readAll(idle, within: .seconds(60)).map { $0.map(ManagementClient.status) ?? 0 }
        }
        let refused = outcomes.filter { $0 == 503 }.count
        let timedOut = outcomes.filter { $0 == 408 }.count
        #expect(refused + timedOut == 200, "each closed with 503 or 408: \(outcomes)")
        #expect(refused >= 1, "over the limit of 64, some were refused at once")
        #expect(timedOut >= limits.maxConnections, "the limit's worth were held, then timed out")
        #expect(try await Self.health(port: port) == 200)
        withExtendedLifetime(idle) {}
    }
}
