import Foundation
import Oscar
import OscarTestSupport
import Testing

@testable import OscarCluster
@testable import OscarRemote

/// Replies with what it was sent: a large payload crosses both ways.
struct Blob: Message {
    typealias Reply = Blob
    var bytes: Data
}

final class BlobActor: Reactor {
    static func reactions(_ r: inout Reactions<BlobActor>) { r.on(Blob.self, result: { _, m in m }) }
}

/// What arrives on a blocking socket: nil at the end of the stream or a
/// timeout.
func readSome(_ fd: Int32) -> [UInt8]? {
    var chunk = [UInt8](repeating: 0, count: 16 << 10)
    let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
    return n > 0 ? Array(chunk[..<n]) : nil
}

/// Runs a client `session`'s TLS handshake by hand over the blocking socket
/// `fd` (sending with `send`); whether it completed.
func handshake(_ session: TLSSession, fd: Int32, send: ([UInt8]) -> Void) throws(TLSError) -> Bool {
    send(session.takeCiphertext())
    while !session.isHandshakeComplete, let bytes = readSome(fd) {
        _ = try session.receive(bytes)
        send(session.takeCiphertext())
    }
    return session.isHandshakeComplete
}

/// TLS on the cluster port, over real sockets on 127.0.0.1: a CA and node
/// certificates made in a temporary directory, nodes that form a cluster
/// through TLS, and the peers they refuse, with the reason on both sides
/// and the refusal counted.
@Suite(.timeLimit(.minutes(4))) struct TLSClusterTests {
    static let secret = "a-long-cluster-secret"

    /// A cluster's certificates: `ca.pem`, and `NAME.pem`/`NAME.key` per node.
    struct PKI {
        let dir: TemporaryDirectory
        let certs: CertificateDirectory

        init(_ tag: String) throws {
            dir = try TemporaryDirectory("tls-\(tag)")
            certs = CertificateDirectory(dir.path + "/certs")
            try certs.createAuthority()
        }

        /// A node certificate naming `hosts`.
        func issue(_ name: String, hosts: [String] = ["127.0.0.1"]) throws -> ClusterNode.Settings.TLS {
            try certs.issue(name: name, hosts: hosts)
            return tls(name)
        }

        /// One valid only in the past.
        func issueExpired(_ name: String) throws -> ClusterNode.Settings.TLS {
            let authority = CertificateAuthority.Issued(
                certificatePEM: try String(contentsOfFile: certs.caCertificate, encoding: .utf8),
                privateKeyPEM: try String(contentsOfFile: certs.caKey, encoding: .utf8))
            let now = CertificateAuthority.now
            let day = CertificateAuthority.secondsPerDay
            let issued = try CertificateAuthority.issue(
                name: name, hosts: ["127.0.0.1"], notBefore: now - 3 * day, notAfter: now - day, authority: authority)
            try issued.certificatePEM.write(toFile: certs.certificate(of: name), atomically: true, encoding: .utf8)
            try issued.privateKeyPEM.write(toFile: certs.key(of: name), atomically: true, encoding: .utf8)
            return tls(name)
        }

        func tls(_ name: String) -> ClusterNode.Settings.TLS {
            .init(
                certificateFile: certs.certificate(of: name), privateKeyFile: certs.key(of: name),
                caFile: certs.caCertificate)
        }
    }

    func node(tls: ClusterNode.Settings.TLS?, seeds: [NodeAddress] = [], http: Bool = false) throws -> ClusterNode {
        var settings = ClusterNode.Settings(
            secret: Self.secret, loopCount: 1, seeds: seeds, membershipTick: .milliseconds(200),
            httpPort: http ? 0 : nil)
        settings.tls = tls
        return try ClusterNode(settings: settings) { actors in
            actors.nodeSingleton("ping") { PingActor() }
            actors.nodeSingleton("blob") { BlobActor() }
        }
    }

    func ping(_ from: ClusterNode, _ to: ClusterNode, _ n: Int = 1) async throws -> Pong {
        try await from.system.ref("oscar://127.0.0.1:\(to.address.port)/user/ping")!.ask(
            Ping(n: n), timeout: .seconds(20))
    }

    /// The reason an ask from `from` to `to` was refused with, if it was.
    func rejection(_ from: ClusterNode, _ to: ClusterNode) async -> String? {
        do {
            _ = try await ping(from, to)
            return nil
        } catch {
            if case .rejected(let reason)? = error as? AskError { return reason }
            return nil
        }
    }

    /// Asks until one is refused with a reason (a first one may meet the
    /// backoff after an earlier refusal: `nodeUnreachable`, untyped).
    func eventualRejection(_ from: ClusterNode, _ to: ClusterNode) async -> String? {
        let found = Record<String>()
        _ = await eventually(timeout: .seconds(60)) {
            if let reason = await rejection(from, to) { found.append(reason) }
            return !found.all.isEmpty
        }
        return found.all.first
    }

    func refusals(_ node: ClusterNode) -> Int { node.stats.value(.tlsRefusals) }

    /// Whether every node comes to count at least `count` TLS refusals (the
    /// other side of a refusal counts it on its own loop, a moment later).
    func refused(_ nodes: ClusterNode..., atLeast count: Int) async -> Bool {
        await eventually { nodes.allSatisfy { refusals($0) >= count } }
    }

    // MARK: - A TLS cluster

    @Test func twoTLSNodesFormAClusterAndMessagesOfEverySizeCrossBothWays() async throws {
        let pki = try PKI("pair")
        let a = try node(tls: pki.issue("a"))
        let b = try node(tls: pki.issue("b"), seeds: [a.address])
        defer { [b, a].forEach { $0.shutdown() } }
        try await a.waitUntilUp(members: 2, within: .seconds(60))
        try await b.waitUntilUp(members: 2, within: .seconds(60))
        #expect(try await ping(a, b, 1).node == b.address.port)
        #expect(try await ping(b, a, 2).node == a.address.port)

        // One message of 1 MiB, each way.
        let large = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) })
        for (from, to) in [(a, b), (b, a)] {
            let echo = try await from.system.ref("oscar://127.0.0.1:\(to.address.port)/user/blob")!.ask(
                Blob(bytes: large), timeout: .seconds(60))
            #expect(echo.bytes == large)
        }

        // Many small ones in flight at once, each answered by its own reply.
        let count = underSanitizer ? 500 : 2000
        let answers = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for n in 0..<count { group.addTask { (n, try await ping(b, a, n).n) } }
            return try await group.reduce(into: [Int]()) { if $1.0 == $1.1 { $0.append($1.0) } }
        }
        #expect(answers.count == count)
        #expect(refusals(a) == 0 && refusals(b) == 0)
    }

    /// Both nodes dial each other at once: two TLS connections, one kept
    /// by the tie-break on both sides, and traffic flows both ways, in order.
    @Test func simultaneousTLSConnectsSettleOnOneConnection() async throws {
        let pki = try PKI("simultaneous")
        let (aTLS, bTLS) = (try pki.issue("a"), try pki.issue("b"))
        for _ in 0..<3 {
            let a = try node(tls: aTLS)
            let b = try node(tls: bTLS)
            defer { [b, a].forEach { $0.shutdown() } }
            let aToB = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
            let bToA = b.system.ref("oscar://127.0.0.1:\(a.address.port)/user/ping")!
            async let x = aToB.ask(Ping(n: 1), timeout: .seconds(20))
            async let y = bToA.ask(Ping(n: 2), timeout: .seconds(20))
            let (pa, pb) = try await (x, y)
            #expect(pa.node == b.address.port && pb.node == a.address.port)
            for i in 0..<50 {
                aToB.tell(Count())
                bToA.tell(Count())
                if i % 10 == 0 { _ = try await aToB.ask(Ping(n: i), timeout: .seconds(20)) }
            }
            #expect(await eventually { (try? await aToB.ask(Total())) == 50 })
            #expect(await eventually { (try? await bToA.ask(Total())) == 50 })
            #expect(refusals(a) == 0 && refusals(b) == 0)
        }
    }

    // MARK: - Refusals

    /// B's certificate is signed by another CA (B trusts A's CA): A refuses
    /// it in the TLS handshake, B hears the alert; A, dialling B, refuses
    /// B's certificate itself.
    @Test func aNodeWithACertificateFromAnotherCAIsRefused() async throws {
        let pki = try PKI("ca")
        let other = try PKI("other-ca")
        var foreign = try other.issue("b")
        foreign.caFile = pki.certs.caCertificate
        let a = try node(tls: pki.issue("a"), http: true)
        let b = try node(tls: foreign, seeds: [a.address])
        defer { [b, a].forEach { $0.shutdown() } }

        let atB = await eventualRejection(b, a)
        #expect(atB?.contains("alert unknown ca") == true, "\(atB ?? "none")")
        let atA = await eventualRejection(a, b)
        #expect(atA == TLSError.verificationFailed(.unknownCA).description, "\(atA ?? "none")")
        #expect(await refused(a, b, atLeast: 2))
        #expect((try await a.membership()).members.count == 1)
        #expect((try await b.membership()).members.allSatisfy { $0.node.port == b.address.port })
        // The management endpoint runs TLS too: asked with a certificate.
        let metrics = try await ManagementAccessTests.tls(
            ManagementAccessTests.get("/metrics"), port: try #require(a.managementPort),
            credentials: try pki.issue("cli").load()
        ).get()
        let counted = metrics.split(separator: "\n").first { $0.hasPrefix("oscar_tls_refused_total ") }
        #expect(counted.flatMap { Int($0.split(separator: " ")[1]) }.map { $0 >= 2 } == true, "\(metrics)")
    }

    @Test func aPlaintextNodeIsRefusedByDefaultAndAcceptedWithTheRollingSwitch() async throws {
        let pki = try PKI("plaintext")
        let refusing = try node(tls: pki.issue("a"))
        let plain = try node(tls: nil, seeds: [refusing.address])
        defer { [plain, refusing].forEach { $0.shutdown() } }
        let atPlain = await eventualRejection(plain, refusing)
        #expect(atPlain == "rejected by peer: \(TLSPolicy.plaintextRefused)", "\(atPlain ?? "none")")
        let atTLS = await eventualRejection(refusing, plain)
        #expect(atTLS?.contains("does not run TLS") == true, "\(atTLS ?? "none")")
        #expect(await refused(refusing, atLeast: 2))
        #expect((try await refusing.membership()).members.count == 1)

        // The rolling switch: a TLS node that accepts plaintext joins a
        // plaintext seed (dialling it again without TLS) and is joined by
        // a plaintext node; a TLS peer still reaches it with TLS.
        let plainSeed = try node(tls: nil)
        var rolling = try pki.issue("c")
        rolling.acceptsPlaintext = true
        let accepting = try node(tls: rolling, seeds: [plainSeed.address])
        let joiner = try node(tls: nil, seeds: [accepting.address])
        let tlsPeer = try node(tls: pki.issue("d"))
        defer { [tlsPeer, joiner, accepting, plainSeed].forEach { $0.shutdown() } }
        try await accepting.waitUntilUp(members: 3, within: .seconds(60))
        #expect(try await ping(joiner, accepting).node == accepting.address.port)
        #expect(try await ping(accepting, joiner).node == joiner.address.port)
        #expect(try await ping(accepting, plainSeed).node == plainSeed.address.port)
        #expect(try await ping(tlsPeer, accepting).node == accepting.address.port)
        #expect(refusals(accepting) == 0)
    }

    /// B's certificate is valid and from the cluster CA, but names another
    /// host than the one B advertises: A refuses B after its hello.
    @Test func aNodeWhoseCertificateDoesNotNameItsAdvertisedHostIsRefused() async throws {
        let pki = try PKI("host")
        let a = try node(tls: pki.issue("a"))
        let b = try node(tls: pki.issue("b", hosts: ["10.0.0.7", "elsewhere.oscar"]), seeds: [a.address])
        defer { [b, a].forEach { $0.shutdown() } }
        let atB = await eventualRejection(b, a)
        #expect(
            atB?.hasPrefix("rejected by peer: \(TLSError.verificationFailed(.hostMismatch))") == true,
            "\(atB ?? "none")")
        #expect(atB?.contains("'127.0.0.1'") == true)
        // Dialling B at 127.0.0.1, A checks B's certificate in the TLS handshake.
        let atA = await eventualRejection(a, b)
        #expect(atA == TLSError.verificationFailed(.hostMismatch).description, "\(atA ?? "none")")
        #expect(await refused(a, atLeast: 2))
        #expect((try await a.membership()).members.count == 1)
    }

    @Test func anExpiredCertificateIsRefused() async throws {
        let pki = try PKI("expired")
        let a = try node(tls: pki.issue("a"))
        let b = try node(tls: pki.issueExpired("b"), seeds: [a.address])
        defer { [b, a].forEach { $0.shutdown() } }
        let atA = await eventualRejection(a, b)
        #expect(atA == TLSError.verificationFailed(.expired).description, "\(atA ?? "none")")
        let atB = await eventualRejection(b, a)
        #expect(atB?.contains("alert certificate expired") == true, "\(atB ?? "none")")
        #expect(await refused(a, b, atLeast: 2))
        #expect((try await a.membership()).members.count == 1)
    }

    /// A peer with a valid certificate but without the secret is held to
    /// the 4 KiB frame bound before its handshake, through TLS as without.
    @Test func aTLSPeerAnnouncingAHugeFrameBeforeItsHandshakeIsClosedAndTheNodeServesOn() async throws {
        let pki = try PKI("bounds")
        let a = try node(tls: pki.issue("a"))
        let b = try node(tls: pki.issue("b"))
        let intruder = try pki.issue("intruder")
        defer { [b, a].forEach { $0.shutdown() } }
        let port = a.address.port
        let closed = try await offThePool { () throws -> Bool in
            let credentials = try intruder.load()
            let session = try TLSSession(credentials: credentials, role: .client(serverHost: "127.0.0.1"))
            let peer = try RawPeer(port: port)
            guard try handshake(session, fd: peer.fd, send: peer.send) else { return false }
            try session.send(Handshake.preamble + [0xff, 0xff, 0xff, 0xff])
            peer.send(session.takeCiphertext())
            while readSome(peer.fd) != nil {}  // the node's preamble, then the end
            return peer.closedByPeer()
        }
        #expect(closed)
        #expect(try await ping(b, a).node == a.address.port)
    }

    // MARK: - Settings

    @Test func badCredentialFilesFailTheStartNamingTheFile() throws {
        let pki = try PKI("files")
        var tls = try pki.issue("a")
        tls.privateKeyFile = pki.dir.path + "/missing.key"
        #expect {
            _ = try node(tls: tls)
        } throws: { error in
            "\(error)".contains("missing.key")
        }
    }
}
