internal import COpenSSL

/// One TLS 1.3 session, sans I/O: OpenSSL runs over two memory BIOs, so the
/// caller moves every byte. Ciphertext read from the socket goes in through
/// `receive`, which returns the plaintext for the framer; plaintext goes in
/// through `send`; after either, `takeCiphertext()` is what to write to the
/// socket. Nothing here blocks, waits or starts a thread, so it runs on the
/// connection's loop, called from libuv's read and write callbacks.
///
/// Mutual authentication: each side presents its certificate and verifies
/// the other's chain against the cluster CA. A client also checks that the
/// server's certificate names the host it dialled; a server, when told the
/// host its client claims to be, checks the client's certificate names it.
/// Names are DNS SANs, IP addresses IP SANs (the subject's CN is not used).
///
/// Bounded memory from peer input: ciphertext is fed to OpenSSL in slices of
/// `inputSlice` bytes, each decrypted before the next goes in, so whatever
/// the caller passes at once, the input BIO holds at most one slice and
/// OpenSSL's record buffer one partial record (a TLS 1.3 record is at most
/// 5 + 2^14 + 256 bytes); one `receive` returns at most its input's size
/// plus one record of plaintext.
/// Outgoing plaintext is encrypted in slices of `outputSlice` bytes and the
/// output BIO emptied after each, so it never holds more than one slice;
/// the ciphertext waits in `takeCiphertext()`'s buffer, which the caller
/// empties after every call.
///
/// Not thread-safe: a session belongs to one loop. Every OpenSSL object is
/// freed once, in deinit (`SSL_free` frees both BIOs).
package final class TLSSession {
    /// Which side of the handshake, and the peer's expected host.
    package enum Role: Sendable, Equatable {
        /// Dials `serverHost` (a DNS name or an IP address), which the
        /// server's certificate must name.
        case client(serverHost: String)
        /// Accepts; the client's certificate must name `expectedClientHost`
        /// when one is given (the host the client says it is).
        case server(expectedClientHost: String?)
        /// Accepts clients with or without a certificate (a management
        /// endpoint's health probe has none). One presented must chain to
        /// the CA; `peerCertificate` stays nil when none was.
        case serverOptionalClientCertificate
    }

    /// Ciphertext handed to OpenSSL at once (one maximal record).
    package static let inputSlice = 16 * 1024 + 256 + 5
    /// Plaintext encrypted at once: four full records.
    package static let outputSlice = 4 * 16 * 1024

    package let role: Role
    /// Kept for the context, which the session's `SSL` uses.
    package let credentials: TLSCredentials
    /// Whether the handshake has finished here. In TLS 1.3 a client finishes
    /// before the server has checked the client's certificate; a refusal
    /// then arrives as an alert, which the next `receive` throws.
    package private(set) var isHandshakeComplete = false
    /// The peer's verified certificate, once the handshake is complete.
    package private(set) var peerCertificate: CertificateSummary?
    /// The peer's certificate object, for `peerCertificateNames(_:)`.
    private var peerX509: X509Certificate?
    /// The error the session failed with; every later call throws it.
    package private(set) var failure: TLSError?

    private let ssl: OpaquePointer
    /// Ciphertext from the peer, owned by `ssl`.
    private let input: OpaquePointer
    /// Ciphertext for the peer, owned by `ssl`.
    private let output: OpaquePointer
    private var outbox: [UInt8] = []
    /// An emptied outbox whose capacity is reused (`withCiphertext`).
    private var spareOutbox: [UInt8] = []
    /// Where `SSL_read` decrypts to (one record).
    private var scratch = [UInt8](repeating: 0, count: 16 * 1024)

    package init(credentials: TLSCredentials, role: Role) throws(TLSError) {
        OpenSSLError.clear()
        guard let ssl = SSL_new(credentials.context) else {
            throw .handshakeFailed(OpenSSLError.reason(or: "cannot create a session"))
        }
        guard let input = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw .handshakeFailed("cannot create a memory BIO")
        }
        guard let output = BIO_new(BIO_s_mem()) else {
            BIO_free(input)
            SSL_free(ssl)
            throw .handshakeFailed("cannot create a memory BIO")
        }
        SSL_set_bio(ssl, input, output)
        SSL_set_read_ahead(ssl, 1)
        self.ssl = ssl
        self.input = input
        self.output = output
        self.role = role
        self.credentials = credentials
        switch role {
        case .client(let host):
            SSL_set_connect_state(ssl)
            try expect(host: host)
            if IPAddressText.parse(host) == nil { _ = oscar_ssl_set_host_name(ssl, host) }
            try advance()
        case .server(let host):
            SSL_set_accept_state(ssl)
            if let host { try expect(host: host) }
        case .serverOptionalClientCertificate:
            SSL_set_accept_state(ssl)
            SSL_set_verify(ssl, SSL_VERIFY_PEER, nil)
        }
    }

    deinit { SSL_free(ssl) }

    /// Ciphertext received and still in the input BIO. OpenSSL takes what
    /// it can into its record buffer (one record), so after `receive` this
    /// is at most one slice, usually none.
    var pendingInput: Int { Int(BIO_ctrl_pending(input)) }

    /// Whether part of a record has arrived and waits for the rest.
    var holdsPartialRecord: Bool { pendingInput > 0 || SSL_has_pending(ssl) == 1 }

    /// Makes verification require that the peer's certificate names `host`,
    /// which must be a name a certificate can carry.
    private func expect(host: String) throws(TLSError) {
        do { try CertificateAuthority.validate(host: host) } catch {
            throw fail(.handshakeFailed("'\(host)' is not a host name or an IP address"))
        }
        let parameters = SSL_get0_param(ssl)
        let named =
            IPAddressText.parse(host) != nil
            ? X509_VERIFY_PARAM_set1_ip_asc(parameters, host)
            : X509_VERIFY_PARAM_set1_host(parameters, host, 0)
        guard named == 1 else {
            throw fail(.handshakeFailed(OpenSSLError.reason(or: "cannot expect the host '\(host)'")))
        }
    }

    /// Whether the verified peer certificate names `host` (an IP SAN for
    /// an address, a DNS SAN for a name), as OpenSSL matches them. For a
    /// server that learns its client's host only after the handshake (from
    /// the hello that follows it); false before the handshake.
    package func peerCertificateNames(_ host: String) -> Bool {
        guard let peer = peerX509?.pointer, !host.isEmpty else { return false }
        defer { OpenSSLError.clear() }
        if IPAddressText.parse(host) != nil { return X509_check_ip_asc(peer, host, 0) == 1 }
        return X509_check_host(peer, host, host.utf8.count, 0, nil) == 1
    }

    // MARK: - Events

    /// Ciphertext read from the socket. Returns the plaintext it completes
    /// (possibly none: a partial record, or handshake messages, whose
    /// answers are then in `takeCiphertext()`). Plaintext followed by the
    /// peer's close_notify is returned, and `failure` is then `.closed`.
    package func receive(_ ciphertext: UnsafeRawBufferPointer) throws(TLSError) -> [UInt8] {
        var plaintext: [UInt8] = []
        try receive(ciphertext) { plaintext += $0 }
        return plaintext
    }

    package func receive(_ ciphertext: [UInt8]) throws(TLSError) -> [UInt8] {
        try ciphertext.withUnsafeBytes { bytes in Result { () throws(TLSError) in try receive(bytes) } }.get()
    }

    /// As `receive(_:)`, handing each record's plaintext to `deliver` as it
    /// is decrypted, borrowed for the call, so a read makes no array (the
    /// connection's path: a round trip's latency pays for every copy).
    /// `deliver` may send on this session. Plaintext followed by the peer's
    /// close_notify is delivered, and `failure` is then `.closed`.
    package func receive(
        _ ciphertext: UnsafeRawBufferPointer, deliver: (UnsafeRawBufferPointer) -> Void
    ) throws(TLSError) {
        if let failure { throw failure }
        var delivered = false
        var offset = 0
        repeat {
            let slice = min(Self.inputSlice, ciphertext.count - offset)
            if slice > 0, let base = ciphertext.baseAddress {
                // A memory BIO takes all it is given (it grows), or fails
                // only when memory is exhausted.
                guard BIO_write(input, base + offset, Int32(slice)) == Int32(slice) else {
                    throw fail(.protocolError("out of memory for received ciphertext"))
                }
                offset += slice
            }
            if !isHandshakeComplete { try advance() }
            if isHandshakeComplete { try decrypt(delivered: &delivered, deliver) }
        } while offset < ciphertext.count && failure == nil
    }

    /// The socket reached end of stream. Without the peer's close_notify,
    /// that is a truncation (an attacker may have cut the stream), and a
    /// partial record left over is reported as such.
    package func receiveEndOfStream() throws(TLSError) {
        if let failure { throw failure }
        throw fail(
            .protocolError(
                holdsPartialRecord ? "the stream ended inside a record" : "the stream ended without close_notify"))
    }

    /// Encrypts a batch of plaintext (many frames at once, so the caller's
    /// write batching is kept): the records are in `takeCiphertext()`.
    package func send(_ plaintext: UnsafeRawBufferPointer) throws(TLSError) {
        if let failure { throw failure }
        guard isHandshakeComplete else { throw fail(.protocolError("data sent before the handshake completed")) }
        var offset = 0
        while offset < plaintext.count, let base = plaintext.baseAddress {
            OpenSSLError.clear()
            var written = 0
            let rc = SSL_write_ex(ssl, base + offset, min(Self.outputSlice, plaintext.count - offset), &written)
            guard rc == 1 else { throw fail(classify(rc)) }
            offset += written
            drainOutput()
        }
    }

    package func send(_ plaintext: [UInt8]) throws(TLSError) {
        try plaintext.withUnsafeBytes { bytes in Result { () throws(TLSError) in try send(bytes) } }.get()
    }

    /// Ends the session: a close_notify alert goes to `takeCiphertext()`.
    /// Later calls throw `.closed`.
    package func close() {
        guard failure == nil else { return }
        if isHandshakeComplete {
            OpenSSLError.clear()
            _ = SSL_shutdown(ssl)
            OpenSSLError.clear()
            drainOutput()
        }
        failure = .closed
    }

    /// What to write to the socket now, in order; empties it. Call after
    /// every event, including one that threw (the ciphertext is then the
    /// alert telling the peer why).
    package func takeCiphertext() -> [UInt8] {
        drainOutput()
        defer { outbox = [] }
        return outbox
    }

    /// As `takeCiphertext()`, handing the bytes to `write`, borrowed for the
    /// call, and keeping their buffer for the next time (no array per
    /// write). `write` may use this session again: it gets a buffer of its
    /// own meanwhile.
    package func withCiphertext(_ write: (UnsafeRawBufferPointer) -> Void) {
        drainOutput()
        guard !outbox.isEmpty else { return }
        var taken = outbox
        outbox = spareOutbox
        spareOutbox = []
        taken.withUnsafeBytes(write)
        taken.removeAll(keepingCapacity: true)
        // Kept while it is at most a few records' worth.
        if taken.capacity <= 2 * Self.outputSlice { spareOutbox = taken }
    }

    // MARK: - OpenSSL

    /// Runs the handshake as far as the input allows.
    private func advance() throws(TLSError) {
        OpenSSLError.clear()
        let rc = SSL_do_handshake(ssl)
        defer { drainOutput() }
        if rc == 1 {
            isHandshakeComplete = true
            if let peer = SSL_get0_peer_certificate(ssl) {
                let certificate = X509Certificate(sharing: peer)
                peerX509 = certificate
                peerCertificate = certificate.summary
            } else if role != .serverOptionalClientCertificate {
                // Unreachable with FAIL_IF_NO_PEER_CERT (and a server always
                // presents one); kept so no node session runs unauthenticated.
                throw fail(.peerCertificateMissing)
            }
            return
        }
        if SSL_get_error(ssl, rc) == SSL_ERROR_WANT_READ { return }
        throw fail(classify(rc))
    }

    /// Decrypts all complete records in the input BIO, each to `deliver`.
    private func decrypt(delivered: inout Bool, _ deliver: (UnsafeRawBufferPointer) -> Void) throws(TLSError) {
        while failure == nil {
            OpenSSLError.clear()
            var count = 0
            let rc = scratch.withUnsafeMutableBytes { SSL_read_ex(ssl, $0.baseAddress, $0.count, &count) }
            if rc == 1 {
                delivered = true
                scratch.withUnsafeBytes { deliver(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                // Nothing buffered and nothing more to read: done, without
                // the call that would only say so (`SSL_ERROR_WANT_READ`).
                if BIO_ctrl_pending(input) == 0, SSL_has_pending(ssl) == 0 { return }
                continue
            }
            if SSL_get_error(ssl, rc) == SSL_ERROR_WANT_READ { return }
            let error = classify(rc)
            // The peer's last records and its close_notify often arrive in
            // one read: hand out the records, and throw `.closed` next time.
            if error == .closed, delivered {
                _ = fail(error)
                return
            }
            throw fail(error)
        }
    }

    /// A failed call's error, from the verification result and OpenSSL's
    /// error queue (which it empties).
    private func classify(_ rc: Int32) -> TLSError {
        let kind = SSL_get_error(ssl, rc)
        let queued = OpenSSLError.drain()
        if kind == SSL_ERROR_ZERO_RETURN { return .closed }
        let verification = SSL_get_verify_result(ssl)
        if verification != X509_V_OK { return .verificationFailed(Self.verificationFailure(verification)) }
        if let queued, ERR_GET_REASON(queued.code) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE {
            return .peerCertificateMissing
        }
        let reason = queued?.reason ?? "OpenSSL error \(kind)"
        return isHandshakeComplete ? .protocolError(reason) : .handshakeFailed(reason)
    }

    private static func verificationFailure(_ code: Int) -> TLSVerificationFailure {
        switch Int32(truncatingIfNeeded: code) {
        case X509_V_ERR_CERT_HAS_EXPIRED: .expired
        case X509_V_ERR_CERT_NOT_YET_VALID: .notYetValid
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE,
            X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
            X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_CERT_SIGNATURE_FAILURE:
            .unknownCA
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH: .hostMismatch
        default:
            .other(code: code, reason: X509_verify_cert_error_string(code).map { String(cString: $0) } ?? "unknown")
        }
    }

    private func fail(_ error: TLSError) -> TLSError {
        if failure == nil { failure = error }
        return failure ?? error
    }

    /// Moves what OpenSSL wrote into the outbox.
    private func drainOutput() {
        let pending = Int(BIO_ctrl_pending(output))
        guard pending > 0 else { return }
        let start = outbox.count
        outbox += repeatElement(0, count: pending)
        let read = outbox.withUnsafeMutableBytes { bytes in
            bytes.baseAddress.map { BIO_read(output, $0 + start, Int32(pending)) } ?? 0
        }
        outbox.removeLast(pending - max(0, Int(read)))
    }
}
