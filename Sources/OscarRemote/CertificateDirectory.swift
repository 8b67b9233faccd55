import Glibc
import OscarRuntime

/// A directory of cluster certificates, as `oscar certs` keeps it:
/// `ca.pem` and `ca.key` (the CA), `NAME.pem` and `NAME.key` per node. Key
/// files are written with mode 0600, certificates 0644; the directory is
/// made with mode 0700.
package struct CertificateDirectory: Sendable {
    package let path: String

    package init(_ path: String) { self.path = path }

    package var caCertificate: String { "\(path)/ca.pem" }
    package var caKey: String { "\(path)/ca.key" }
    package func certificate(of name: String) -> String { "\(path)/\(name).pem" }
    package func key(of name: String) -> String { "\(path)/\(name).key" }

    /// The default lifetimes: ten years for a CA, one for a node.
    package static let authorityDays = 3650
    package static let nodeDays = 365
    /// The longest lifetime accepted, in days (about 100 years).
    package static let maxDays = 36_500

    /// Makes a new CA. An existing one is kept unless `force`: replacing it
    /// orphans every certificate it signed.
    @discardableResult
    package func createAuthority(
        days: Int = authorityDays, force: Bool = false
    ) throws(CertificateError)
        -> CertificateSummary
    {
        let lifetime = try Self.seconds(days: days)
        for file in [caCertificate, caKey] where !force && Self.exists(file) { throw .exists(file) }
        try makeDirectory()
        let now = CertificateAuthority.now
        let authority = try CertificateAuthority.makeAuthority(
            notBefore: now - CertificateAuthority.backdating, notAfter: now + lifetime)
        try Self.write(authority.privateKeyPEM, to: caKey, mode: 0o600)
        try Self.write(authority.certificatePEM, to: caCertificate, mode: 0o644)
        return try CertificateAuthority.summary(ofPEM: authority.certificatePEM)
    }

    /// Issues `name`'s certificate for `hosts`, signed by this directory's CA.
    @discardableResult
    package func issue(
        name: String, hosts: [String], days: Int = nodeDays, force: Bool = false
    )
        throws(CertificateError) -> CertificateSummary
    {
        try CertificateAuthority.validate(name: name)
        guard !hosts.isEmpty else { throw .invalidArgument("a node certificate needs at least one host") }
        for host in hosts { try CertificateAuthority.validate(host: host) }
        let lifetime = try Self.seconds(days: days)
        for file in [certificate(of: name), key(of: name)] where !force && Self.exists(file) { throw .exists(file) }
        let authority = CertificateAuthority.Issued(
            certificatePEM: try Self.read(caCertificate), privateKeyPEM: try Self.read(caKey))
        let now = CertificateAuthority.now
        let issued = try CertificateAuthority.issue(
            name: name, hosts: hosts, notBefore: now - CertificateAuthority.backdating, notAfter: now + lifetime,
            authority: authority)
        try Self.write(issued.privateKeyPEM, to: key(of: name), mode: 0o600)
        try Self.write(issued.certificatePEM, to: certificate(of: name), mode: 0o644)
        return try CertificateAuthority.summary(ofPEM: issued.certificatePEM)
    }

    /// What the certificate in `file` says.
    package static func show(_ file: String) throws(CertificateError) -> CertificateSummary {
        try CertificateAuthority.summary(ofPEM: read(file))
    }

    // MARK: - Files

    private static func seconds(days: Int) throws(CertificateError) -> Int64 {
        guard (1...maxDays).contains(days) else {
            throw .invalidArgument("the lifetime must be 1...\(maxDays) days, not \(days)")
        }
        return Int64(days) * CertificateAuthority.secondsPerDay
    }

    private func makeDirectory() throws(CertificateError) {
        if mkdir(path, 0o700) != 0, errno != EEXIST {
            throw .io("cannot create \(path): \(String(cString: strerror(errno)))")
        }
    }

    private static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    static func read(_ path: String) throws(CertificateError) -> String {
        do { return try ProcessControl.readFile(path, atMost: TLSCredentials.maxFileSize) } catch {
            throw .io(error.description)
        }
    }

    /// Replaces `path` with `text`. The old file is removed first, so a key
    /// never keeps a wider mode it had; O_EXCL then refuses a file (or a
    /// link) someone put there in between.
    private static func write(_ text: String, to path: String, mode: mode_t) throws(CertificateError) {
        func failure() -> CertificateError { .io("cannot write \(path): \(String(cString: strerror(errno)))") }
        if unlink(path) != 0, errno != ENOENT { throw failure() }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw failure() }
        defer { close(fd) }
        // The umask may have narrowed the mode; a key must be exactly 0600.
        guard fchmod(fd, mode) == 0 else { throw failure() }
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in
                buffer.baseAddress.map { Glibc.write(fd, $0 + written, buffer.count - written) } ?? -1
            }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw failure() }
            written += n
        }
    }
}
