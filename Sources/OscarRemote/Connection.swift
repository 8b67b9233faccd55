import CLibUV
import Glibc
import OscarBase
import OscarCBOR
import OscarRuntime

/// One TCP connection to another node: the preamble, the handshake, framing
/// and writes. Owns its `uv_tcp_t`; lives on the transport's I/O loop.
///
/// With TLS (`Transport.Settings.tls`), a `TLSSession` sits between the
/// socket and the framing: what is read goes through `receive` into the
/// frame buffer; every write (a loop turn's whole batch at once) goes
/// through `send`, and its ciphertext to the socket in one write. The
/// preamble and handshake start once TLS's handshake is done; the handshake
/// timeout covers both.
///
/// The handle's `data` holds this object retained until the close callback,
/// so no libuv callback can see it freed. Loop-confined: other threads only
/// hold it to hand work back to its loop (a reply, say), hence unchecked.
package final class Connection: @unchecked Sendable {
    package enum State { case connecting, handshaking, established, closed }

    package let loop: EventLoop
    let isInitiator: Bool
    /// The transport outlives its connections (it closes them all before it
    /// goes): unchecked, so no atomic check per access.
    private unowned(unsafe) let transport: Transport
    private let tcp: UnsafeMutablePointer<uv_tcp_t>
    private var handshake: Handshake
    private let buffer: FrameBuffer
    private var preambleSeen = false
    @exclusivity(unchecked) package private(set) var state = State.connecting
    /// Reached `established` at some point (still true once closed): the
    /// transport counts connections still in their handshake.
    private(set) var wasEstablished = false
    @exclusivity(unchecked) package private(set) var peer: NodeAddress?
    private var handshakeTimer: LoopTimer?
    /// The association this connection serves. Strong, and cleared when the
    /// connection closes (the association is told once, then forgotten), so
    /// the pair never outlives the connection.
    var association: Association?
    /// The large message arriving on this connection, if one is
    /// (see `Association.receive`).
    var reassembly = Reassembly()
    /// The dial was refused (ECONNREFUSED): the peer's host answered that
    /// nothing listens on the port. A silent network (a partition, a frozen
    /// process, a host that is down) makes a dial time out instead.
    private(set) var refusedByPeer = false
    /// Set when this side closed deliberately (a tie-break, say), so the close
    /// is not reported as a failure.
    var closeReason = ""

    // MARK: TLS state (all nil or false when the node runs without TLS)

    /// The session between the socket and the framing, once chosen.
    private var tls: TLSSession?
    /// An acceptor of a TLS node that has not seen the peer's first byte
    /// (see `TLSPolicy.opening`).
    private var sniffing = false
    /// Where ciphertext is read to, one read at a time (a read is decrypted
    /// before the next): `FrameBuffer.readChunk` bytes, only with TLS.
    private var cipherRead: UnsafeMutableRawBufferPointer?
    /// The peer has sent ciphertext (a dialler checks its first byte).
    private var ciphertextSeen = false
    /// The preamble and handshake have started (with TLS: once its
    /// handshake is done).
    private var handshakeStarted = false
    /// A dialled bulk connection: called once, with the socket detached from
    /// the loop once the handshake is done, or with why there is none.
    var bulkDialled: ((Result<BulkSocket, BulkSocket.Failure>) -> Void)?
    /// A connection of the bulk lane (see `BulkLane`): dialled as one, or
    /// its peer's hello said so.
    var isBulk: Bool { handshake.isBulk }
    /// A dialled connection that does not run TLS though the node does.
    private let dialsWithoutTLS: Bool
    /// The host and port dialled; the peer's certificate must name the host.
    private var dialled = (host: "", port: 0)

    /// With `withoutTLS`, a dialled connection of a TLS node skips TLS: the
    /// peer was found to run without it, and this node accepts that
    /// (`TLSPolicy.acceptsPlaintext`).
    init(transport: Transport, initiator: Bool, withoutTLS: Bool = false, bulk: Bool = false) {
        self.dialsWithoutTLS = withoutTLS
        self.transport = transport
        self.loop = transport.ioLoop
        self.isInitiator = initiator
        handshake = Handshake(
            role: initiator ? .initiator : .acceptor, local: transport.localNode, secret: transport.secret,
            nonce: Handshake.randomNonce(), bulk: bulk, takesBulk: transport.usesBulkLane)
        // Until the peer has proven the secret it may send only handshake
        // frames, which are small: nobody without the secret makes this node
        // hold a large buffer.
        buffer = FrameBuffer(maxFrame: transport.settings.maxHandshakeFrame)
        tcp = UVHandle.allocate(uv_tcp_t.self, on: loop)
        uv_tcp_init(loop.uvLoopPointer, tcp)
        UVHandle.retainOwner(self, in: tcp)
    }

    deinit { cipherRead?.deallocate() }

    package var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_stream_t.self)
    }

    // MARK: - Opening

    /// Dials `host:port`, resolving a name first (see `HostResolver`). A
    /// name that does not resolve fails like a refused connect.
    package func connect(host: String, port: Int) {
        dialled = (host, port)
        armHandshakeTimeout()
        HostResolver.resolve(host, port: port, on: loop) { [self] result in
            guard state == .connecting else { return }  // closed meanwhile
            switch result {
            case .success(let address): connect(to: address)
            case .failure(let reason): close("connect failed: \(reason)")
            }
        }
    }

    private func connect(to address: sockaddr_in) {
        let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        var address = address
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_connect(request, tcp, $0, onConnect) }
        }
        if rc != 0 {
            Unmanaged<Connection>.fromOpaque(request.pointee.data).release()
            request.deallocate()
            close("connect failed: \(String(cString: uv_strerror(rc)))")
        }
    }

    fileprivate func connected(status: Int32) {
        guard state == .connecting else { return }
        guard status == 0 else {
            refusedByPeer = status == Int32(UV_ECONNREFUSED.rawValue)
            close("connect failed: \(String(cString: uv_strerror(status)))")
            return
        }
        begin()
    }

    /// Accepts a pending connection from the listening stream.
    package func accept(from server: UnsafeMutablePointer<uv_stream_t>) -> Bool {
        guard uv_accept(server, stream) == 0 else {
            close("accept failed")
            return false
        }
        armHandshakeTimeout()
        begin()
        return true
    }

    private func begin() {
        state = .handshaking
        uv_tcp_nodelay(tcp, 1)
        guard transport.settings.tls != nil, !dialsWithoutTLS else {
            uv_read_start(stream, onAlloc, onRead)
            return startHandshake()
        }
        cipherRead = .allocate(byteCount: FrameBuffer.readChunk, alignment: 8)
        uv_read_start(stream, onAlloc, onRead)
        // An acceptor learns from the first byte whether the peer speaks
        // TLS; the initiator writes first in both protocols.
        if isInitiator { startTLS(.client(serverHost: dialled.host)) } else { sniffing = true }
    }

    /// The preamble and the first handshake directives.
    private func startHandshake() {
        handshakeStarted = true
        write(Handshake.preamble)
        perform(handshake.onStart())
    }

    private func armHandshakeTimeout() {
        // Holds the connection until it fires or is cancelled (at the
        // handshake's end or at close): see `EventLoop.cancelTimer`.
        handshakeTimer = loop.scheduleTimer(after: transport.settings.handshakeTimeout) { [self] in
            guard self.state != .established else { return }
            let reason = "no handshake within \(self.transport.settings.handshakeTimeout)"
            if !self.isInitiator { self.transport.handshakeFailures.note("\(self.socketPeer): \(reason)") }
            self.close(reason)
        }
    }

    // MARK: - Reading

    fileprivate func readBuffer() -> UnsafeMutableRawBufferPointer {
        if let cipherRead, tls != nil || sniffing { return cipherRead }
        return buffer.prepareForRead()
    }

    fileprivate func didRead(_ count: Int) {
        loop.noteActivity()
        guard count >= 0 else {
            guard count == Int(UV_EOF.rawValue) else { return close(String(cString: uv_strerror(Int32(count)))) }
            // Without the peer's close_notify, TLS calls the end a truncation.
            do throws(TLSError) { try tls?.receiveEndOfStream() } catch  where error != .closed {
                return close(error.description)
            } catch {}
            return close("the peer closed the connection")
        }
        if let cipherRead, tls != nil || sniffing {
            receive(ciphertext: UnsafeRawBufferPointer(rebasing: cipherRead[..<count]))
        } else {
            buffer.didRead(count)
            readFrames()
        }
    }

    /// Cuts and handles every complete frame in the buffer.
    private func readFrames() {
        do throws(WireError) {
            if !preambleSeen {
                guard let preamble = buffer.take(Handshake.preamble.count) else { return }
                preambleSeen = true
                perform(handshake.onPreamble(preamble))
            }
            while state != .closed, let frame = try buffer.nextFrame() {
                if state == .established {
                    try association?.receive(frame, on: self)
                } else {
                    guard let kind = frame.first.flatMap(WireKind.init(rawValue:)) else {
                        throw .malformedFrame("handshake frame without a kind")
                    }
                    let directives = handshake.onFrame(kind, Array(frame.dropFirst()))
                    if kind == .hello, let refusal = hostRefusal() {
                        write(Self.handshakeFrame(.reject, Handshake.rejectPayload(refusal)))
                        refuseTLS(refusal)
                    } else {
                        perform(directives)
                    }
                }
            }
        } catch {
            if state == .established {
                OscarLog.shared.error("closing the connection to \(peerDescription): \(error)")
            } else {
                transport.handshakeFailures.note(
                    "closing the connection from \(socketPeer) before its handshake: \(error)")
            }
            close(error.description)
        }
    }

    private var peerDescription: String { peer.map { "\($0)" } ?? "a peer" }

    /// The address the socket is connected to (`ip:port`), whatever the peer
    /// claims to be: what a log line about a failed handshake must name.
    var socketPeer: String {
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getpeername(tcp, $0, &length) }
        }
        guard rc == 0, storage.ss_family == sa_family_t(AF_INET) else { return "an unknown address" }
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress.text($0.pointee) }
        }
    }

    private func perform(_ directives: [Handshake.Directive]) {
        for directive in directives {
            guard state != .closed else { return }  // a failed write closed it
            switch directive {
            case .send(let kind, let payload):
                write(Self.handshakeFrame(kind, payload))
            case .established(let node):
                peer = node
                state = .established
                buffer.maxFrame = transport.settings.maxFrameSize
                wasEstablished = true
                if let t = handshakeTimer { loop.cancelTimer(t) }
                transport.established(self, peer: node)
            case .fail(let reason, let tellPeer):
                peer = peer ?? handshake.peer
                if handshake.authenticationFailed {
                    transport.stats.add(.authenticationFailures)
                    transport.handshakeFailures.note(
                        "authentication failed: \(socketPeer) (claiming to be \(peerDescription)) does not have our cluster secret"
                    )
                } else {
                    transport.handshakeFailures.note(
                        "handshake with \(peerDescription) at \(socketPeer) failed: \(reason)")
                }
                if tellPeer { write(Self.handshakeFrame(.reject, Handshake.rejectPayload(reason))) }
                transport.handshakeFailed(self, reason: reason)
                close(reason, flushFirst: true)
                return
            }
        }
    }

    // MARK: - TLS

    /// Starts this side's TLS session; its first flight (a client's hello)
    /// goes out at once.
    private func startTLS(_ role: TLSSession.Role) {
        guard let credentials = transport.currentTLSCredentials else { return }
        do throws(TLSError) {
            tls = try TLSSession(credentials: credentials, role: role)
        } catch {
            return refuseTLS(error.description)
        }
        writeCiphertext()
    }

    /// Ciphertext read (or, for an acceptor, the first bytes, which say
    /// whether the peer speaks TLS). Holds at most what one read brought:
    /// the session keeps at most one partial record, and the plaintext goes
    /// to the frame buffer, bounded as without TLS.
    private func receive(ciphertext bytes: UnsafeRawBufferPointer) {
        guard let first = bytes.first, let policy = transport.settings.tls else { return }
        if sniffing {
            sniffing = false
            switch policy.opening(firstByte: first) {
            case .tls:
                startTLS(.server(expectedClientHost: nil))
            case .plaintext:
                defer {
                    cipherRead?.deallocate()
                    cipherRead = nil
                }
                startHandshake()
                return deliver(bytes)
            case .refusedPlaintext:
                // Said in plaintext, the only language this peer reads.
                write(
                    Handshake.preamble
                        + Self.handshakeFrame(.reject, Handshake.rejectPayload(TLSPolicy.plaintextRefused)))
                return refuseTLS(TLSPolicy.plaintextRefused)
            }
        } else if !ciphertextSeen, let refusal = TLSPolicy.dialRefusal(firstByte: first) {
            // The rolling switch: a peer not yet moved to TLS is dialled
            // again without it.
            if policy.acceptsPlaintext, let association { return association.redialWithoutTLS(self, refusal) }
            return refuseTLS(refusal)
        }
        ciphertextSeen = true
        guard let tls, state != .closed else { return }
        do throws(TLSError) {
            // Each record's plaintext straight from the session's buffer to
            // the frame buffer; the preamble and handshake start before the
            // first (it may come in the read that ends TLS's handshake).
            try tls.receive(bytes) { plaintext in
                if !handshakeStarted {
                    writeCiphertext()
                    startHandshake()
                }
                deliver(plaintext)
            }
        } catch {
            writeCiphertext()  // the alert telling the peer why
            return error == .closed ? close("the peer closed the connection") : tlsFailed(error.description)
        }
        writeCiphertext()
        if tls.isHandshakeComplete, !handshakeStarted { startHandshake() }
        if tls.failure == .closed { close("the peer closed the connection") }
    }

    /// Plaintext into the frame buffer, at most a read's room at a time,
    /// each part's frames handled before the next goes in.
    private func deliver(_ plaintext: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < plaintext.count, state != .closed, let source = plaintext.baseAddress {
            let room = buffer.prepareForRead()
            let n = min(room.count, plaintext.count - offset)
            room.baseAddress?.copyMemory(from: source + offset, byteCount: n)
            buffer.didRead(n)
            offset += n
            readFrames()
        }
    }

    /// What the session has for the socket, written now (after every event,
    /// a failing one included: then it is the alert).
    private func writeCiphertext() {
        tls?.withCiphertext { _ = writeToSocket($0) }
    }

    /// Encrypts `bytes` and writes the records; false if that failed (the
    /// connection is then closed).
    private func encrypt(_ bytes: UnsafeRawBufferPointer, with tls: TLSSession) -> Bool {
        do throws(TLSError) { try tls.send(bytes) } catch {
            writeCiphertext()
            tlsFailed(error.description)
            return false
        }
        writeCiphertext()
        return state != .closed
    }

    /// The acceptor's check once `hello` names the peer's advertised host:
    /// its certificate must name it. Nil without TLS.
    private func hostRefusal() -> String? {
        guard let tls, !isInitiator, let claimed = handshake.peer else { return nil }
        return TLSPolicy.hostRefusal(advertisedHost: claimed.host, certificateNames: tls.peerCertificateNames)
    }

    /// TLS failed: before the handshake, the peer is refused; after it, the
    /// connection is closed as for any protocol error.
    private func tlsFailed(_ reason: String) {
        guard state != .established else {
            OscarLog.shared.error("closing the connection to \(peerDescription): \(reason)")
            return close(reason, flushFirst: true)
        }
        refuseTLS(reason)
    }

    /// Refuses a peer over TLS (its certificate, its handshake, plaintext):
    /// logged at most about once a second, counted, and closed once what
    /// was written (an alert, a reject) has gone. Waiting asks fail with
    /// `rejected(reason)`.
    private func refuseTLS(_ reason: String) {
        guard state != .closed else { return }
        transport.stats.add(.tlsRefusals)
        let who =
            isInitiator
            ? "\(dialled.host):\(dialled.port) at \(socketPeer)" : "\(peer.map { "\($0) at " } ?? "")\(socketPeer)"
        transport.tlsRefusals.note("TLS refused with \(who): \(reason)")
        transport.handshakeFailed(self, reason: reason)
        close(reason, flushFirst: true)
    }

    /// A handshake frame: length, kind, CBOR payload (no envelope header).
    static func handshakeFrame(_ kind: WireKind, _ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count + 1)
        return [
            UInt8(length >> 24), UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8),
            UInt8(truncatingIfNeeded: length), kind.rawValue,
        ] + payload
    }

    // MARK: - Writing

    /// Writes bytes to the socket: what it takes now goes at once, with no
    /// copy and no request; libuv queues the rest (a copy, freed when that
    /// write completes). A queued write's completion runs only at the next
    /// loop turn, so a sender that flushes thousands of times in one turn
    /// used to pile up that many buffers (90 MB in W1) before any was freed.
    /// `uv_try_write` refuses while anything is queued, so order holds.
    package func write(_ bytes: [UInt8]) { bytes.withUnsafeBytes { _ = write($0) } }

    /// As `write(_:)`, from borrowed bytes; returns how many it took (all of
    /// them, but for a closed connection, which takes none). With TLS, the
    /// bytes are one `send`, and their records one write.
    @discardableResult
    package func write(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard state != .closed, !bytes.isEmpty else { return 0 }
        if let tls { return encrypt(bytes, with: tls) ? bytes.count : 0 }
        return writeToSocket(bytes)
    }

    /// Writes bytes as they are to the socket (ciphertext, with TLS).
    private func writeToSocket(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard state != .closed, !bytes.isEmpty else { return 0 }
        let written = trySocketWrite(bytes)
        if written < bytes.count { queue(UnsafeRawBufferPointer(rebasing: bytes[written...])) }
        return state == .closed ? 0 : bytes.count  // a failed queue closed it
    }

    /// Writes what the socket takes at once, without queueing: 0 when it
    /// takes nothing, when libuv still holds queued bytes (order), or on an
    /// error (the next queued write reports it and closes). With TLS,
    /// encrypting commits the bytes: it takes up to `handOverBytes` of them
    /// when libuv holds nothing, and libuv queues what the socket does not
    /// take of their records (counted in `unsentBytes`, so in the bounds).
    package func tryWrite(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard state != .closed, !bytes.isEmpty else { return 0 }
        guard let tls else { return trySocketWrite(bytes) }
        guard unsentBytes == 0 else { return 0 }
        let taken = min(bytes.count, Association.handOverBytes)
        return encrypt(UnsafeRawBufferPointer(rebasing: bytes[..<taken]), with: tls) ? taken : 0
    }

    private func trySocketWrite(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard state != .closed, !bytes.isEmpty else { return 0 }
        var buf = Self.uvBuffer(bytes)
        return trySocketWrite(&buf, count: 1)
    }

    /// One `uv_try_write` of `count` buffers (a writev): what the socket
    /// took, 0 for nothing or an error; progress for the stall clock.
    private func trySocketWrite(_ bufs: UnsafePointer<uv_buf_t>, count: Int) -> Int {
        let taken = max(0, Int(uv_try_write(stream, bufs, UInt32(count))))
        if taken > 0 { lastWriteProgress = uv_hrtime() }
        return taken
    }

    /// A libuv buffer over borrowed bytes, which libuv only reads.
    private static func uvBuffer(_ bytes: UnsafeRawBufferPointer) -> uv_buf_t {
        uv_buf_init(
            UnsafeMutablePointer(mutating: bytes.baseAddress?.assumingMemoryBound(to: CChar.self)), UInt32(bytes.count))
    }

    /// Writes the buffers, in order, as one frame: what the socket takes
    /// now in one writev, without copying; libuv queues the rest (one copy
    /// of what is left). With TLS, they are one `send`, as `write(_:)`.
    package func write(gathering buffers: [UnsafeRawBufferPointer]) {
        guard state != .closed else { return }
        if buffers.count == 1 {
            write(buffers[0])
            return
        }
        guard tls == nil else { return write(buffers.joinedBytes) }
        let total = buffers.reduce(0) { $0 + $1.count }
        let bufs = buffers.map(Self.uvBuffer)
        let taken = trySocketWrite(bufs, count: bufs.count)
        guard taken < total else { return }
        queue(Self.unwritten(buffers, after: taken))
    }

    /// What is left of `buffers` once the socket took their first `taken`
    /// bytes: the rest of the buffer it stopped in, and those after it.
    static func unwritten(_ buffers: [UnsafeRawBufferPointer], after taken: Int) -> [UnsafeRawBufferPointer] {
        var skip = taken
        return buffers.compactMap { buffer in
            defer { skip = max(0, skip - buffer.count) }
            return skip < buffer.count ? UnsafeRawBufferPointer(rebasing: buffer[skip...]) : nil
        }
    }

    private func queue(_ bytes: UnsafeRawBufferPointer) { queue(CollectionOfOne(bytes)) }

    /// Hands libuv a copy of the buffers, in one write request.
    private func queue(_ buffers: some Collection<UnsafeRawBufferPointer>) {
        let count = buffers.reduce(0) { $0 + $1.count }
        let memory = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 1)
        var offset = 0
        for buffer in buffers where !buffer.isEmpty {
            (memory + offset).copyMemory(from: buffer.baseAddress!, byteCount: buffer.count)
            offset += buffer.count
        }
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.pointee.data = memory
        var buf = uv_buf_init(memory.assumingMemoryBound(to: CChar.self), UInt32(count))
        let rc = uv_write(request, stream, &buf, 1, onWrite)
        if rc != 0 {
            memory.deallocate()
            request.deallocate()
            close("write failed: \(String(cString: uv_strerror(rc)))")
        }
    }

    /// Bytes handed to libuv and not yet written to the socket.
    var unsentBytes: Int { Int(uv_stream_get_write_queue_size(stream)) }

    /// When the socket last took bytes (`uv_hrtime`): a peer that stopped
    /// reading stops this clock.
    private(set) var lastWriteProgress = uv_hrtime()

    /// A queued write finished: once libuv's queue has run dry, the
    /// association hands it more (it keeps the rest itself, so that control
    /// frames can still go ahead of it).
    fileprivate func wrote(status: Int32) {
        guard state == .established else { return }
        guard status == 0 else {
            if status != Int32(UV_ECANCELED.rawValue) { close("write failed: \(String(cString: uv_strerror(status)))") }
            return
        }
        lastWriteProgress = uv_hrtime()
        if unsentBytes == 0 { association?.drained(self) }
    }

    // MARK: - Closing

    /// True once this connection lost a simultaneous-connect tie-break.
    private(set) var isRetired = false

    /// Stops sending on this connection but keeps it open and reading, so
    /// frames the peer already sent on it are still delivered. It closes after
    /// the handshake timeout: by then the peer, applying the same tie-break,
    /// has moved to the other connection too. (Shutting our side down at once
    /// would look like a lost node to a peer whose second handshake has not
    /// finished yet.)
    func retire() {
        guard state == .established, !isRetired else { return }
        isRetired = true
        OscarLog.shared.debug("retiring a duplicate connection to \(peerDescription)")
        handshakeTimer = loop.scheduleTimer(after: transport.settings.handshakeTimeout) { [self] in
            close("duplicate connection (simultaneous connect)", flushFirst: true)
        }
    }

    /// Closes the connection; with `flushFirst`, after queued writes finish.
    package func close(_ reason: String, flushFirst: Bool = false) {
        guard state != .closed else { return }
        if flushFirst, let tls, tls.failure == nil {
            tls.close()  // close_notify, so the peer knows the stream was not cut
            writeCiphertext()
        }
        state = .closed
        if closeReason.isEmpty { closeReason = reason }
        if let t = handshakeTimer { loop.cancelTimer(t) }
        uv_read_stop(stream)
        transport.closed(self, reason: closeReason)
        if flushFirst {
            let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
            if uv_shutdown(request, stream, onShutdown) == 0 { return }
            request.deallocate()
        }
        UVHandle.close(tcp)
    }

    fileprivate func shutdownFinished() { UVHandle.close(tcp) }

    /// Hands over a bulk connection's socket, once its handshake is done:
    /// a duplicate of the descriptor, for blocking calls off the loop, and
    /// this connection closes without closing the socket. Nil (and closed)
    /// when bytes are still unread or unwritten here, or with TLS, whose
    /// session cannot leave the connection: neither happens to a bulk
    /// connection of this protocol, where nobody writes after the handshake
    /// until the other side finished its own.
    func detachSocket() -> Int32? {
        var fd = uv_os_fd_t()
        guard state == .established, tls == nil, buffer.isEmpty, unsentBytes == 0,
            uv_fileno(UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_handle_t.self), &fd) == 0
        else {
            close("a bulk connection with bytes in flight or TLS")
            return nil
        }
        let duplicate = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        state = .closed
        uv_read_stop(stream)
        transport.closed(self, reason: "moved to the bulk lane")
        UVHandle.close(tcp)
        guard duplicate >= 0 else { return nil }
        return duplicate
    }
}

// MARK: - C callbacks

private func connection(_ handle: UnsafeMutableRawPointer?) -> Connection {
    UVHandle.owner(of: handle, as: Connection.self)
}

private func onConnect(_ request: UnsafeMutablePointer<uv_connect_t>?, _ status: Int32) {
    let conn = Unmanaged<Connection>.fromOpaque(request!.pointee.data).takeRetainedValue()
    request!.deallocate()
    conn.connected(status: status)
}

private func onAlloc(
    _ handle: UnsafeMutablePointer<uv_handle_t>?, _ suggested: Int, _ buf: UnsafeMutablePointer<uv_buf_t>?
) {
    let region = connection(handle).readBuffer()
    buf!.pointee = uv_buf_init(region.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(region.count))
}

private func onRead(_ stream: UnsafeMutablePointer<uv_stream_t>?, _ nread: Int, _ buf: UnsafePointer<uv_buf_t>?) {
    if nread == 0 { return }  // EAGAIN: nothing read this time
    connection(stream).didRead(nread)
}

private func onWrite(_ request: UnsafeMutablePointer<uv_write_t>?, _ status: Int32) {
    request!.pointee.data.deallocate()
    let stream = request!.pointee.handle
    request!.deallocate()
    guard let stream, uv_is_closing(UnsafeMutableRawPointer(stream).assumingMemoryBound(to: uv_handle_t.self)) == 0
    else { return }
    connection(stream).wrote(status: status)
}

private func onShutdown(_ request: UnsafeMutablePointer<uv_shutdown_t>?, _ status: Int32) {
    let stream = request!.pointee.handle
    request!.deallocate()
    guard let stream, uv_is_closing(UnsafeMutableRawPointer(stream).assumingMemoryBound(to: uv_handle_t.self)) == 0
    else { return }
    connection(stream).shutdownFinished()
}

extension [UnsafeRawBufferPointer] {
    /// The buffers' bytes, in order, in one array.
    var joinedBytes: [UInt8] {
        var all: [UInt8] = []
        all.reserveCapacity(reduce(0) { $0 + $1.count })
        for buffer in self { all.append(contentsOf: buffer) }
        return all
    }
}
