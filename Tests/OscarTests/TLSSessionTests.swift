import Foundation
import Oscar
import OscarTestSupport
import Testing

@testable import OscarRemote

/// Two TLS sessions talking through memory: no sockets, every byte moved by
/// the test, so chunking, corruption and refusals are exact and repeatable.
@Suite(.timeLimit(.minutes(4))) struct TLSSessionTests {
    let pki: TestPKI

    init() throws { pki = try TestPKI.shared.get() }

    // MARK: - Success

    @Test func mutualHandshakeSucceedsAndDataFlowsBothWays() throws {
        let (client, server) = try pki.sessions()
        var whole = Chunker.whole
        let handshake = pump(client, server, &whole)
        #expect(handshake.clientError == nil && handshake.serverError == nil)
        #expect(client.isHandshakeComplete && server.isHandshakeComplete)
        #expect(client.peerCertificate?.subject == "CN=server,O=Oscar")
        #expect(client.peerCertificate?.subjectAlternativeNames == ["IP:127.0.0.1", "DNS:server.oscar"])
        #expect(server.peerCertificate?.subject == "CN=client,O=Oscar")
        #expect(server.peerCertificate?.issuer == "CN=Oscar cluster CA,O=Oscar")
        #expect(server.peerCertificateNames("127.0.0.1") && server.peerCertificateNames("CLIENT.oscar"))
        #expect(!server.peerCertificateNames("127.0.0.2") && !server.peerCertificateNames("server.oscar"))
        #expect(!server.peerCertificateNames("") && client.peerCertificateNames("server.oscar"))

        try client.send(Array("ping".utf8))
        try server.send(Array("pong".utf8))
        let data = pump(client, server, &whole)
        #expect(data.toServer == Array("ping".utf8))
        #expect(data.toClient == Array("pong".utf8))
        #expect(data.clientError == nil && data.serverError == nil)
    }

    /// A TLS 1.3 client may send as soon as its side is done: its last
    /// handshake flight and its first record arrive in one read, and the
    /// server finishes the handshake and decrypts the record in one call.
    @Test func aClientMaySendInTheSameWriteAsItsLastHandshakeFlight() throws {
        let (client, server) = try pki.sessions()
        #expect(try server.receive(client.takeCiphertext()).isEmpty && !server.isHandshakeComplete)
        #expect(try client.receive(server.takeCiphertext()).isEmpty && client.isHandshakeComplete)
        try client.send(Array("first".utf8))
        #expect(try server.receive(client.takeCiphertext()) == Array("first".utf8))
        #expect(server.isHandshakeComplete && server.peerCertificate?.subject == "CN=client,O=Oscar")
    }

    /// A batch of many frames is one `send`: its records come out as one
    /// piece of ciphertext (one socket write), and arrive intact.
    @Test func aLargeBatchCrossesManyRecordsIntactAsOneWrite() throws {
        let (client, server) = try pki.sessions()
        var whole = Chunker.whole
        _ = pump(client, server, &whole)
        let batch = (0..<(1 << 20) + 12_345).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        try client.send(batch)
        let ciphertext = client.takeCiphertext()
        let records = 1 + batch.count / (16 * 1024)
        #expect(ciphertext.count > batch.count && ciphertext.count < batch.count + records * 40)
        #expect(try server.receive(ciphertext) == batch)
        #expect(server.pendingInput == 0 && !server.holdsPartialRecord)
    }

    /// Random split points in both directions, handshake included, for many
    /// seeds: the reassembly of records never loses, repeats or reorders.
    @Test(arguments: 1...24) func randomChunkingOfTheCiphertextStreamLosesNothing(seed: UInt64) throws {
        let (client, server) = try pki.sessions()
        var chunker = Chunker(seed: seed, maxPiece: seed % 3 == 0 ? 7 : 5_000)
        let handshake = pump(client, server, &chunker)
        #expect(handshake.clientError == nil && handshake.serverError == nil)
        var rng = SplitMix64(seed: seed)
        var sentUp: [UInt8] = []
        var sentDown: [UInt8] = []
        var receivedUp: [UInt8] = []
        var receivedDown: [UInt8] = []
        for round in 0..<6 {
            let up = (0..<Int.random(in: 0...40_000, using: &rng)).map { UInt8(truncatingIfNeeded: $0 ^ round) }
            let down = (0..<Int.random(in: 0...3_000, using: &rng)).map { UInt8(truncatingIfNeeded: $0 &+ round) }
            try client.send(up)
            try server.send(down)
            sentUp += up
            sentDown += down
            let moved = pump(client, server, &chunker)
            #expect(moved.clientError == nil && moved.serverError == nil)
            receivedUp += moved.toServer
            receivedDown += moved.toClient
        }
        #expect(receivedUp == sentUp)
        #expect(receivedDown == sentDown)
    }

    /// However much arrives at once, the session holds at most one partial
    /// record afterwards.
    @Test func aHugeReceiveLeavesAtMostOnePartialRecordBuffered() throws {
        let (client, server) = try pki.sessions()
        var whole = Chunker.whole
        _ = pump(client, server, &whole)
        let batch = [UInt8](repeating: 0x5a, count: 3 << 20)
        try client.send(batch)
        let ciphertext = client.takeCiphertext()
        let plaintext = try server.receive(Array(ciphertext.dropLast(100)))
        #expect(server.pendingInput <= TLSSession.inputSlice && server.holdsPartialRecord)
        #expect(plaintext.count < batch.count && batch.count - plaintext.count <= 16 * 1024)
        #expect(try plaintext + server.receive(Array(ciphertext.suffix(100))) == batch)
    }

    @Test func credentialsReloadedFromFilesLeaveExistingSessionsWorking() throws {
        let dir = try TemporaryDirectory("tls-reload")
        let directory = CertificateDirectory(dir.path)
        try directory.createAuthority()
        let first = try directory.issue(name: "server", hosts: ["127.0.0.1"])
        let files = TLSCredentials.Files(
            certificateChain: directory.certificate(of: "server"), privateKey: directory.key(of: "server"),
            trustedCA: directory.caCertificate)
        var credentials = try TLSCredentials(files: files)
        #expect(credentials.certificate == first)
        let session = try TLSSession(credentials: credentials, role: .server(expectedClientHost: nil))

        let second = try directory.issue(name: "server", hosts: ["127.0.0.1"], force: true)
        credentials = try credentials.reloaded()
        #expect(credentials.certificate == second && second.sha256Fingerprint != first.sha256Fingerprint)

        // The old session still runs on the old context, the new one on the new.
        let clientCredentials = try TLSCredentials(files: files)
        for server in [session, try TLSSession(credentials: credentials, role: .server(expectedClientHost: nil))] {
            let client = try TLSSession(credentials: clientCredentials, role: .client(serverHost: "127.0.0.1"))
            var whole = Chunker.whole
            let result = pump(client, server, &whole)
            #expect(result.clientError == nil && result.serverError == nil && server.isHandshakeComplete)
        }
        #expect(session.credentials.certificate == first)
        #expect(throws: TLSError.self) { try TLSCredentials(anonymousTrusting: "").reloaded() }
    }

    // MARK: - Refusals

    @Test func anExpiredServerCertificateIsRefusedByTheClient() throws {
        let result = try pki.handshake(server: pki.expired)
        #expect(result.clientError == .verificationFailed(.expired))
        #expect(result.serverError == .handshakeFailed("sslv3 alert certificate expired"))
    }

    @Test func anExpiredClientCertificateIsRefusedByTheServer() throws {
        let result = try pki.handshake(client: pki.expired)
        #expect(result.serverError == .verificationFailed(.expired))
        // TLS 1.3: the client has finished its side before the server checks
        // its certificate, so it learns from the alert after the handshake.
        #expect(result.clientError == .protocolError("sslv3 alert certificate expired"))
    }

    @Test func aNotYetValidCertificateIsRefused() throws {
        #expect(try pki.handshake(server: pki.notYetValid).clientError == .verificationFailed(.notYetValid))
        #expect(try pki.handshake(client: pki.notYetValid).serverError == .verificationFailed(.notYetValid))
    }

    @Test func aCertificateFromAnotherCAIsRefused() throws {
        #expect(try pki.handshake(server: pki.foreign).clientError == .verificationFailed(.unknownCA))
        #expect(try pki.handshake(client: pki.foreign).serverError == .verificationFailed(.unknownCA))
    }

    /// The client dials a host the server's certificate does not name; a
    /// server told the client's host checks the client's certificate too.
    @Test func aCertificateThatDoesNotNameTheHostIsRefused() throws {
        for host in ["127.0.0.2", "::1", "other.oscar"] {
            let result = try pki.handshake(serverHost: host)
            #expect(result.clientError == .verificationFailed(.hostMismatch), "\(host)")
        }
        #expect(try pki.handshake(serverHost: "server.oscar").clientError == nil)
        #expect(try pki.handshake(expectedClientHost: "127.0.0.1").serverError == nil)
        #expect(try pki.handshake(expectedClientHost: "client.oscar").serverError == nil)
        let impostor = try pki.handshake(expectedClientHost: "10.0.0.7")
        #expect(impostor.serverError == .verificationFailed(.hostMismatch))
    }

    @Test func aClientWithoutACertificateIsRefused() throws {
        let anonymous = try TLSCredentials(anonymousTrusting: pki.ca.certificatePEM)
        let client = try TLSSession(credentials: anonymous, role: .client(serverHost: "127.0.0.1"))
        let server = try TLSSession(credentials: pki.credentials(pki.server), role: .server(expectedClientHost: nil))
        var whole = Chunker.whole
        let result = pump(client, server, &whole)
        #expect(result.serverError == .peerCertificateMissing)
        #expect(result.clientError == .protocolError("tlsv13 alert certificate required"))
        #expect(!server.isHandshakeComplete && server.peerCertificate == nil)
    }

    /// A peer that does not speak TLS gets a typed error, whatever it sends.
    @Test func plaintextGarbageFedToAServerIsATypedError() throws {
        var inputs: [[UInt8]] = [
            Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8), [0x4f, 0x53, 0x43, 0x52, 0x00, 0x02],
        ]
        var rng = SplitMix64(seed: 42)
        for _ in 0..<50 { inputs.append((0..<Int.random(in: 1...600, using: &rng)).map { _ in rng.nextByte() }) }
        for input in inputs {
            let server = try TLSSession(
                credentials: pki.credentials(pki.server), role: .server(expectedClientHost: nil))
            let error = #expect(throws: TLSError.self) {
                _ = try server.receive(input)
                try server.receiveEndOfStream()
            }
            #expect(error != .closed && !server.isHandshakeComplete, "\(input.prefix(8))")
            #expect(server.failure == error)
        }
        let server = try TLSSession(credentials: pki.credentials(pki.server), role: .server(expectedClientHost: nil))
        #expect(throws: TLSError.handshakeFailed("http request")) { try server.receive(inputs[0]) }
    }

    /// One byte of a record flipped, anywhere (header, body, tag): a typed
    /// error, never a trap, and none of the record's plaintext delivered.
    @Test(arguments: 1...40) func aCorruptedRecordIsATypedError(seed: UInt64) throws {
        let (client, server) = try pki.sessions()
        var whole = Chunker.whole
        _ = pump(client, server, &whole)
        let message = [UInt8](repeating: 0x41, count: 300)
        try client.send(message)
        var record = client.takeCiphertext()
        var rng = SplitMix64(seed: seed)
        let index = Int.random(in: 0..<record.count, using: &rng)
        record[index] ^= UInt8.random(in: 1...255, using: &rng)
        var delivered: [UInt8] = []
        let error = #expect(throws: TLSError.self) {
            delivered = try server.receive(record)
            try server.receiveEndOfStream()
        }
        #expect(delivered.isEmpty)
        if case .protocolError = error {} else { Issue.record("byte \(index): \(String(describing: error))") }
    }

    /// A handshake message corrupted in flight fails the handshake on one side.
    @Test(arguments: 1...16) func aCorruptedHandshakeFailsTyped(seed: UInt64) throws {
        let (client, server) = try pki.sessions()
        var hello = client.takeCiphertext()
        var rng = SplitMix64(seed: seed)
        hello[Int.random(in: 0..<hello.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
        var failed = false
        do {
            _ = try server.receive(hello)
            #expect(try client.receive(server.takeCiphertext()).isEmpty, "no plaintext in a handshake")
            try client.receiveEndOfStream()
        } catch {
            failed = true
        }
        #expect(failed && !(client.isHandshakeComplete && server.isHandshakeComplete))
    }

    @Test func aTruncatedRecordIsReportedAtEndOfStream() throws {
        let (client, server) = try pki.sessions()
        var whole = Chunker.whole
        _ = pump(client, server, &whole)
        try client.send([UInt8](repeating: 7, count: 1_000))
        let record = client.takeCiphertext()
        #expect(try server.receive(Array(record.dropLast(10))).isEmpty)
        #expect(throws: TLSError.protocolError("the stream ended inside a record")) {
            try server.receiveEndOfStream()
        }
    }

    @Test func closeNotifyEndsTheSessionOnBothSides() throws {
        let (client, server) = try pki.sessions()
        var whole = Chunker.whole
        _ = pump(client, server, &whole)
        client.close()
        #expect(throws: TLSError.closed) { try client.send([1]) }
        #expect(throws: TLSError.closed) { try server.receive(client.takeCiphertext()) }
        #expect(throws: TLSError.closed) { try server.send([1]) }
    }

    @Test func sendingBeforeTheHandshakeIsAnErrorNotATrap() throws {
        let (client, _) = try pki.sessions()
        #expect(throws: TLSError.protocolError("data sent before the handshake completed")) { try client.send([1]) }
    }

    @Test func credentialsThatDoNotFitAreRefusedSayingWhy() throws {
        let server = pki.server
        #expect(throws: TLSError.invalidCredentials("no certificate in the certificate file")) {
            try TLSCredentials(certificateChainPEM: "", privateKeyPEM: server.privateKeyPEM, trustedCAPEM: "")
        }
        #expect(throws: TLSError.invalidCredentials("the private key does not match the certificate")) {
            try TLSCredentials(
                certificateChainPEM: server.certificatePEM, privateKeyPEM: pki.client.privateKeyPEM,
                trustedCAPEM: pki.ca.certificatePEM)
        }
        #expect(throws: TLSError.invalidCredentials("no certificate in the CA file")) {
            try TLSCredentials(
                certificateChainPEM: server.certificatePEM, privateKeyPEM: server.privateKeyPEM, trustedCAPEM: "x")
        }
        for host in ["", "not a host"] {
            #expect(throws: TLSError.handshakeFailed("'\(host)' is not a host name or an IP address")) {
                try TLSSession(credentials: pki.credentials(server), role: .client(serverHost: host))
            }
        }
        #expect(throws: TLSError.self) {
            try TLSCredentials(
                files: .init(certificateChain: "/nonexistent.pem", privateKey: "/nonexistent.key", trustedCA: "/x"))
        }
    }
}

// MARK: - Helpers

/// A cluster CA and another, with node certificates: valid, expired, not yet
/// valid, and from the other CA. Made once per test process.
struct TestPKI: Sendable {
    static let shared = Result { () throws(CertificateError) in try TestPKI() }

    let ca: CertificateAuthority.Issued
    let server: CertificateAuthority.Issued
    let client: CertificateAuthority.Issued
    let expired: CertificateAuthority.Issued
    let notYetValid: CertificateAuthority.Issued
    let foreign: CertificateAuthority.Issued

    init() throws(CertificateError) {
        let now = CertificateAuthority.now
        let day = CertificateAuthority.secondsPerDay
        ca = try CertificateAuthority.makeAuthority(notBefore: now - 30 * day, notAfter: now + 30 * day)
        let other = try CertificateAuthority.makeAuthority(notBefore: now - day, notAfter: now + day)
        func node(
            _ name: String, _ hosts: [String], from: Int64, to: Int64, by authority: CertificateAuthority.Issued
        )
            throws(CertificateError) -> CertificateAuthority.Issued
        {
            try CertificateAuthority.issue(
                name: name, hosts: hosts, notBefore: from, notAfter: to, authority: authority)
        }
        server = try node("server", ["127.0.0.1", "server.oscar"], from: now - day, to: now + day, by: ca)
        client = try node("client", ["127.0.0.1", "client.oscar"], from: now - day, to: now + day, by: ca)
        let everywhere = ["127.0.0.1", "server.oscar", "client.oscar"]
        expired = try node("expired", everywhere, from: now - 3 * day, to: now - day, by: ca)
        notYetValid = try node("future", everywhere, from: now + day, to: now + 3 * day, by: ca)
        foreign = try node("foreign", everywhere, from: now - day, to: now + day, by: other)
    }

    func credentials(_ node: CertificateAuthority.Issued) throws -> TLSCredentials {
        try TLSCredentials(
            certificateChainPEM: node.certificatePEM, privateKeyPEM: node.privateKeyPEM,
            trustedCAPEM: ca.certificatePEM)
    }

    /// A client dialling 127.0.0.1 and a server, with valid certificates.
    func sessions() throws -> (client: TLSSession, server: TLSSession) {
        (
            try TLSSession(credentials: credentials(client), role: .client(serverHost: "127.0.0.1")),
            try TLSSession(credentials: credentials(server), role: .server(expectedClientHost: nil))
        )
    }

    /// A whole handshake between the two given certificates.
    func handshake(
        client: CertificateAuthority.Issued? = nil, server: CertificateAuthority.Issued? = nil,
        serverHost: String = "127.0.0.1", expectedClientHost: String? = nil
    ) throws -> Pumped {
        let clientSession = try TLSSession(
            credentials: credentials(client ?? self.client), role: .client(serverHost: serverHost))
        let serverSession = try TLSSession(
            credentials: credentials(server ?? self.server), role: .server(expectedClientHost: expectedClientHost))
        var whole = Chunker.whole
        return pump(clientSession, serverSession, &whole)
    }
}

/// Cuts ciphertext into the pieces a socket might deliver.
struct Chunker {
    var rng: SplitMix64?
    var maxPiece: Int

    static let whole = Chunker(rng: nil, maxPiece: .max)

    init(seed: UInt64, maxPiece: Int) {
        rng = SplitMix64(seed: seed)
        self.maxPiece = maxPiece
    }

    private init(rng: SplitMix64?, maxPiece: Int) {
        self.rng = rng
        self.maxPiece = maxPiece
    }

    mutating func pieces(of bytes: [UInt8]) -> [[UInt8]] {
        guard var generator = rng else { return [bytes] }
        defer { rng = generator }
        var pieces: [[UInt8]] = []
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + Int.random(in: 1...maxPiece, using: &generator))
            pieces.append(Array(bytes[start..<end]))
            start = end
        }
        return pieces
    }
}

/// What moved between the two sessions, and how each ended.
struct Pumped {
    var toServer: [UInt8] = []
    var toClient: [UInt8] = []
    var clientError: TLSError?
    var serverError: TLSError?
}

/// Moves ciphertext between the sessions, both ways, until neither has any
/// to send (or one failed and its alert has gone across).
func pump(_ client: TLSSession, _ server: TLSSession, _ chunker: inout Chunker) -> Pumped {
    var result = Pumped()
    for _ in 0..<1_000 {
        let up = client.takeCiphertext()
        let down = server.takeCiphertext()
        if up.isEmpty && down.isEmpty { break }
        deliver(up, to: server, &result.toServer, &result.serverError, &chunker)
        deliver(down, to: client, &result.toClient, &result.clientError, &chunker)
    }
    return result
}

private func deliver(
    _ bytes: [UInt8], to session: TLSSession, _ plaintext: inout [UInt8], _ error: inout TLSError?,
    _ chunker: inout Chunker
) {
    guard error == nil else { return }
    for piece in chunker.pieces(of: bytes) {
        do { plaintext += try session.receive(piece) } catch let failure {
            error = failure
            return
        }
    }
}

extension SplitMix64 {
    mutating func nextByte() -> UInt8 { UInt8(truncatingIfNeeded: next()) }
}
