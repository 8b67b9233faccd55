import CLibUV
import Glibc
import OscarBase
import OscarCBOR
import OscarRuntime

/// IPv4 socket helpers for the transport.
package enum SocketAddress {
    /// Parses an IPv4 literal (or `localhost`) and port.
    package static func ipv4(_ host: String, _ port: Int) -> sockaddr_in? {
        var address = sockaddr_in()
        let literal = host == "localhost" ? "127.0.0.1" : host
        guard uv_ip4_addr(literal, Int32(port), &address) == 0 else { return nil }
        return address
    }

    /// `ip:port`, for log lines.
    package static func text(_ address: sockaddr_in) -> String {
        var address = address
        var text = [CChar](repeating: 0, count: 64)
        uv_ip4_name(&address, &text, text.count)
        let ip = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(ip):\(UInt16(bigEndian: address.sin_port))"
    }

    /// Creates a listening TCP socket bound to host:port and returns it with
    /// the port actually bound (port 0 picks a free one). Done with plain
    /// sockets, before any loop runs, so a node knows its address before its
    /// first actor is named; the loop adopts the socket with `uv_tcp_open`.
    package static func listen(
        host: String, port: Int, backlog: Int32 = 1024
    ) throws(TransportError) -> (fd: Int32, port: Int) {
        guard var address = ipv4(host, port) else { throw .invalidAddress("\(host):\(port)") }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .bindFailed("\(host):\(port)", String(cString: strerror(errno))) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw .bindFailed("\(host):\(port)", reason)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: actual.sin_port)))
    }
}

/// Why the transport could not start or connect.
public enum TransportError: Error, Hashable, CustomStringConvertible {
    case invalidAddress(String)
    case bindFailed(String, String)
    case unresolvable(String, String)
    /// The cluster secret is shorter than the minimum (bytes, minimum).
    case secretTooShort(Int, minimum: Int)
    /// The TLS certificate, key or CA could not be loaded: which files, why.
    case tlsCredentials(String)

    public var description: String {
        switch self {
        case .secretTooShort(let n, let minimum):
            "the cluster secret has \(n) bytes; at least \(minimum) are needed, or a captured handshake lets anyone guess it offline (`oscar secret` prints a random one)"
        case .invalidAddress(let a): "'\(a)' is not an IPv4 address and port"
        case .bindFailed(let a, let why): "cannot listen on \(a): \(why)"
        case .unresolvable(let host, let why): "cannot resolve '\(host)': \(why)"
        case .tlsCredentials(let why): why
        }
    }
}
