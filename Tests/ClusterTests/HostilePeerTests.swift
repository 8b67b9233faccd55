import Foundation
import Glibc
import Oscar
import OscarDemo
import OscarTestKit
import OscarTestSupport
import Testing

@testable import OscarCluster
@testable import OscarRemote

/// A blocking TCP socket connected to 127.0.0.1:`port`, whose reads give up
/// after `receiveTimeout` seconds; with `receiveBuffer`, the kernel holds at
/// most about that much for it before the sender has to keep the rest.
func loopbackSocket(port: Int, receiveTimeout: Int, receiveBuffer: Int? = nil) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    if var size = receiveBuffer.map(Int32.init) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }
    var address = SocketAddress.ipv4("127.0.0.1", port)!
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard rc == 0 else {
        close(fd)
        throw TransportError.invalidAddress("connect to 127.0.0.1:\(port) failed")
    }
    return fd
}

/// A bare TCP client that speaks the wire protocol by hand, to send what a
/// correct node never would. Blocking, with receive timeouts, on 127.0.0.1.
final class RawPeer: @unchecked Sendable {
    let fd: Int32

    /// Set once a send failed (the peer closed the connection).
    private(set) var sendFailed = false

    init(port: Int, receiveBuffer: Int? = nil) throws {
        fd = try loopbackSocket(port: port, receiveTimeout: 3, receiveBuffer: receiveBuffer)
    }

    /// A connection a `RawListener` accepted.
    init(accepted: Int32) { fd = accepted }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) {
        let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if sent < 0 { sendFailed = true }
    }

    /// Exactly `count` bytes, or nil when the peer closed (or timed out).
    func read(_ count: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, count - got, 0) }
            if n <= 0 { return nil }
            got += n
        }
        return out
    }

    func readFrame() -> (WireKind, [UInt8])? {
        guard let header = read(4) else { return nil }
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard let body = read(length), let kind = WireKind(rawValue: body[0]) else { return nil }
        return (kind, Array(body.dropFirst()))
    }

    /// True once the peer has closed the connection.
    func closedByPeer() -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, 0) == 0
    }

    /// Completes a real handshake as the acceptor, as `node`; true once
    /// the initiator's proof checked out (the accept is sent).
    func acceptHandshake(secret: String, as node: NodeAddress) -> Bool {
        run(Handshake(role: .acceptor, local: node, secret: Array(secret.utf8), nonce: Handshake.randomNonce()))
    }

    /// Completes a real handshake as an initiator with `secret`, as `node`
    /// (a fresh identity by default), for the bulk lane with `bulk`.
    func handshake(
        secret: String, as node: NodeAddress = .local(host: "127.0.0.1", port: 1), bulk: Bool = false
    ) -> Bool {
        run(
            Handshake(
                role: .initiator, local: node, secret: Array(secret.utf8), nonce: Handshake.randomNonce(), bulk: bulk))
    }

    /// Sends the preamble and plays `handshake` against the peer until it is
    /// established (true) or fails.
    private func run(_ handshake: Handshake) -> Bool {
        var h = handshake
        send(Handshake.preamble)
        for case .send(let kind, let payload) in h.onStart() { send(Connection.handshakeFrame(kind, payload)) }
        guard read(6) == Handshake.preamble else { return false }
        while let (kind, payload) = readFrame() {
            for directive in h.onFrame(kind, payload) {
                switch directive {
                case .send(let k, let p): send(Connection.handshakeFrame(k, p))
                case .established: return true
                case .fail: return false
                }
            }
        }
        return false
    }
}

/// A listening socket on 127.0.0.1 that plays a node by hand: it accepts
/// connections as `RawPeer`s. Its accepts give up after 10 s.
final class RawListener: @unchecked Sendable {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    private(set) var port = 0

    init() throws {
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = SocketAddress.ipv4("127.0.0.1", 0)!
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 8) == 0 else { throw TransportError.invalidAddress("listen on 127.0.0.1") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }

    /// The next connection, or nil after 10 s without one.
    func accept() -> RawPeer? {
        let peer = Glibc.accept(fd, nil, nil)
        guard peer >= 0 else { return nil }
        var timeout = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(peer, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return RawPeer(accepted: peer)
    }
}

@Suite(.timeLimit(.minutes(5))) struct HostilePeerTests {
    /// After `attack` against B, a well-behaved node A still gets answers from B.
    func nodeServesOn(after attack: @escaping @Sendable (Int) throws -> Void) async throws {
        let (a, b) = try twoNodes()
        defer { shutDown(a, b) }
        let port = b.address.port
        try await offThePool { try attack(port) }
        let remote = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
        #expect(try await remote.ask(Ping(n: 5)).n == 5)
    }

    @Test func anOversizedFrameClosesOnlyThatConnection() async throws {
        try await nodeServesOn { port in
            let peer = try RawPeer(port: port)
            #expect(peer.handshake(secret: "a-long-cluster-secret"))
            peer.send([0x06, 0x00, 0x00, 0x00, 0x01])  // claims 100 MB, over the 4 MiB maximum
            #expect(peer.closedByPeer())
        }
    }

    @Test func aMalformedFrameClosesOnlyThatConnection() async throws {
        try await nodeServesOn { port in
            let peer = try RawPeer(port: port)
            #expect(peer.handshake(secret: "a-long-cluster-secret"))
            peer.send([0, 0, 0, 4, WireKind.tell.rawValue, 0, 0xff, 0xff])  // recipient runs past the frame
            #expect(peer.closedByPeer())
        }
    }

    @Test func garbageInsteadOfAHandshakeIsRefused() async throws {
        try await nodeServesOn { port in
            let peer = try RawPeer(port: port)
            peer.send(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            #expect(peer.read(6) == Handshake.preamble)  // the node speaks first
            #expect(peer.closedByPeer())
        }
    }

    @Test func aWrongSecretHearsWhyItWasRejected() async throws {
        let b = try node()
        defer { b.shutdown() }
        let port = b.address.port
        let reason = try await offThePool { try Self.rejectionReasonForAWrongSecret(port: port) }
        #expect(reason.contains("secret"))
        #expect(b.stats.value(.authenticationFailures) == 1)
    }

    /// Connects with the wrong secret, sends a wrong proof, and returns the
    /// reason in the node's Reject.
    static func rejectionReasonForAWrongSecret(port: Int) throws -> String {
        let peer = try RawPeer(port: port)
        var h = Handshake(
            role: .initiator, local: .local(host: "127.0.0.1", port: 1), secret: Array("wrong".utf8),
            nonce: Handshake.randomNonce())
        peer.send(Handshake.preamble)
        for case .send(let kind, let payload) in h.onStart() { peer.send(Connection.handshakeFrame(kind, payload)) }
        _ = peer.read(6)
        let challenge = try #require(peer.readFrame())
        // The challenge carries no MAC to test guesses against; our proof,
        // made with the wrong secret, is refused with a reason.
        #expect(challenge.0 == .challenge)
        for case .send(let kind, let payload) in h.onFrame(challenge.0, challenge.1) {
            peer.send(Connection.handshakeFrame(kind, payload))
        }
        let reject = try #require(peer.readFrame())
        #expect(reject.0 == .reject)
        return try CBORDecoder().decode(Handshake.Reject.self, from: reject.1).reason
    }
}
