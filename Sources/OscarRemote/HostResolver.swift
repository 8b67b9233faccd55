import CLibUV
import Glibc
import OscarBase
import OscarCBOR
import OscarRuntime

/// Turns a host name (a container's service name, a machine's DNS name) into
/// an IPv4 address without blocking the loop: libuv runs `getaddrinfo` on its
/// thread pool and calls back on the loop.
///
/// Why: a node advertises the host others should dial, and in a container
/// network that is a service name, not an address. Literals skip the lookup.
package enum HostResolver {
    /// Calls `done` on `loop`'s thread with the address, or with the reason
    /// the name did not resolve. Must be called on `loop`'s thread.
    package static func resolve(
        _ host: String, port: Int, on loop: EventLoop, _ done: @escaping (Result<sockaddr_in, TransportError>) -> Void
    ) {
        var literal = sockaddr_in()
        if uv_ip4_addr(host, Int32(port), &literal) == 0 {
            done(.success(literal))
            return
        }
        let request = UnsafeMutablePointer<uv_getaddrinfo_t>.allocate(capacity: 1)
        request.initialize(to: uv_getaddrinfo_t())
        let pending = Pending(host: host, port: port, done: done)
        request.pointee.data = Unmanaged.passRetained(pending).toOpaque()
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        let rc = uv_getaddrinfo(loop.uvLoopPointer, request, onResolved, host, nil, &hints)
        if rc != 0 {
            Unmanaged<Pending>.fromOpaque(request.pointee.data).release()
            request.deallocate()
            done(.failure(.unresolvable(host, String(cString: uv_strerror(rc)))))
        }
    }

    /// What the callback needs, kept alive by the request until it fires.
    fileprivate final class Pending {
        let host: String
        let port: Int
        let done: (Result<sockaddr_in, TransportError>) -> Void

        init(host: String, port: Int, done: @escaping (Result<sockaddr_in, TransportError>) -> Void) {
            self.host = host
            self.port = port
            self.done = done
        }
    }
}

private func onResolved(
    _ request: UnsafeMutablePointer<uv_getaddrinfo_t>?, _ status: Int32, _ result: UnsafeMutablePointer<addrinfo>?
) {
    guard let request else { return }
    let pending = Unmanaged<HostResolver.Pending>.fromOpaque(request.pointee.data).takeRetainedValue()
    request.deallocate()
    defer { if let result { uv_freeaddrinfo(result) } }
    var entry = result
    while let info = entry {
        if info.pointee.ai_family == AF_INET, let raw = info.pointee.ai_addr {
            var address = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
            address.sin_port = UInt16(pending.port).bigEndian
            pending.done(.success(address))
            return
        }
        entry = info.pointee.ai_next
    }
    let reason = status == 0 ? "no IPv4 address" : String(cString: uv_strerror(status))
    pending.done(.failure(.unresolvable(pending.host, reason)))
}

extension HostResolver {
    /// Every IPv4 address `host` resolves to, deduplicated and sorted, or
    /// why it resolved to none. Blocking (`getaddrinfo`): for start-up seed
    /// discovery, on a thread of its own, never on a loop.
    package static func allIPv4Addresses(of host: String) -> Result<[String], TransportError> {
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, nil, &hints, &result)
        guard rc == 0 else { return .failure(.unresolvable(host, String(cString: gai_strerror(rc)))) }
        defer { freeaddrinfo(result) }
        var addresses: Set<String> = []
        var entry = result
        while let info = entry {
            if info.pointee.ai_family == AF_INET, let raw = info.pointee.ai_addr {
                var address = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
                if inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil {
                    addresses.insert(
                        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
                }
            }
            entry = info.pointee.ai_next
        }
        guard !addresses.isEmpty else { return .failure(.unresolvable(host, "no IPv4 address")) }
        return .success(
            addresses.sorted { a, b in
                a.split(separator: ".").compactMap { Int($0) }.lexicographicallyPrecedes(
                    b.split(separator: ".").compactMap { Int($0) })
            })
    }
}
