import Glibc
import Oscar

/// A connected socket with send and receive timeouts of 3 s, as the CLI's
/// one-shot HTTP requests use it: the CLI's only socket code.
struct BlockingSocket {
    let fd: Int32
    let peer: NodeAddress
    /// A response larger than this is cut here.
    static let maxResponse = 1 << 20

    init(connectingTo target: NodeAddress) throws(CLIError) {
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
        var timeout = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw .exit(4, "cannot connect to \(target): \(reason)")
        }
        self.fd = fd
        peer = target
    }

    func close() { Glibc.close(fd) }

    func send(_ bytes: [UInt8]) throws(CLIError) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw .exit(4, "cannot send to \(peer)") }
            sent += n
        }
    }

    /// One read: empty at the end of the stream.
    func receive() throws(CLIError) -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        let n = recv(fd, &chunk, chunk.count, 0)
        if n < 0 { throw .exit(3, "no answer from \(peer) within 3 s") }
        return Array(chunk[..<n])
    }

    /// Everything until the peer closes (at most `maxResponse` bytes).
    func receiveAll() throws(CLIError) -> [UInt8] {
        var response: [UInt8] = []
        while response.count < Self.maxResponse {
            let chunk = try receive()
            if chunk.isEmpty { break }
            response += chunk
        }
        return response
    }
}
