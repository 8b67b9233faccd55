import Foundation
import Glibc

/// W5's reference line: what one TCP connection on 127.0.0.1 carries with
/// no framing or encoding at all (docs/BENCHMARKS.md, W5).
enum RawTCPBenchmark {
    /// The loopback's own limit: one TCP connection on 127.0.0.1, a writer
    /// and a reader thread, `total` bytes in 1 MiB writes. MB/s.
    static func rawTCP(total: Int = 2 << 30) throws -> Double {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 1) == 0
                    && getsockname(listener, $0, &length) == 0
            }
        }
        guard bound else { throw RawTCPFailure() }
        let writer = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(writer) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(writer, $0, length) == 0 }
        }
        let reader = accept(listener, nil, nil)
        guard connected, reader >= 0 else { throw RawTCPFailure() }
        defer { close(reader) }
        let clock = ContinuousClock()
        let t0 = clock.now
        let finished = DispatchSemaphore(value: 0)
        Thread {
            var buffer = [UInt8](repeating: 0, count: 256 << 10)
            var left = total
            while left > 0 {
                let n = buffer.withUnsafeMutableBytes { read(reader, $0.baseAddress, $0.count) }
                guard n > 0 else { break }
                left -= n
            }
            finished.signal()
        }.start()
        let chunk = [UInt8](repeating: 0x5a, count: 1 << 20)
        var left = total
        while left > 0 {
            let n = chunk.withUnsafeBytes { write(writer, $0.baseAddress, min($0.count, left)) }
            guard n > 0 else { throw RawTCPFailure() }
            left -= n
        }
        finished.wait()
        return Double(total) / (clock.now - t0).inSeconds / 1e6
    }

    struct RawTCPFailure: Error, CustomStringConvertible {
        var description: String { "the raw TCP loopback measurement could not set up its connection" }
    }
}
