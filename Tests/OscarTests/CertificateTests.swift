import Foundation
import Oscar
import OscarTestSupport
import Testing

@testable import OscarRemote

/// The certificate authority behind `oscar certs`, checked against the
/// standard tool: what it issues, `openssl` accepts and reads the same way.
@Suite(.timeLimit(.minutes(4))) struct CertificateTests {
    @Test func anAuthorityIsASelfSignedCAWithAP256Key() throws {
        let now = CertificateAuthority.now
        let ca = try CertificateAuthority.makeAuthority(notBefore: now - 60, notAfter: now + 3_600)
        let summary = try CertificateAuthority.summary(ofPEM: ca.certificatePEM)
        #expect(summary.isCA && summary.subject == summary.issuer && summary.subjectAlternativeNames.isEmpty)
        #expect(summary.notBefore == now - 60 && summary.notAfter == now + 3_600)
        let text = try OpenSSLTool.run(["x509", "-noout", "-text"], input: ca.certificatePEM)
        #expect(text.status == 0)
        for expected in ["CA:TRUE", "Certificate Sign", "prime256v1", "ecdsa-with-SHA256"] {
            #expect(text.output.contains(expected), "\(expected)")
        }
        #expect(ca.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
    }

    @Test func openSSLVerifiesAnIssuedCertificateAndReadsItsNames() throws {
        let dir = try TemporaryDirectory("verify")
        let directory = CertificateDirectory(dir.path)
        try directory.createAuthority()
        let summary = try directory.issue(name: "node1", hosts: ["127.0.0.1", "::1", "node1.oscar"], days: 30)
        let verify = try OpenSSLTool.run([
            "verify", "-CAfile", directory.caCertificate, directory.certificate(of: "node1"),
        ])
        #expect(verify.status == 0 && verify.output.contains(": OK"), "\(verify.output)")
        let text = try OpenSSLTool.run(["x509", "-noout", "-text", "-in", directory.certificate(of: "node1")])
        for expected in [
            "IP Address:127.0.0.1", "IP Address:0:0:0:0:0:0:0:1", "DNS:node1.oscar", "CA:FALSE",
            "TLS Web Server Authentication, TLS Web Client Authentication", "Subject: O = Oscar, CN = node1",
        ] {
            #expect(text.output.contains(expected), "\(expected)")
        }
        #expect(summary.subjectAlternativeNames == ["IP:127.0.0.1", "IP:::1", "DNS:node1.oscar"])
        #expect(summary.notAfter - summary.notBefore == 30 * 86_400 + CertificateAuthority.backdating)
        let fingerprint = try OpenSSLTool.run(
            ["x509", "-noout", "-fingerprint", "-sha256", "-in", directory.certificate(of: "node1")])
        #expect(fingerprint.output.contains("=" + summary.fingerprintText), "\(fingerprint.output)")

        // Another directory's CA does not vouch for it.
        let other = try TemporaryDirectory("verify-other")
        try CertificateDirectory(other.path).createAuthority()
        let foreign = try OpenSSLTool.run(
            ["verify", "-CAfile", CertificateDirectory(other.path).caCertificate, directory.certificate(of: "node1")])
        #expect(foreign.status != 0)
    }

    @Test func keysAreOwnerOnlyAndSerialsRandom() throws {
        let dir = try TemporaryDirectory("modes")
        let directory = CertificateDirectory(dir.path)
        try directory.createAuthority()
        try directory.issue(name: "a", hosts: ["10.0.0.1"])
        try directory.issue(name: "b", hosts: ["10.0.0.1"])
        for (file, mode) in [
            (directory.caKey, 0o600), (directory.key(of: "a"), 0o600), (directory.caCertificate, 0o644),
            (directory.certificate(of: "a"), 0o644),
        ] {
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            #expect((attributes[.posixPermissions] as? Int) == mode, "\(file)")
        }
        let serials = try ["a", "b"].map { name in
            try OpenSSLTool.run(["x509", "-noout", "-serial", "-in", directory.certificate(of: name)]).output
        }
        #expect(serials[0] != serials[1] && serials[0].count > 30, "\(serials)")
    }

    @Test func anExistingAuthorityOrCertificateIsKeptUnlessForced() throws {
        let dir = try TemporaryDirectory("force")
        let directory = CertificateDirectory(dir.path)
        let first = try directory.createAuthority()
        #expect(throws: CertificateError.exists(directory.caCertificate)) { try directory.createAuthority() }
        #expect(try CertificateDirectory.show(directory.caCertificate) == first)
        let second = try directory.createAuthority(force: true)
        #expect(second.sha256Fingerprint != first.sha256Fingerprint)
        try directory.issue(name: "n", hosts: ["n.oscar"])
        #expect(throws: CertificateError.exists(directory.certificate(of: "n"))) {
            try directory.issue(name: "n", hosts: ["n.oscar"])
        }
        #expect(
            try directory.issue(name: "n", hosts: ["n2.oscar"], force: true).subjectAlternativeNames == ["DNS:n2.oscar"]
        )
    }

    @Test func badNamesHostsAndLifetimesAreRefused() throws {
        for name in ["", "ca", ".hidden", "a/b", "../x", "spaced name", String(repeating: "n", count: 65)] {
            #expect(throws: CertificateError.self, "\(name)") { try CertificateAuthority.validate(name: name) }
        }
        for host in ["", "a,b", "a..b", "-a.b", "a_b.c", "host:7000", "IP:1.2.3.4", String(repeating: "a", count: 64)] {
            #expect(throws: CertificateError.self, "\(host)") { try CertificateAuthority.validate(host: host) }
        }
        for host in ["127.0.0.1", "::1", "fe80::1", "node-1.oscar.internal", "localhost"] {
            #expect(throws: Never.self, "\(host)") { try CertificateAuthority.validate(host: host) }
        }
        let dir = try TemporaryDirectory("bad")
        let directory = CertificateDirectory(dir.path)
        try directory.createAuthority()
        #expect(throws: CertificateError.self) { try directory.issue(name: "n", hosts: []) }
        #expect(throws: CertificateError.self) { try directory.issue(name: "n", hosts: ["x"], days: 0) }
        #expect(throws: CertificateError.self) { try directory.createAuthority(days: 40_000, force: true) }
        let now = CertificateAuthority.now
        #expect(throws: CertificateError.self) { try CertificateAuthority.makeAuthority(notBefore: now, notAfter: now) }
        #expect(throws: CertificateError.invalidFile("no PEM certificate found")) {
            try CertificateAuthority.summary(ofPEM: "not a certificate")
        }
    }

    @Test func aSummaryReadsLikeACertificate() throws {
        let pki = try TestPKI.shared.get()
        let summary = try CertificateAuthority.summary(ofPEM: pki.expired.certificatePEM)
        #expect(summary.notAfter < CertificateAuthority.now)
        let text = summary.description
        for expected in [
            "subject:     CN=expired,O=Oscar", "issuer:      CN=Oscar cluster CA,O=Oscar", "UTC",
            "names (SAN): IP:127.0.0.1, DNS:server.oscar, DNS:client.oscar", "CA:          no", "SHA-256:     ",
        ] {
            #expect(text.contains(expected), "\(expected) in \(text)")
        }
        #expect(UTCTime.text(0) == "1970-01-01 00:00:00 UTC")
        #expect(UTCTime.text(1_700_000_000) == "2023-11-14 22:13:20 UTC")
    }
}
