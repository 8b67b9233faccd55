import CLibUV
import OscarBase
import OscarCBOR
import OscarRuntime
import OscarRemote
import OscarMembership

/// What one management client may hold or send. The endpoint is for
/// operators and scripts, so these bounds are far above what they need and
/// far below what would cost the node its descriptors or its memory: a flood
/// of idle or oversized requests costs at most `maxConnections` descriptors
/// and about `maxConnections × (maxHeaderBytes + maxBodyBytes)` bytes, for at
/// most `requestTimeout`.
public struct ManagementLimits: Sendable, Equatable {
    /// A connection must deliver its whole request (head and body) within
    /// this time from being accepted, or it is answered 408 and closed; a
    /// response the client does not read is dropped after the same time.
    /// The endpoint answers one request per connection (`Connection: close`),
    /// so there is no keep-alive and this is also its idle timeout.
    /// Default 10 s; at least 1 ms.
    public var requestTimeout: Duration
    /// Management connections open at once. One more is accepted, answered
    /// 503 and closed at once; the refusals are logged as a warning, at most
    /// one line per 10 s. Default 64; at least 1.
    public var maxConnections: Int
    /// The request line and headers, up to and including the blank line
    /// that ends them, in bytes; longer is answered 431 and closed.
    /// Default 64 KiB; at least 1 KiB.
    public var maxHeaderBytes: Int
    /// The body, in bytes; a longer `Content-Length` is answered 413 and
    /// closed before any of the body is read. Default 1 MiB; at least 0.
    public var maxBodyBytes: Int

    public init(
        requestTimeout: Duration = .seconds(10), maxConnections: Int = 64, maxHeaderBytes: Int = 64 << 10,
        maxBodyBytes: Int = 1 << 20
    ) {
        self.requestTimeout = requestTimeout
        self.maxConnections = maxConnections
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
    }

    /// Each field raised to its documented minimum.
    package var validated: ManagementLimits {
        ManagementLimits(
            requestTimeout: max(requestTimeout, .milliseconds(1)), maxConnections: max(maxConnections, 1),
            maxHeaderBytes: max(maxHeaderBytes, 1 << 10), maxBodyBytes: max(maxBodyBytes, 0))
    }
}

/// A minimal HTTP/1.1 server for the management endpoint, on the I/O loop:
/// one request per connection (`Connection: close`), bounded by
/// `ManagementLimits`. Routing is elsewhere (`ManagementRoutes`): this only
/// speaks HTTP.
///
/// Invariant: `open` counts the connections this server accepted and has not
/// closed, so at most `limits.maxConnections` descriptors are held for
/// management clients. Everything below the initialiser is loop-confined.
final class HTTPServer: @unchecked Sendable {
    typealias Handler = @Sendable (ManagementRoutes.Request) async -> ManagementRoutes.Response

    package let loop: EventLoop
    package let port: Int
    let limits: ManagementLimits
    fileprivate let handler: Handler
    private var listener: UnsafeMutablePointer<uv_tcp_t>?

    // MARK: - Loop-confined state
    private var open = 0
    /// Refusals since the last log line, while `refusalLog` is pending.
    private var refusedUnlogged = 0
    private var refusalLog: LoopTimer?
    /// At most one log line about refused connections per this interval.
    static let refusalLogInterval = Duration.seconds(10)

    init(
        host: String, port: Int, limits: ManagementLimits = ManagementLimits(), loop: EventLoop,
        handler: @escaping Handler
    ) throws(TransportError) {
        oscar_ignore_sigpipe()  // a client hanging up mid-response must not end the process
        let (fd, actual) = try SocketAddress.listen(host: host, port: port)
        self.loop = loop
        self.port = actual
        self.limits = limits.validated
        self.handler = handler
        loop.execute { [self] in
            let tcp = UVHandle.allocate(uv_tcp_t.self, on: loop)
            uv_tcp_init(loop.uvLoopPointer, tcp)
            UVHandle.retainOwner(self, in: tcp)
            if uv_tcp_open(tcp, uv_os_sock_t(fd)) == 0,
                uv_listen(UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_stream_t.self), 128, onHTTPConnection)
                    == 0
            {
                listener = tcp
            } else {
                OscarLog.shared.error("management endpoint could not listen on port \(actual)")
                UVHandle.close(tcp)
            }
        }
    }

    /// Stops listening (from any thread); open requests finish on their own.
    package func close() {
        loop.execute { [self] in
            if let listener { UVHandle.close(listener) }
            listener = nil
        }
    }

    fileprivate func accept(_ server: UnsafeMutablePointer<uv_stream_t>) {
        guard open < limits.maxConnections else { return refuse(server) }
        open += 1
        HTTPConnection(server: self).accept(from: server)
    }

    /// A connection from `accept` has closed its handle.
    fileprivate func connectionClosed() { open -= 1 }

    /// Over the limit: accepts the connection (so it leaves the kernel's
    /// queue and costs nothing more), says 503 if the socket takes it at
    /// once, and closes it.
    private func refuse(_ server: UnsafeMutablePointer<uv_stream_t>) {
        let tcp = UVHandle.allocate(uv_tcp_t.self, on: loop)
        uv_tcp_init(loop.uvLoopPointer, tcp)
        let stream = UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_stream_t.self)
        if uv_accept(server, stream) == 0 {
            HTTPConnection.tryWrite(
                ManagementRoutes.Response(
                    status: 503, contentType: "text/plain", body: "too many management connections\n"),
                to: stream)
        }
        UVHandle.close(tcp)
        noteRefusal()
    }

    /// Logs the first refusal at once, then at most one line per
    /// `refusalLogInterval` with the count since, so a flood cannot flood
    /// the log.
    private func noteRefusal() {
        if refusalLog?.isPending == true {
            refusedUnlogged += 1
            return
        }
        OscarLog.shared.warning(
            "management endpoint: \(open) connections open, the limit; refusing new ones until some close")
        armRefusalLog()
    }

    private func armRefusalLog() {
        refusalLog = loop.scheduleTimer(after: Self.refusalLogInterval) { [self] in
            guard refusedUnlogged > 0 else {
                refusalLog = nil
                return
            }
            OscarLog.shared.warning(
                "management endpoint: refused \(refusedUnlogged) more connections in the last "
                    + "\(Self.refusalLogInterval) (limit \(limits.maxConnections) open)")
            refusedUnlogged = 0
            armRefusalLog()
        }
    }
}

/// One HTTP request and its response. Its handle holds it until closed; the
/// loop's timer heap holds it while its deadline is armed.
///
/// Life: reading (deadline: the request timeout from accept) → answering
/// (no deadline: the handler's own timeouts bound it) → writing (deadline
/// again) → closed. A refused request lingers after its response: the write
/// side is shut down and what the client still sends is read and dropped
/// until it closes or the deadline passes, so the client reads the refusal
/// rather than a reset.
final class HTTPConnection: @unchecked Sendable, TimerEntry {
    /// What the blank line ends: parsed once, when it arrives.
    private struct Head {
        var method: String
        var path: String
        var headers: [String: String]
        var bodyStart: Int
        var bodyLength: Int
    }

    private let server: HTTPServer
    private let tcp: UnsafeMutablePointer<uv_tcp_t>
    private var request: [UInt8] = []
    private var head: Head?
    /// Bytes of `request` already searched for the blank line.
    private var scanned = 0
    private var answered = false
    private var lingering = false
    private var closed = false
    /// libuv writes reads here; the bytes are copied into `request`, so no
    /// array storage pointer escapes.
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 << 10, alignment: 1)

    // MARK: - TimerEntry
    var timerDeadline: UInt64 = 0
    var timerSlot = -1

    init(server: HTTPServer) {
        self.server = server
        tcp = UVHandle.allocate(uv_tcp_t.self, on: server.loop)
        uv_tcp_init(server.loop.uvLoopPointer, tcp)
        UVHandle.retainOwner(self, in: tcp)
    }

    deinit { scratch.deallocate() }

    private var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_stream_t.self)
    }

    private var limits: ManagementLimits { server.limits }

    func accept(from listener: UnsafeMutablePointer<uv_stream_t>) {
        guard uv_accept(listener, stream) == 0 else { return finish() }
        armDeadline()
        uv_read_start(stream, onHTTPAlloc, onHTTPRead)
    }

    fileprivate func readRegion() -> UnsafeMutableRawBufferPointer { scratch }

    // MARK: - Reading

    fileprivate func didRead(_ n: Int) {
        guard n > 0 else { return finish() }  // end of stream or an error
        guard !answered else { return }  // lingering after a refusal: dropped
        request.append(contentsOf: scratch.prefix(n))
        if head == nil {
            guard let end = blankLine() else {
                if request.count >= limits.maxHeaderBytes { refuse(431, "request head over the limit") }
                return
            }
            guard end + 4 <= limits.maxHeaderBytes else { return refuse(431, "request head over the limit") }
            guard let parsed = parseHead(end: end) else { return }
            head = parsed
        }
        guard let head, request.count >= head.bodyStart + head.bodyLength else { return }  // more body to come
        complete(head)
    }

    /// Where the head's closing CRLF CRLF starts, searching only bytes that
    /// arrived since the last search (and the three before them).
    private func blankLine() -> Int? {
        defer { scanned = request.count }
        guard request.count >= 4 else { return nil }
        for i in max(0, scanned - 3)...(request.count - 4)
        where request[i] == 13 && request[i + 1] == 10 && request[i + 2] == 13 && request[i + 3] == 10 {
            return i
        }
        return nil
    }

    /// The head, or nil after answering a head that cannot be served.
    private func parseHead(end: Int) -> Head? {
        let lines = String(decoding: request[..<end], as: UTF8.self).split(separator: "\r\n")
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingPrefix(" ").description
        }
        let parts = (lines.first ?? "").split(separator: " ")
        guard parts.count >= 2 else {
            refuse(400, "bad request")
            return nil
        }
        var length = 0
        if let text = headers["content-length"] {
            guard let n = Int(text), n >= 0 else {
                refuse(400, "bad Content-Length")
                return nil
            }
            length = n
        }
        guard length <= limits.maxBodyBytes else {
            refuse(413, "request body over the limit of \(limits.maxBodyBytes) bytes")
            return nil
        }
        return Head(
            method: String(parts[0]), path: String(parts[1].split(separator: "?").first ?? ""), headers: headers,
            bodyStart: end + 4, bodyLength: length)
    }

    /// The whole request is here: no deadline while the handler answers.
    private func complete(_ head: Head) {
        answered = true
        server.loop.disarm(self)
        uv_read_stop(stream)
        let parsed = ManagementRoutes.Request(
            method: head.method, path: head.path, headers: head.headers,
            body: Array(request[head.bodyStart..<(head.bodyStart + head.bodyLength)]))
        request = []
        let (handler, loop) = (server.handler, server.loop)
        let me = UncheckedSendable(self)
        // The task prefers this loop, so the response is written on it.
        Task(executorPreference: loop.taskExecutor) {
            let response = await handler(parsed)
            if loop.inEventLoop {
                me.value.respond(response)
            } else {
                loop.execute { me.value.respond(response) }
            }
        }
    }

    // MARK: - Writing

    private func refuse(_ status: Int, _ text: String) {
        respond(ManagementRoutes.Response(status: status, contentType: "text/plain", body: text + "\n"), linger: true)
    }

    private func respond(_ r: ManagementRoutes.Response, linger: Bool = false) {
        guard !closed else { return }
        answered = true
        lingering = linger
        armDeadline()  // a client that does not read its response is dropped
        let bytes = Self.encode(r)
        let memory = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 1)
        bytes.withUnsafeBytes { memory.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.pointee.data = memory
        var buf = uv_buf_init(memory.assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        guard uv_write(request, stream, &buf, 1, onHTTPWritten) == 0 else {
            memory.deallocate()
            request.deallocate()
            return finish()
        }
        guard linger else { return }
        // Sent once the response is written: the client sees the end.
        let shutdown = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        if uv_shutdown(shutdown, stream, onHTTPShutdown) != 0 {
            shutdown.deallocate()
            finish()
        }
    }

    /// A lingering connection closes when the client does (`didRead`).
    fileprivate func written() {
        if !lingering { finish() }
    }

    /// Writes what the socket takes at once, without queueing: for answers
    /// given just before closing, which must not hold the connection open.
    static func tryWrite(_ r: ManagementRoutes.Response, to stream: UnsafeMutablePointer<uv_stream_t>) {
        var bytes = encode(r)
        bytes.withUnsafeMutableBytes { raw in
            var buf = uv_buf_init(raw.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(raw.count))
            _ = uv_try_write(stream, &buf, 1)
        }
    }

    package static func encode(_ r: ManagementRoutes.Response) -> [UInt8] {
        let reason =
            [
                200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
                408: "Request Timeout", 413: "Content Too Large", 431: "Request Header Fields Too Large",
                503: "Service Unavailable",
            ][r.status] ?? "Status"
        let body = Array(r.body.utf8)
        let head =
            "HTTP/1.1 \(r.status) \(reason)\r\nContent-Type: \(r.contentType)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    // MARK: - Deadline and close

    private func armDeadline() {
        let loop = server.loop
        loop.disarm(self)
        loop.arm(self, deadline: EventLoop.deadline(after: limits.requestTimeout))
    }

    func timerFired() {
        if !answered {
            Self.tryWrite(
                ManagementRoutes.Response(
                    status: 408, contentType: "text/plain",
                    body: "no complete request within \(limits.requestTimeout)\n"),
                to: stream)
        }
        finish()
    }

    /// The loop is shutting down; it closes every handle itself.
    func timerCancelled() {}

    /// Closes the handle, once; its memory is freed in the close callback.
    private func finish() {
        guard !closed else { return }
        closed = true
        server.loop.disarm(self)
        server.connectionClosed()
        UVHandle.close(tcp)
    }
}

// MARK: - C callbacks

private func onHTTPConnection(_ server: UnsafeMutablePointer<uv_stream_t>?, _ status: Int32) {
    guard status == 0, let server else { return }
    UVHandle.owner(of: server, as: HTTPServer.self).accept(server)
}

private func onHTTPAlloc(
    _ handle: UnsafeMutablePointer<uv_handle_t>?, _ suggested: Int, _ buf: UnsafeMutablePointer<uv_buf_t>?
) {
    let region = UVHandle.owner(of: handle, as: HTTPConnection.self).readRegion()
    buf!.pointee = uv_buf_init(region.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(region.count))
}

private func onHTTPRead(_ stream: UnsafeMutablePointer<uv_stream_t>?, _ nread: Int, _ buf: UnsafePointer<uv_buf_t>?) {
    if nread == 0 { return }
    UVHandle.owner(of: stream, as: HTTPConnection.self).didRead(nread)
}

private func onHTTPWritten(_ request: UnsafeMutablePointer<uv_write_t>?, _ status: Int32) {
    let stream = request!.pointee.handle!
    request!.pointee.data.deallocate()
    request!.deallocate()
    let handle = UnsafeMutableRawPointer(stream).assumingMemoryBound(to: uv_handle_t.self)
    guard uv_is_closing(handle) == 0 else { return }
    UVHandle.owner(of: stream, as: HTTPConnection.self).written()
}

/// The write side is shut down (or the handle closed first): only the
/// request is ours to free; the connection closes on the client's end of
/// stream or its deadline.
private func onHTTPShutdown(_ request: UnsafeMutablePointer<uv_shutdown_t>?, _ status: Int32) {
    request?.deallocate()
}
