import CLibUV
import OscarBase
import OscarRuntime

/// What a `StreamConnection` tells the protocol above it, on its loop.
package protocol StreamHandler: AnyObject {
    /// Bytes arrived, in order.
    func streamRead(_ bytes: [UInt8])
    /// The client ended its side, or reading failed; the connection stays
    /// open until its owner closes it.
    func streamEnded()
    /// A write queued with `write` has finished.
    func streamWrote()
    /// The deadline set with `setDeadline(after:)` has passed.
    func streamDeadlinePassed()
}

/// One client of a `StreamServer`: reads delivered as safe byte arrays,
/// queued and immediate writes, a shutdown of the write side, and one
/// deadline, so the protocol above needs no pointer and no libuv.
///
/// On a TLS server (`StreamServer.tls`) a `TLSSession` sits between the
/// socket and the handler, which sees only plaintext: the first byte must
/// open a TLS handshake (else the server's plaintext refusal is sent and the
/// connection closes), handshake flights are written here and not reported
/// to the handler, and a TLS failure sends its alert and closes. The handler
/// is told nothing until plaintext arrives.
///
/// Ownership: the handle retains this connection and this connection its
/// handler until libuv's close callback (the handler is dropped at `close`,
/// so no event follows it); the handler refers back weakly, so a loop that
/// shuts down and closes the handle itself frees both. The loop's timer
/// heap holds the connection while its deadline is armed. Loop-confined.
package final class StreamConnection: @unchecked Sendable, TimerEntry {
    package let loop: EventLoop
    private let server: StreamServer
    private let tcp: UnsafeMutablePointer<uv_tcp_t>
    @exclusivity(unchecked) package var handler: (any StreamHandler)?
    @exclusivity(unchecked) package private(set) var isClosed = false
    /// libuv reads into this; the bytes are copied out, so no array
    /// storage pointer escapes to libuv.
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 << 10, alignment: 1)
    /// For each write queued with libuv, in order (libuv completes a
    /// stream's writes in order): whether it is the handler's, reported by
    /// `streamWrote`, or TLS's own (a handshake flight, a close_notify).
    private var writesToReport: [Bool] = []

    // MARK: TLS (nil and false on a plain server)
    private var tls: TLSSession?
    /// No byte read yet on a TLS server: the first says whether the client
    /// speaks TLS.
    private var awaitingFirstByte: Bool

    // MARK: - TimerEntry
    @exclusivity(unchecked) package var timerDeadline: UInt64 = 0
    @exclusivity(unchecked) package var timerSlot = -1

    init(server: StreamServer) {
        self.server = server
        loop = server.loop
        awaitingFirstByte = server.tls != nil
        tcp = UVHandle.allocate(uv_tcp_t.self, on: loop)
        uv_tcp_init(loop.uvLoopPointer, tcp)
        UVHandle.retainOwner(self, in: tcp)
    }

    /// The client's certificate, verified against the cluster CA, when it
    /// presented one over TLS; nil otherwise.
    package var peerCertificate: CertificateSummary? { tls?.peerCertificate }

    deinit { scratch.deallocate() }

    private var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_stream_t.self)
    }

    /// False (and the handle closed, uncounted) when the client went away
    /// before it could be accepted.
    func accept(from listener: UnsafeMutablePointer<uv_stream_t>) -> Bool {
        guard uv_accept(listener, stream) == 0 else {
            isClosed = true
            UVHandle.close(tcp)
            return false
        }
        return true
    }

    // MARK: - Reading

    func startReading() {
        guard !isClosed else { return }
        uv_read_start(stream, onStreamAlloc, onStreamRead)
    }

    package func stopReading() {
        guard !isClosed else { return }
        uv_read_stop(stream)
    }

    fileprivate var readRegion: UnsafeMutableRawBufferPointer { scratch }

    fileprivate func didRead(_ n: Int) {
        guard n > 0 else { return handler?.streamEnded() ?? () }
        let bytes = Array(scratch.prefix(n))
        if awaitingFirstByte, let endpoint = server.tls {
            awaitingFirstByte = false
            guard bytes[0] == TLSPolicy.handshakeRecordType, let credentials = endpoint.credentials() else {
                Self.tryWrite(endpoint.plaintextRefusal, to: stream)
                return close()
            }
            do throws(TLSError) {
                tls = try TLSSession(credentials: credentials, role: .serverOptionalClientCertificate)
            } catch {
                return close()
            }
        }
        guard let tls else { return handler?.streamRead(bytes) ?? () }
        let plaintext: [UInt8]
        do throws(TLSError) { plaintext = try tls.receive(bytes) } catch {
            Self.tryWrite(tls.takeCiphertext(), to: stream)  // the alert saying why
            return close()
        }
        _ = queue(tls.takeCiphertext(), report: false)
        if !plaintext.isEmpty { handler?.streamRead(plaintext) }
    }

    // MARK: - Writing

    /// Queues `bytes` (copied; with TLS, encrypted) behind earlier writes;
    /// `streamWrote` follows when they are written. False if libuv (or the
    /// TLS session) refused them.
    package func write(_ bytes: [UInt8]) -> Bool {
        guard !isClosed, !bytes.isEmpty, let wire = onTheWire(bytes) else { return false }
        return queue(wire, report: true)
    }

    /// `bytes` as the socket must carry them: themselves, or with TLS their
    /// records (nil when the session refused them).
    private func onTheWire(_ bytes: [UInt8]) -> [UInt8]? {
        guard let tls else { return bytes }
        do throws(TLSError) { try tls.send(bytes) } catch { return nil }
        return tls.takeCiphertext()
    }

    private func queue(_ bytes: [UInt8], report: Bool) -> Bool {
        guard !isClosed, !bytes.isEmpty else { return false }
        let memory = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 1)
        bytes.withUnsafeBytes { memory.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.pointee.data = memory
        var buf = uv_buf_init(memory.assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        guard uv_write(request, stream, &buf, 1, onStreamWritten) == 0 else {
            memory.deallocate()
            request.deallocate()
            return false
        }
        writesToReport.append(report)
        return true
    }

    /// Writes what the socket takes at once, without queueing: for a last
    /// word just before closing, which must not hold the connection open.
    package func tryWrite(_ bytes: [UInt8]) {
        guard !isClosed, let wire = onTheWire(bytes) else { return }
        Self.tryWrite(wire, to: stream)
    }

    static func tryWrite(_ bytes: [UInt8], to stream: UnsafeMutablePointer<uv_stream_t>) {
        var bytes = bytes
        bytes.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return }
            var buf = uv_buf_init(base.assumingMemoryBound(to: CChar.self), UInt32(raw.count))
            _ = uv_try_write(stream, &buf, 1)
        }
    }

    /// Shuts the write side down once queued writes are done, so the client
    /// sees the end of what was sent while this side can still read. False
    /// if libuv refused.
    package func shutdown() -> Bool {
        guard !isClosed else { return false }
        if let tls {  // the client learns the end was meant (close_notify)
            tls.close()
            _ = queue(tls.takeCiphertext(), report: false)
        }
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        guard uv_shutdown(request, stream, onStreamShutdown) == 0 else {
            request.deallocate()
            return false
        }
        return true
    }

    fileprivate func wrote() {
        guard !writesToReport.isEmpty, writesToReport.removeFirst() else { return }
        handler?.streamWrote()
    }

    // MARK: - Deadline and close

    /// Replaces any earlier deadline.
    package func setDeadline(after delay: Duration) {
        guard !isClosed else { return }
        loop.disarm(self)
        loop.arm(self, deadline: EventLoop.deadline(after: delay))
    }

    package func clearDeadline() { loop.disarm(self) }

    package func timerFired() { handler?.streamDeadlinePassed() }

    /// The loop is shutting down; it closes every handle itself.
    package func timerCancelled() {}

    /// Closes the handle, once; its memory is freed in the close callback.
    package func close() {
        guard !isClosed else { return }
        isClosed = true
        loop.disarm(self)
        handler = nil
        server.connectionClosed()
        UVHandle.close(tcp)
    }
}

// MARK: - C callbacks

private func onStreamAlloc(
    _ handle: UnsafeMutablePointer<uv_handle_t>?, _ suggested: Int, _ buf: UnsafeMutablePointer<uv_buf_t>?
) {
    let region = UVHandle.owner(of: handle, as: StreamConnection.self).readRegion
    buf!.pointee = uv_buf_init(region.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(region.count))
}

private func onStreamRead(_ stream: UnsafeMutablePointer<uv_stream_t>?, _ nread: Int, _ buf: UnsafePointer<uv_buf_t>?) {
    if nread == 0 { return }  // EAGAIN: nothing read this time
    UVHandle.owner(of: stream, as: StreamConnection.self).didRead(nread)
}

private func onStreamWritten(_ request: UnsafeMutablePointer<uv_write_t>?, _ status: Int32) {
    let stream = request!.pointee.handle!
    request!.pointee.data.deallocate()
    request!.deallocate()
    guard uv_is_closing(UnsafeMutableRawPointer(stream).assumingMemoryBound(to: uv_handle_t.self)) == 0 else { return }
    UVHandle.owner(of: stream, as: StreamConnection.self).wrote()
}

/// Only the request is ours to free: the connection closes when its owner
/// says so (typically on the client's end of stream or a deadline).
private func onStreamShutdown(_ request: UnsafeMutablePointer<uv_shutdown_t>?, _ status: Int32) {
    request?.deallocate()
}
