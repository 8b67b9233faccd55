import Testing

@testable import OscarRemote

/// The decisions a TLS node's connections ask for, without a socket.
@Suite(.timeLimit(.minutes(4))) struct TLSPolicyTests {
    let pki: TestPKI

    init() throws { pki = try TestPKI.shared.get() }

    @Test func theFirstByteTellsTLSFromOscarsPlaintextPreamble() throws {
        let credentials = try pki.credentials(pki.server)
        let refusing = TLSPolicy(credentials: credentials)
        let accepting = TLSPolicy(credentials: credentials, acceptsPlaintext: true)
        #expect(Handshake.preamble.first == 0x4f)
        #expect(refusing.opening(firstByte: 0x16) == .tls && accepting.opening(firstByte: 0x16) == .tls)
        #expect(refusing.opening(firstByte: 0x4f) == .refusedPlaintext)
        #expect(accepting.opening(firstByte: 0x4f) == .plaintext)
        // Anything else is TLS's to refuse, with its own typed error.
        for byte: UInt8 in [0x00, 0x15, 0x17, 0x47, 0xff] {
            #expect(refusing.opening(firstByte: byte) == .tls && accepting.opening(firstByte: byte) == .tls)
        }
        #expect(TLSPolicy.dialRefusal(firstByte: 0x4f) != nil)
        #expect(TLSPolicy.dialRefusal(firstByte: 0x16) == nil && TLSPolicy.dialRefusal(firstByte: 0x15) == nil)
    }

    @Test func theAdvertisedHostMustBeNamedByThePeersCertificate() {
        let names: Set<String> = ["127.0.0.1", "node-1.oscar"]
        #expect(TLSPolicy.hostRefusal(advertisedHost: "127.0.0.1", certificateNames: names.contains) == nil)
        #expect(TLSPolicy.hostRefusal(advertisedHost: "node-1.oscar", certificateNames: names.contains) == nil)
        let refusal = TLSPolicy.hostRefusal(advertisedHost: "10.0.0.7", certificateNames: names.contains)
        #expect(refusal?.hasPrefix(TLSError.verificationFailed(.hostMismatch).description) == true)
        #expect(refusal?.contains("'10.0.0.7'") == true)
    }
}
