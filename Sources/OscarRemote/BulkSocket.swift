import CLibUV
import Foundation
import Glibc
import OscarBase
import Synchronization

/// A socket of the bulk lane, used with blocking calls from a thread of the
/// lane's own (see `BulkLane`), which hands the copying of message bodies
/// to a `BulkCopier`.
///
/// Why blocking calls on threads of their own, not a libuv loop: the point
/// of the lane is that its copying runs at `SCHED_IDLE`, on a core nothing
/// else wants, and a thread that only reads or writes one message at a
/// time needs no loop. The connection is made, authenticated and then
/// detached from the I/O loop by `Connection.detachSocket`.
///
/// The descriptor is closed when the object goes; `shutdown` is what wakes
/// a thread blocked in a call on it (closing it under that thread could hand
/// the number to another socket first).
final class BulkSocket: Sendable {
    private let fd: Int32
    /// Bytes written so far: a watcher on another thread tells a message
    /// that moves from one that is stuck.
    let written = Atomic<Int>(0)

    /// Takes `fd` (blocking from now on), with `timeout` on every read and
    /// write: a peer that stops reading or writing fails the message after
    /// it rather than holding the lane's thread.
    init(fd: Int32, timeout: Duration) {
        self.fd = fd
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        let seconds = timeout.components.seconds
        var limit = timeval(
            tv_sec: Int(seconds), tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        let size = socklen_t(MemoryLayout<timeval>.size)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, size)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, size)
    }

    deinit { Glibc.close(fd) }

    /// What went wrong with a read or write, said the way the log says it.
    struct Failure: Error, Equatable, CustomStringConvertible {
        var description: String
        static func errno(_ code: Int32, _ what: String) -> Failure {
            if code == EAGAIN || code == EWOULDBLOCK { return Failure(description: "\(what) timed out") }
            return Failure(description: "\(what) failed: \(String(cString: strerror(code)))")
        }
        static let closed = Failure(description: "the peer closed the bulk connection")
    }

    /// How a copy to or from the socket ended. Plain values, so that the
    /// copy itself allocates nothing (see `BulkCopier`).
    enum Outcome: Equatable {
        case done
        case closed
        case failed(errno: Int32)

        func check(_ what: String) throws(Failure) {
            switch self {
            case .done: return
            case .closed: throw .closed
            case .failed(let code): throw .errno(code, what)
            }
        }
    }

    /// Writes every byte of `buffers`, in order, at most `stepBytes` a call
    /// so that `written` moves as it goes. Allocates nothing and takes no
    /// lock: `BulkCopier` runs it at `SCHED_IDLE`.
    func writeAll(_ buffers: UnsafeBufferPointer<UnsafeRawBufferPointer>) -> Outcome {
        var left = buffers.reduce(0) { $0 + $1.count }
        for buffer in buffers {
            var done = 0
            while done < buffer.count {
                let step = min(Self.stepBytes, buffer.count - done)
                // More to come: no segment for a part (the 16-byte header).
                let flags = Int32(MSG_NOSIGNAL) | (left > step ? Int32(MSG_MORE) : 0)
                let sent = Glibc.send(fd, buffer.baseAddress! + done, step, flags)
                if sent < 0 {
                    let code = Glibc.errno
                    if code == EINTR { continue }
                    return .failed(errno: code)
                }
                done += sent
                left -= sent
                written.add(sent, ordering: .relaxed)
            }
        }
        return .done
    }

    /// Fills `buffer` from the socket. Allocates nothing and takes no lock
    /// (as `writeAll`).
    func readAll(into buffer: UnsafeMutableRawBufferPointer) -> Outcome {
        var done = 0
        while done < buffer.count {
            let got = Glibc.read(fd, buffer.baseAddress! + done, buffer.count - done)
            if got == 0 { return .closed }
            if got < 0 {
                let code = Glibc.errno
                if code == EINTR { continue }
                return .failed(errno: code)
            }
            done += got
        }
        return .done
    }

    /// The most one call writes: `written` moves at least every 256 KiB,
    /// so the stall watchdog (500 ms) tells a slow link (down to about
    /// 0.5 MB/s) from a stuck one.
    private static let stepBytes = 256 << 10

    /// Writes every byte of `buffers`, on `copier`'s thread if given.
    func write(_ buffers: [UnsafeRawBufferPointer], on copier: BulkCopier? = nil) throws(Failure) {
        try buffers.withUnsafeBufferPointer { copier?.write($0, to: self) ?? writeAll($0) }.check("a bulk write")
    }

    /// Writes every byte of `bytes`.
    func write(_ bytes: [UInt8]) throws(Failure) {
        try bytes.withUnsafeBytes { bytes in [bytes].withUnsafeBufferPointer { writeAll($0) } }.check("a bulk write")
    }

    /// Fills `buffer` from the socket, on `copier`'s thread if given;
    /// `closed` if the peer closes first.
    func read(into buffer: UnsafeMutableRawBufferPointer, on copier: BulkCopier? = nil) throws(Failure) {
        try (copier?.read(into: buffer, from: self) ?? readAll(into: buffer)).check("a bulk read")
    }

    /// Waits, however long, until the socket has bytes to read or is
    /// closed (a receiver between two messages: the timeout is for a
    /// message under way, not for a quiet peer).
    func waitUntilReadable() {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while poll(&entry, 1, -1) < 0, Glibc.errno == EINTR {}
    }

    /// Reads exactly `count` bytes into a new array.
    func read(_ count: Int) throws(Failure) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let failure = bytes.withUnsafeMutableBytes { buffer -> Failure? in
            do throws(Failure) { try read(into: buffer) } catch { return error }
            return nil
        }
        if let failure { throw failure }
        return bytes
    }

    /// Reads and drops `count` bytes (a message this node refuses), through
    /// one buffer of at most 64 KiB, on `copier`'s thread.
    func skip(_ count: Int, on copier: BulkCopier) throws(Failure) {
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, min(count, 64 * 1024)), alignment: 1)
        defer { scratch.deallocate() }
        var left = count
        while left > 0 {
            let step = min(left, scratch.count)
            try read(into: UnsafeMutableRawBufferPointer(rebasing: scratch[..<step]), on: copier)
            left -= step
        }
    }

    /// Ends both directions: a thread blocked on the socket returns at once.
    func shutdown() { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }

    /// Names the calling thread (`oscar-bulk-in`, `oscar-bulk-copy`, ... as
    /// top and perf show it) and, with `idle`, moves it to `SCHED_IDLE`.
    static func startThread(named name: String, idle: Bool = false) {
        oscar_set_thread_name(name)
        if idle, oscar_lower_thread_to_idle() != 0 {
            OscarLog.shared.warning("the bulk lane's copying stays at normal priority: SCHED_IDLE was refused")
        }
    }
}
