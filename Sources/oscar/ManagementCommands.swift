import Glibc
import Oscar
import OscarDemo
import OscarTestKit

/// `oscar health --http host:port`: GET /health on a node's management
/// endpoint; exit 0 when the node is up in its cluster. It exists for
/// container health checks: the runtime image has no curl.
enum HealthCommand {
    static func run(_ args: inout Arguments) throws(CLIError) {
        let text = args.option("http") ?? "127.0.0.1:8080"
        guard let target = NodeAddress(hostPort: text) else {
            throw .usage("--http takes host:port of a management endpoint, not '\(text)'")
        }
        try args.rejectUnknownOptions()
        let response = try get("/health", from: target)
        let statusLine = response.split(separator: "\r\n").first.map(String.init) ?? ""
        let body = response.split(separator: "\r\n\r\n", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
        print(body.isEmpty ? statusLine : body, terminator: body.hasSuffix("\n") ? "" : "\n")
        guard statusLine.contains(" 200 ") else { throw .failed("not healthy: \(statusLine)") }
    }

    static func get(_ path: String, from target: NodeAddress) throws(CLIError) -> String {
        try request("GET", path, from: target)
    }

    /// One HTTP/1.0 request over a blocking socket, bounded by 3 s each way;
    /// the whole response, head and body.
    static func request(
        _ method: String, _ path: String, headers: [String: String] = [:], body: String = "", from target: NodeAddress
    ) throws(CLIError) -> String {
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var info: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(target.host, "\(target.port)", &hints, &info) == 0, let first = info else {
            throw .exit(4, "cannot resolve \(target.host)")
        }
        defer { freeaddrinfo(info) }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw .failed("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            throw .exit(4, "cannot connect to \(target): \(String(cString: strerror(errno)))")
        }
        var head = "\(method) \(path) HTTP/1.0\r\nHost: \(target)\r\nContent-Length: \(body.utf8.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        var request = Array((head + "\r\n" + body).utf8)
        guard send(fd, &request, request.count, 0) == request.count else { throw .exit(4, "cannot send to \(target)") }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while response.count < 1 << 20 {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n < 0 { throw .exit(3, "no answer from \(target) within 3 s") }
            if n == 0 { break }
            response += chunk[..<n]
        }
        return String(decoding: response, as: UTF8.self)
    }
}
