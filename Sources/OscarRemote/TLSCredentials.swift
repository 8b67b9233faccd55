internal import COpenSSL
import OscarRuntime

/// A node's TLS identity and trust: its certificate chain and private key,
/// and the cluster CA it verifies peers against, in one OpenSSL context
/// (`SSL_CTX`, freed in deinit).
///
/// The context is immutable once built, so it may be shared by every loop
/// (OpenSSL makes sessions from one context on many threads). A reload
/// builds a new `TLSCredentials`; sessions made from the old one keep it
/// (and OpenSSL keeps its `SSL_CTX` alive while an `SSL` uses it), so a
/// certificate rotation never disturbs a live connection.
///
/// Policy, fixed for every session: TLS 1.3 only, the peer must present a
/// certificate that chains to the cluster CA, no session tickets (a node
/// never resumes, so it never stores any).
package final class TLSCredentials: @unchecked Sendable {
    /// The `SSL_CTX *`, owned; never changed after init.
    let context: OpaquePointer
    /// This node's own certificate (the chain's leaf); nil only for the
    /// anonymous credentials of tests.
    package let certificate: CertificateSummary?
    /// Where the PEM came from, for `reloaded()`; nil when given in memory.
    package let files: Files?

    /// PEM files: the certificate chain (leaf first), its key, the CA.
    package struct Files: Sendable, Equatable {
        package var certificateChain: String
        package var privateKey: String
        package var trustedCA: String

        package init(certificateChain: String, privateKey: String, trustedCA: String) {
            self.certificateChain = certificateChain
            self.privateKey = privateKey
            self.trustedCA = trustedCA
        }
    }

    /// PEM files larger than this are refused rather than read.
    static let maxFileSize = 1 << 20

    /// Loads the files. Reads the disk: call it off the loop.
    package convenience init(files: Files) throws(TLSError) {
        func read(_ path: String) throws(TLSError) -> String {
            do { return try ProcessControl.readFile(path, atMost: Self.maxFileSize) } catch {
                throw .invalidCredentials(error.description)
            }
        }
        try self.init(
            certificateChainPEM: read(files.certificateChain), privateKeyPEM: read(files.privateKey),
            trustedCAPEM: read(files.trustedCA), files: files)
    }

    /// Credentials from PEM text.
    package convenience init(
        certificateChainPEM: String, privateKeyPEM: String, trustedCAPEM: String
    )
        throws(TLSError)
    {
        try self.init(
            certificateChainPEM: certificateChainPEM, privateKeyPEM: privateKeyPEM, trustedCAPEM: trustedCAPEM,
            files: nil)
    }

    /// Trust without an identity: a session made from these presents no
    /// certificate, which every node's cluster port refuses; a management
    /// endpoint lets such a client (a health probe) ask `/health`.
    package convenience init(anonymousTrusting trustedCAPEM: String) throws(TLSError) {
        try self.init(certificateChainPEM: nil, privateKeyPEM: "", trustedCAPEM: trustedCAPEM, files: nil)
    }

    /// The same, the CA read from a file.
    package convenience init(anonymousTrustingFile path: String) throws(TLSError) {
        let pem: String
        do { pem = try ProcessControl.readFile(path, atMost: Self.maxFileSize) } catch {
            throw .invalidCredentials(error.description)
        }
        try self.init(anonymousTrusting: pem)
    }

    private init(
        certificateChainPEM: String?, privateKeyPEM: String, trustedCAPEM: String, files: Files?
    )
        throws(TLSError)
    {
        OpenSSLError.clear()
        guard let context = SSL_CTX_new(TLS_method()) else {
            throw .invalidCredentials(OpenSSLError.reason(or: "cannot create an OpenSSL context"))
        }
        // From here on, a failure frees the context.
        var built = false
        defer { if !built { SSL_CTX_free(context) } }

        guard oscar_ssl_ctx_set_tls13_only(context) == 1, SSL_CTX_set_num_tickets(context, 0) == 1 else {
            throw .invalidCredentials(OpenSSLError.reason(or: "cannot restrict the context to TLS 1.3"))
        }
        var summary: CertificateSummary?
        if let certificateChainPEM {
            let leaf = try Self.useChain(certificateChainPEM, in: context)
            try Self.useKey(privateKeyPEM, of: leaf, in: context)
            summary = leaf.summary
        }
        let authorities = X509Certificate.all(fromPEM: trustedCAPEM)
        guard !authorities.isEmpty else { throw .invalidCredentials("no certificate in the CA file") }
        let store = SSL_CTX_get_cert_store(context)
        for authority in authorities where X509_STORE_add_cert(store, authority.pointer) != 1 {
            throw .invalidCredentials(OpenSSLError.reason(or: "the CA certificate was refused"))
        }
        // A server asks for the client's certificate and fails without one
        // (FAIL_IF_NO_PEER_CERT applies to servers only); both sides verify.
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        self.context = context
        self.certificate = summary
        self.files = files
        built = true
    }

    /// Installs the chain; returns its leaf.
    private static func useChain(_ pem: String, in context: OpaquePointer) throws(TLSError) -> X509Certificate {
        let chain = X509Certificate.all(fromPEM: pem)
        guard let leaf = chain.first else { throw .invalidCredentials("no certificate in the certificate file") }
        guard SSL_CTX_use_certificate(context, leaf.pointer) == 1 else {
            throw .invalidCredentials(OpenSSLError.reason(or: "the certificate was refused"))
        }
        for intermediate in chain.dropFirst()
        where oscar_ssl_ctx_add_chain_certificate(context, intermediate.pointer) != 1 {
            throw .invalidCredentials(OpenSSLError.reason(or: "an intermediate certificate was refused"))
        }
        return leaf
    }

    private static func useKey(_ pem: String, of leaf: X509Certificate, in context: OpaquePointer) throws(TLSError) {
        let key: PrivateKey
        do { key = try PrivateKey(pem: pem) } catch { throw .invalidCredentials(error.description) }
        guard X509_check_private_key(leaf.pointer, key.pointer) == 1 else {
            OpenSSLError.clear()
            throw .invalidCredentials("the private key does not match the certificate")
        }
        guard SSL_CTX_use_PrivateKey(context, key.pointer) == 1 else {
            throw .invalidCredentials(OpenSSLError.reason(or: "the private key was refused"))
        }
    }

    deinit { SSL_CTX_free(context) }

    /// New credentials from the same files, read again (after a certificate
    /// was renewed). Sessions already made keep these.
    package func reloaded() throws(TLSError) -> TLSCredentials {
        guard let files else { throw .invalidCredentials("these credentials were not loaded from files") }
        return try TLSCredentials(files: files)
    }
}
