/// Why a TLS session, or the credentials it runs on, failed. A session that
/// has failed stays failed: every later call throws the same error.
package enum TLSError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The credentials (certificate chain, key, CA) could not be loaded.
    case invalidCredentials(String)
    /// The handshake failed for a reason other than the peer's certificate:
    /// OpenSSL's reason, such as "wrong version number" for a peer that does
    /// not speak TLS, or an alert the peer sent ("tlsv1 alert unknown ca").
    case handshakeFailed(String)
    /// The peer sent no certificate; a node must present one.
    case peerCertificateMissing
    /// The peer's certificate was refused.
    case verificationFailed(TLSVerificationFailure)
    /// A record after the handshake was malformed, failed its integrity
    /// check, or was an alert; or the caller misused the session.
    case protocolError(String)
    /// The peer closed the session (close_notify), or the session was closed
    /// here.
    case closed

    package var description: String {
        switch self {
        case .invalidCredentials(let reason): "TLS credentials: \(reason)"
        case .handshakeFailed(let reason): "TLS handshake failed: \(reason)"
        case .peerCertificateMissing: "TLS handshake failed: the peer presented no certificate"
        case .verificationFailed(let failure): "TLS peer certificate refused: \(failure)"
        case .protocolError(let reason): "TLS protocol error: \(reason)"
        case .closed: "TLS session closed"
        }
    }
}

/// Why a peer's certificate was refused: X.509 verification's result.
package enum TLSVerificationFailure: Equatable, Sendable, CustomStringConvertible {
    /// Its notAfter has passed.
    case expired
    /// Its notBefore has not come yet.
    case notYetValid
    /// It does not chain to the cluster CA (another CA, or self-signed).
    case unknownCA
    /// It does not name the host the peer is expected to be (SAN).
    case hostMismatch
    /// Another verification error: OpenSSL's code and reason.
    case other(code: Int, reason: String)

    package var description: String {
        switch self {
        case .expired: "certificate has expired"
        case .notYetValid: "certificate is not yet valid"
        case .unknownCA: "certificate is not signed by the cluster CA"
        case .hostMismatch: "certificate does not name the expected host"
        case .other(let code, let reason): "\(reason) (X509 error \(code))"
        }
    }
}
