import CLibUV
import OscarBase
import OscarRuntime

/// What a `StreamServer` tells the protocol above it, on its loop (handed
/// to the loop at `start`, hence `Sendable`).
package protocol StreamServerDelegate: AnyObject, Sendable {
    /// A client connected; `connection` reads once this returns, so this is
    /// where its handler is set and its deadline armed.
    func accepted(_ connection: StreamConnection)
    /// A client was turned away at the connection limit (after the refusal
    /// bytes, if the socket took them at once).
    func refused()
}

/// TLS for a `StreamServer`: every client must speak it. The client's
/// certificate is optional (verified against the CA when presented), so a
/// client without one (a health probe) can still connect; what it may then
/// do is the protocol's decision (`StreamConnection.peerCertificate`).
package struct StreamTLS: Sendable {
    /// The credentials for the next connection, read at its first byte, so
    /// a reload applies to new connections only.
    package var credentials: @Sendable () -> TLSCredentials?
    /// Sent in plaintext to a client that does not start with a TLS
    /// handshake, before its connection closes.
    package var plaintextRefusal: [UInt8]

    package init(credentials: @escaping @Sendable () -> TLSCredentials?, plaintextRefusal: [UInt8]) {
        self.credentials = credentials
        self.plaintextRefusal = plaintextRefusal
    }
}

/// A TCP server of byte streams (plain or TLS) on one loop, for protocols beside
/// the node-to-node one (the management endpoint's HTTP), so that nothing
/// above the transport touches a socket or a libuv handle.
///
/// Ownership follows the handle: the listening handle retains this server,
/// and this server retains its delegate, until libuv's close callback; the
/// delegate refers back weakly, so nothing outlives the handle.
///
/// Invariant: `openConnections` counts connections accepted and not yet
/// closed, and never exceeds `maxConnections`; one more is accepted (so it
/// leaves the kernel's queue), sent the refusal bytes if the socket takes
/// them at once, and closed. Everything below `start` is loop-confined.
package final class StreamServer: @unchecked Sendable {
    package let loop: EventLoop
    /// The port actually bound (a port of 0 asks for a free one).
    package let port: Int
    package let maxConnections: Int
    /// Sent to a refused client without waiting, then the connection closes.
    private let refusal: [UInt8]
    /// Nil for plain streams.
    let tls: StreamTLS?
    /// Names the server in its one log line (a failed listen).
    private let name: String
    private let fd: Int32
    private var delegate: (any StreamServerDelegate)?
    private var listener: UnsafeMutablePointer<uv_tcp_t>?
    @exclusivity(unchecked) package private(set) var openConnections = 0

    /// Binds host:port at once, so the caller knows the port (and a bad
    /// address is an error here, not a log line); `start` begins accepting.
    package init(
        host: String, port: Int, maxConnections: Int, refusal: [UInt8], name: String, tls: StreamTLS? = nil,
        loop: EventLoop
    ) throws(TransportError) {
        oscar_ignore_sigpipe()  // a client hanging up mid-write must not end the process
        let (fd, actual) = try SocketAddress.listen(host: host, port: port)
        self.loop = loop
        self.port = actual
        self.fd = fd
        self.maxConnections = max(maxConnections, 1)
        self.refusal = refusal
        self.name = name
        self.tls = tls
    }

    /// Starts accepting on the loop, reporting to `delegate` (retained until
    /// the listener closes).
    package func start(delegate: any StreamServerDelegate) {
        loop.execute { [self] in
            self.delegate = delegate
            let tcp = UVHandle.allocate(uv_tcp_t.self, on: loop)
            uv_tcp_init(loop.uvLoopPointer, tcp)
            UVHandle.retainOwner(self, in: tcp)
            if uv_tcp_open(tcp, uv_os_sock_t(fd)) == 0,
                uv_listen(UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_stream_t.self), 128, onStreamClient)
                    == 0
            {
                listener = tcp
            } else {
                OscarLog.shared.error("\(name) could not listen on port \(port)")
                self.delegate = nil
                UVHandle.close(tcp)
            }
        }
    }

    /// Stops listening (from any thread); open connections go on until
    /// their owners close them.
    package func close() {
        loop.execute { [self] in
            if let listener { UVHandle.close(listener) }
            listener = nil
            delegate = nil
        }
    }

    fileprivate func accept(from server: UnsafeMutablePointer<uv_stream_t>) {
        guard let delegate else { return }
        guard openConnections < maxConnections else { return refuse(from: server, delegate) }
        let connection = StreamConnection(server: self)
        guard connection.accept(from: server) else { return }
        openConnections += 1
        delegate.accepted(connection)
        connection.startReading()
    }

    /// A connection counted by `accept` has closed.
    func connectionClosed() { openConnections -= 1 }

    private func refuse(from server: UnsafeMutablePointer<uv_stream_t>, _ delegate: any StreamServerDelegate) {
        let tcp = UVHandle.allocate(uv_tcp_t.self, on: loop)
        uv_tcp_init(loop.uvLoopPointer, tcp)
        let stream = UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_stream_t.self)
        if uv_accept(server, stream) == 0 { StreamConnection.tryWrite(refusal, to: stream) }
        UVHandle.close(tcp)
        delegate.refused()
    }
}

private func onStreamClient(_ server: UnsafeMutablePointer<uv_stream_t>?, _ status: Int32) {
    guard status == 0, let server else { return }
    UVHandle.owner(of: server, as: StreamServer.self).accept(from: server)
}
