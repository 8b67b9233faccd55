import CLibUV

/// A minimal HTTP/1.1 server for the management endpoint, on the I/O loop:
/// one request per connection (`Connection: close`), up to 8 KiB with its
/// body. Routing is elsewhere (`ManagementRoutes`): this only speaks HTTP.
final class HTTPServer: @unchecked Sendable {
    typealias Handler = @Sendable (ManagementRoutes.Request) async -> ManagementRoutes.Response

    let loop: EventLoop
    let port: Int
    private let handler: Handler
    private var listener: UnsafeMutablePointer<uv_tcp_t>?

    init(host: String, port: Int, loop: EventLoop, handler: @escaping Handler) throws(TransportError) {
        oscar_ignore_sigpipe()  // a client hanging up mid-response must not end the process
        let (fd, actual) = try SocketAddress.listen(host: host, port: port)
        self.loop = loop
        self.port = actual
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
                Log.shared.error("management endpoint could not listen on port \(actual)")
                UVHandle.close(tcp)
            }
        }
    }

    /// Stops listening (from any thread); open requests finish on their own.
    func close() {
        loop.execute { [self] in
            if let listener { UVHandle.close(listener) }
            listener = nil
        }
    }

    fileprivate func accept(_ server: UnsafeMutablePointer<uv_stream_t>) {
        let conn = HTTPConnection(loop: loop, handler: handler)
        conn.accept(from: server)
    }
}

/// One HTTP request and its response. Its handle holds it until closed.
final class HTTPConnection: @unchecked Sendable {
    private let loop: EventLoop
    private let handler: HTTPServer.Handler
    private let tcp: UnsafeMutablePointer<uv_tcp_t>
    private var request: [UInt8] = []
    private var buffer = [UInt8](repeating: 0, count: 4096)
    private var answered = false

    init(loop: EventLoop, handler: @escaping HTTPServer.Handler) {
        self.loop = loop
        self.handler = handler
        tcp = UVHandle.allocate(uv_tcp_t.self, on: loop)
        uv_tcp_init(loop.uvLoopPointer, tcp)
        UVHandle.retainOwner(self, in: tcp)
    }

    private var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_stream_t.self)
    }

    func accept(from server: UnsafeMutablePointer<uv_stream_t>) {
        guard uv_accept(server, stream) == 0 else {
            UVHandle.close(tcp)
            return
        }
        uv_read_start(stream, onHTTPAlloc, onHTTPRead)
    }

    fileprivate func readRegion() -> UnsafeMutableRawBufferPointer {
        // The request array is the storage; libuv writes into a fixed scratch
        // region we copy from, so no array storage pointer escapes.
        scratch
    }

    private lazy var scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)

    deinit { scratch.deallocate() }

    fileprivate func didRead(_ n: Int) {
        guard !answered else { return }
        guard n > 0 else {
            UVHandle.close(tcp)
            return
        }
        request.append(contentsOf: scratch.prefix(n))
        let tooLarge = ManagementRoutes.Response(status: 431, contentType: "text/plain", body: "request too large\n")
        guard let end = headerEnd() else {
            if request.count > Self.limit { respond(tooLarge) }
            return
        }
        let head = String(decoding: request[..<end], as: UTF8.self).split(separator: "\r\n")
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingPrefix(" ").description
        }
        let length = headers["content-length"].flatMap { Int($0) } ?? 0
        guard length >= 0, end + 4 + length <= Self.limit else { return respond(tooLarge) }
        guard request.count >= end + 4 + length else { return }  // the rest of the body is on its way
        answered = true
        uv_read_stop(stream)
        let parts = (head.first ?? "").split(separator: " ")
        guard parts.count >= 2 else {
            respond(ManagementRoutes.Response(status: 400, contentType: "text/plain", body: "bad request\n"))
            return
        }
        let parsed = ManagementRoutes.Request(
            method: String(parts[0]), path: String(parts[1].split(separator: "?").first ?? ""), headers: headers,
            body: Array(request[(end + 4)..<(end + 4 + length)]))
        let handler = self.handler
        let me = UncheckedSendable(self)
        // The task prefers this loop, so the response is written on it.
        Task(executorPreference: loop.taskExecutor) {
            let response = await handler(parsed)
            me.value.respond(response)
        }
    }

    /// Requests, head and body, are at most this long.
    static let limit = 8192

    private func headerEnd() -> Int? {
        guard request.count >= 4 else { return nil }
        for i in 0...(request.count - 4)
        where request[i] == 13 && request[i + 1] == 10 && request[i + 2] == 13 && request[i + 3] == 10 {
            return i
        }
        return nil
    }

    private func respond(_ r: ManagementRoutes.Response) {
        answered = true
        let reason =
            [
                200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
                431: "Request Header Fields Too Large", 503: "Service Unavailable",
            ][r.status] ?? "Status"
        let body = Array(r.body.utf8)
        let head =
            "HTTP/1.1 \(r.status) \(reason)\r\nContent-Type: \(r.contentType)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array(head.utf8) + body
        let memory = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 1)
        bytes.withUnsafeBytes { memory.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.pointee.data = memory
        var buf = uv_buf_init(memory.assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        if uv_write(request, stream, &buf, 1, onHTTPWritten) != 0 {
            memory.deallocate()
            request.deallocate()
            UVHandle.close(tcp)
        }
    }

    fileprivate func written() { UVHandle.close(tcp) }
}

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
