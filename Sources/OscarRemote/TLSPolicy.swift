/// How a node that runs TLS on its cluster port treats its connections: the
/// credentials every session is made from, whether peers without TLS are
/// still accepted (the rolling switch), and the decisions a connection asks
/// for, as pure functions so they are tested without a socket.
///
/// Every dialled connection runs TLS. An accepted one is judged by its
/// first byte: a TLS record starts with its content type, 0x16 for the
/// ClientHello; Oscar's plaintext preamble starts with `O` (0x4f, §1 of
/// PROTOCOL.md). The initiator always writes first in both protocols, so
/// the acceptor can wait for that byte before it sends anything.
package struct TLSPolicy: Sendable {
    /// The credentials the node starts with; `Transport` holds the current
    /// ones (a reload replaces them there).
    package var credentials: TLSCredentials
    /// A TLS node that also accepts plaintext, HMAC-only peers
    /// (`tls-plaintext=accept`): for switching a running cluster to TLS one
    /// node at a time. It still dials with TLS.
    package var acceptsPlaintext: Bool

    package init(credentials: TLSCredentials, acceptsPlaintext: Bool = false) {
        self.credentials = credentials
        self.acceptsPlaintext = acceptsPlaintext
    }

    /// What an accepted connection speaks, from its first byte.
    package enum Opening: Equatable, Sendable {
        /// TLS, or something TLS refuses with a typed error of its own.
        case tls
        /// Oscar's plaintext preamble, and plaintext is accepted.
        case plaintext
        /// Oscar's plaintext preamble, and plaintext is refused: the peer is
        /// told why in plaintext (a `reject` frame), then closed.
        case refusedPlaintext
    }

    package func opening(firstByte: UInt8) -> Opening {
        guard firstByte == Self.preambleFirstByte else { return .tls }
        return acceptsPlaintext ? .plaintext : .refusedPlaintext
    }

    /// The first byte of every TLS connection: a handshake record's type.
    package static let handshakeRecordType: UInt8 = 0x16

    /// The first byte of Oscar's preamble (`OSCR`).
    package static let preambleFirstByte = Handshake.magic[0]

    /// What a TLS node tells a plaintext peer it refuses.
    package static let plaintextRefused =
        "this node requires TLS on its cluster port (tls-plaintext=refuse); the peer has no TLS certificate configured"

    /// Why a dialled TLS connection fails when its first byte from the peer
    /// is `firstByte`, before TLS looks at it: nil unless the peer answered
    /// with Oscar's plaintext preamble (it runs without TLS).
    package static func dialRefusal(firstByte: UInt8) -> String? {
        firstByte == preambleFirstByte
            ? "the peer does not run TLS on its cluster port (it sent Oscar's plaintext preamble)" : nil
    }

    /// The acceptor's check once the initiator's `hello` names its
    /// advertised host: the certificate it presented must name that host.
    /// Nil when it does; else the reason the connection is refused.
    package static func hostRefusal(advertisedHost host: String, certificateNames: (String) -> Bool) -> String? {
        guard !certificateNames(host) else { return nil }
        return "\(TLSError.verificationFailed(.hostMismatch)): it does not name '\(host)', the host the peer advertises"
    }
}
