import CoreEngine
import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime

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
/// `ManagementLimits`. Routing is elsewhere (`ManagementRoutes`), and the
/// socket is the transport's (`StreamServer`): this only speaks HTTP.
///
/// The listener holds this server until it closes; this server refers to
/// the listener weakly. At most `limits.maxConnections` descriptors are held
/// for management clients (`StreamServer` counts them). Everything below the
/// initialiser is loop-confined.
final class HTTPServer: StreamServerDelegate, @unchecked Sendable {
    typealias Handler = @Sendable (ManagementRoutes.Request) async -> ManagementRoutes.Response

    package let loop: EventLoop
    package let port: Int
    let limits: ManagementLimits
    fileprivate let handler: Handler
    private weak var listener: StreamServer?

    // MARK: - Loop-confined state
    /// Refusals since the last log line, while `refusalLog` is pending.
    private var refusedUnlogged = 0
    private var refusalLog: LoopTimer?
    /// At most one log line about refused connections per this interval.
    static let refusalLogInterval = Duration.seconds(10)

    init(
        host: String, port: Int, limits: ManagementLimits = ManagementLimits(),
        tlsCredentials: (@Sendable () -> TLSCredentials?)? = nil, loop: EventLoop, handler: @escaping Handler
    ) throws(TransportError) {
        let limits = limits.validated
        // Over the limit a client is accepted (so it leaves the kernel's
        // queue and costs nothing more), told 503 if the socket takes it at
        // once, and closed.
        let refusal = HTTPConnection.encode(
            ManagementRoutes.Response(status: 503, contentType: "text/plain", body: "too many management connections\n")
        )
        // With TLS (the node's current credentials, so a reload applies to
        // new connections), a plaintext client is told so in plaintext.
        let tls = tlsCredentials.map { credentials in
            StreamTLS(
                credentials: credentials,
                plaintextRefusal: HTTPConnection.encode(
                    ManagementRoutes.Response(
                        status: 400, contentType: "text/plain",
                        body: "this node runs TLS, and so does its management endpoint: use https://\n")))
        }
        let server = try StreamServer(
            host: host, port: port, maxConnections: limits.maxConnections, refusal: refusal,
            name: "management endpoint", tls: tls, loop: loop)
        self.loop = loop
        self.port = server.port
        self.limits = limits
        self.handler = handler
        listener = server
        server.start(delegate: self)
    }

    /// Stops listening (from any thread); open requests finish on their own.
    package func close() { listener?.close() }

    func accepted(_ connection: StreamConnection) {
        connection.handler = HTTPConnection(server: self, stream: connection)
        connection.setDeadline(after: limits.requestTimeout)
    }

    /// Logs the first refusal at once, then at most one line per
    /// `refusalLogInterval` with the count since, so a flood cannot flood
    /// the log.
    func refused() {
        if refusalLog?.isPending == true {
            refusedUnlogged += 1
            return
        }
        OscarLog.shared.warning(
            "management endpoint: \(limits.maxConnections) connections open, the limit; refusing new ones until some close"
        )
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

/// One HTTP request and its response. Its stream holds it until closed.
///
/// Life: reading (deadline: the request timeout from accept) → answering
/// (no deadline: the handler's own timeouts bound it) → writing (deadline
/// again) → closed. A refused request lingers after its response: the write
/// side is shut down and what the client still sends is read and dropped
/// until it closes or the deadline passes, so the client reads the refusal
/// rather than a reset.
final class HTTPConnection: StreamHandler, @unchecked Sendable {
    /// What the blank line ends: parsed once, when it arrives.
    private struct Head {
        var method: String
        var path: String
        var headers: [String: String]
        var bodyStart: Int
        var bodyLength: Int
    }

    private let server: HTTPServer
    /// Weak: the stream owns this request, not the other way round.
    private weak var stream: StreamConnection?
    private var request: [UInt8] = []
    private var head: Head?
    /// Bytes of `request` already searched for the blank line.
    private var scanned = 0
    private var answered = false
    private var lingering = false

    init(server: HTTPServer, stream: StreamConnection) {
        self.server = server
        self.stream = stream
    }

    private var limits: ManagementLimits { server.limits }

    // MARK: - Reading

    func streamRead(_ bytes: [UInt8]) {
        guard !answered else { return }  // lingering after a refusal: dropped
        request.append(contentsOf: bytes)
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

    /// End of stream or an error.
    func streamEnded() { finish() }

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
        stream?.clearDeadline()
        stream?.stopReading()
        let parsed = ManagementRoutes.Request(
            method: head.method, path: head.path, headers: head.headers,
            body: Array(request[head.bodyStart..<(head.bodyStart + head.bodyLength)]),
            clientCertificate: stream?.peerCertificate?.subject)
        request = []
        let (handler, loop) = (server.handler, server.loop)
        let me = UncheckedSendable(self)
        let headOnly = head.method == "HEAD"
        // The task prefers this loop, so the response is written on it.
        Task(executorPreference: loop.taskExecutor) {
            let response = await handler(parsed)
            if loop.inEventLoop {
                me.value.respond(response, headOnly: headOnly)
            } else {
                loop.execute { me.value.respond(response, headOnly: headOnly) }
            }
        }
    }

    // MARK: - Writing

    private func refuse(_ status: Int, _ text: String) {
        respond(ManagementRoutes.Response(status: status, contentType: "text/plain", body: text + "\n"), linger: true)
    }

    /// `headOnly`: the answer to a HEAD, its head alone (with the length
    /// the body would have).
    private func respond(_ r: ManagementRoutes.Response, linger: Bool = false, headOnly: Bool = false) {
        guard let stream, !stream.isClosed else { return }
        answered = true
        lingering = linger
        stream.setDeadline(after: limits.requestTimeout)  // a client that does not read its response is dropped
        guard stream.write(Self.encode(r, headOnly: headOnly)) else { return finish() }
        // Sent once the response is written: the client sees the end.
        if linger, !stream.shutdown() { finish() }
    }

    /// A lingering connection closes when the client does (`streamEnded`).
    func streamWrote() {
        if !lingering { finish() }
    }

    package static func encode(_ r: ManagementRoutes.Response, headOnly: Bool = false) -> [UInt8] {
        let reason =
            [
                200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
                408: "Request Timeout", 413: "Content Too Large", 431: "Request Header Fields Too Large",
                503: "Service Unavailable",
            ][r.status] ?? "Status"
        let body = Array(r.body.utf8)
        let head =
            "HTTP/1.1 \(r.status) \(reason)\r\nContent-Type: \(r.contentType)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + (headOnly ? [] : body)
    }

    // MARK: - Deadline and close

    func streamDeadlinePassed() {
        if !answered {
            stream?.tryWrite(
                Self.encode(
                    ManagementRoutes.Response(
                        status: 408, contentType: "text/plain",
                        body: "no complete request within \(limits.requestTimeout)\n")))
        }
        finish()
    }

    /// Closes the stream, once; its memory is freed in libuv's close callback.
    private func finish() { stream?.close() }
}
