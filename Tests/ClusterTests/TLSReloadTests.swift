import Foundation
import Oscar
import OscarTestSupport
import Testing

@testable import OscarCluster
@testable import OscarRemote

/// Certificate rotation on a running node (`ClusterNode.reloadTLS`), over
/// real sockets on 127.0.0.1: new files serve new connections, open ones
/// keep running, and a bad file changes nothing.
@Suite(.serialized, .timeLimit(.minutes(8))) struct TLSReloadTests {
    typealias PKI = TLSClusterTests.PKI
    let cluster = TLSClusterTests()

    /// Asks both ways between `a` and `b`, one pair after another, until
    /// cancelled; each failure's reason is recorded.
    func steadyAsks(_ a: ClusterNode, _ b: ClusterNode, done: Record<Int>, failed: Record<String>) -> Task<Void, Never>
    {
        Task { [cluster] in
            var n = 0
            while !Task.isCancelled {
                n += 1
                do {
                    _ = try await cluster.ping(a, b, n)
                    _ = try await cluster.ping(b, a, n)
                    done.append(n)
                } catch {
                    if !Task.isCancelled { failed.append("\(error)") }
                }
            }
        }
    }

    /// The certificate a TLS client is shown by the node listening on `port`
    /// (`openssl s_client`, which presents none and is then refused).
    /// On a thread of its own: the tool blocks until the node answers,
    /// which a blocked cooperative thread could delay.
    func presentedCertificate(port: Int) async throws -> CertificateSummary? {
        let (_, output) = try await offThePool {
            try OpenSSLTool.run(["s_client", "-connect", "127.0.0.1:\(port)", "-tls1_3"])
        }
        guard let start = output.range(of: "-----BEGIN CERTIFICATE-----"),
            let end = output.range(of: "-----END CERTIFICATE-----", range: start.upperBound..<output.endIndex)
        else { return nil }
        return X509Certificate.all(fromPEM: String(output[start.lowerBound..<end.upperBound])).first?.summary
    }

    func up(_ nodes: ClusterNode..., members: Int) async throws {
        // The sanitizer pass runs every suite beside this one, several
        // times slower: a node's first view can take minutes there.
        for node in nodes {
            try await node.waitUntilUp(members: members, within: .seconds(underSanitizer ? 180 : 60))
        }
    }

    @Test func rotatedCertificatesServeNewConnectionsWhileAsksKeepFlowingWithoutAFailure() async throws {
        let pki = try PKI("rotate")
        let a = try cluster.node(tls: pki.issue("a"))
        let b = try cluster.node(tls: pki.issue("b"), seeds: [a.address])
        var c: ClusterNode?
        defer { [c, b, a].forEach { $0?.shutdown() } }
        try await up(a, b, members: 2)
        let old = try #require(a.tlsCertificate)

        let done = Record<Int>()
        let failed = Record<String>()
        let load = steadyAsks(a, b, done: done, failed: failed)
        #expect(await eventually(timeout: .seconds(60)) { done.all.count >= 5 })

        // New keys and certificates from the same CA, written over the files.
        let newA = try pki.certs.issue(name: "a", hosts: ["127.0.0.1"], force: true)
        let newB = try pki.certs.issue(name: "b", hosts: ["127.0.0.1"], force: true)
        try a.reloadTLS()
        try b.reloadTLS()
        #expect(a.tlsCertificate == newA)
        #expect(b.tlsCertificate == newB)
        #expect(newA.sha256Fingerprint != old.sha256Fingerprint)

        // New connections, dialled and accepted, with the new certificates.
        let joined = try cluster.node(tls: pki.issue("c"), seeds: [a.address])
        c = joined
        try await up(a, b, joined, members: 3)
        #expect(try await cluster.ping(joined, a).node == a.address.port)
        #expect(try await cluster.ping(a, joined).node == joined.address.port)
        #expect(try await cluster.ping(b, joined).node == joined.address.port)
        #expect(try await presentedCertificate(port: a.address.port) == newA)
        #expect(try await presentedCertificate(port: b.address.port) == newB)

        let before = done.all.count
        #expect(await eventually(timeout: .seconds(60)) { done.all.count >= before + 5 })
        load.cancel()
        await load.value
        #expect(failed.all.isEmpty, "failed asks: \(failed.all)")
    }

    @Test func aCABundleTrustsPeersOfTheOldAndTheNewCAWhileTheCARotates() async throws {
        let old = try PKI("ca-old")
        let new = try PKI("ca-new")
        let oldCA = try String(contentsOfFile: old.certs.caCertificate, encoding: .utf8)
        let newCA = try String(contentsOfFile: new.certs.caCertificate, encoding: .utf8)
        // A's CA file names only the old CA when it starts, then both.
        var tls = try old.issue("a")
        tls.caFile = old.dir.path + "/bundle.pem"
        try oldCA.write(toFile: tls.caFile, atomically: true, encoding: .utf8)
        let a = try cluster.node(tls: tls)
        var c: ClusterNode?
        defer { [c, a].forEach { $0?.shutdown() } }
        try oldCA.appending(newCA).write(toFile: tls.caFile, atomically: true, encoding: .utf8)
        try a.reloadTLS()

        // C, from the new CA, trusts both too.
        var cTLS = try new.issue("c")
        cTLS.caFile = new.dir.path + "/bundle.pem"
        try newCA.appending(oldCA).write(toFile: cTLS.caFile, atomically: true, encoding: .utf8)
        let joined = try cluster.node(tls: cTLS, seeds: [a.address])
        c = joined
        try await up(a, joined, members: 2)
        #expect(try await cluster.ping(a, joined).node == joined.address.port)
        #expect(try await cluster.ping(joined, a).node == a.address.port)
    }

    @Test func aBadFileAtReloadIsNamedAndTheNodeKeepsServingWithItsCertificates() async throws {
        let pki = try PKI("bad")
        let a = try cluster.node(tls: pki.issue("a"))
        var c: ClusterNode?
        defer { [c, a].forEach { $0?.shutdown() } }
        let old = a.tlsCertificate
        let file = pki.certs.certificate(of: "a")
        try "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n".write(
            toFile: file, atomically: true, encoding: .utf8)
        do {
            try a.reloadTLS()
            Issue.record("a garbage certificate file was accepted")
        } catch {
            #expect(error.description.contains(file), "\(error)")
        }
        #expect(a.tlsCertificate == old)

        // New connections still succeed, with the certificates A started with.
        let joined = try cluster.node(tls: pki.issue("c"), seeds: [a.address])
        c = joined
        try await up(a, joined, members: 2)
        #expect(try await cluster.ping(joined, a).node == a.address.port)
        #expect(try await presentedCertificate(port: a.address.port) == old)
    }

    @Test func aNodeWithoutTLSHasNothingToReload() throws {
        let a = try cluster.node(tls: nil)
        defer { a.shutdown() }
        #expect(throws: TransportError.self) { try a.reloadTLS() }
    }
}
