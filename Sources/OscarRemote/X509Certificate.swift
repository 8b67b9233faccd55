internal import COpenSSL
import Glibc

/// One X.509 certificate, owning its OpenSSL object (freed once, in deinit).
/// Internal: no layer above the transport sees an OpenSSL type; they get a
/// `CertificateSummary`.
final class X509Certificate {
    /// The `X509 *`, owned.
    let pointer: OpaquePointer

    /// Takes ownership of `pointer` (one reference).
    init(taking pointer: OpaquePointer) { self.pointer = pointer }

    /// Shares `pointer`: takes a reference of its own.
    init(sharing pointer: OpaquePointer) {
        X509_up_ref(pointer)
        self.pointer = pointer
    }

    deinit { X509_free(pointer) }

    /// Every certificate in a PEM text, in order (a chain: leaf first).
    static func all(fromPEM pem: String) -> [X509Certificate] {
        OpenSSLError.clear()
        var certificates: [X509Certificate] = []
        MemoryBIO.over(pem) { bio in
            while let x509 = PEM_read_bio_X509(bio, nil, nil, nil) {
                certificates.append(X509Certificate(taking: x509))
            }
        }
        // The loop ends at the end of the text with a "no start line" error.
        OpenSSLError.clear()
        return certificates
    }

    /// The certificate as PEM.
    var pem: String { MemoryBIO.writing { PEM_write_bio_X509($0, pointer) } ?? "" }

    /// Subject, issuer, validity, SANs and fingerprint.
    var summary: CertificateSummary {
        var fingerprint = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        if X509_digest(pointer, EVP_sha256(), &fingerprint, &length) != 1 { length = 0 }
        return CertificateSummary(
            subject: Self.text(of: X509_get_subject_name(pointer)),
            issuer: Self.text(of: X509_get_issuer_name(pointer)),
            notBefore: Self.seconds(X509_get0_notBefore(pointer)),
            notAfter: Self.seconds(X509_get0_notAfter(pointer)),
            subjectAlternativeNames: subjectAlternativeNames,
            isCA: X509_check_ca(pointer) != 0,
            sha256Fingerprint: Array(fingerprint.prefix(Int(length))))
    }

    /// "IP:127.0.0.1", "DNS:node1": the SANs of the kinds Oscar issues.
    private var subjectAlternativeNames: [String] {
        guard let raw = X509_get_ext_d2i(pointer, NID_subject_alt_name, nil, nil) else { return [] }
        let names = OpaquePointer(raw)
        defer { GENERAL_NAMES_free(names) }
        var result: [String] = []
        for i in 0..<oscar_general_names_count(names) {
            guard let name = oscar_general_names_at(names, i) else { continue }
            var kind: Int32 = 0
            guard let value = GENERAL_NAME_get0_value(name, &kind) else { continue }
            let string = value.assumingMemoryBound(to: ASN1_STRING.self)
            let bytes = Self.bytes(of: string)
            switch kind {
            case GEN_DNS: result.append("DNS:" + String(decoding: bytes, as: UTF8.self))
            case GEN_IPADD: result.append("IP:" + IPAddressText.format(bytes))
            default: continue
            }
        }
        return result
    }

    static func bytes(of string: UnsafeMutablePointer<ASN1_STRING>) -> [UInt8] {
        let count = Int(ASN1_STRING_length(string))
        guard count > 0, let data = ASN1_STRING_get0_data(string) else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: count))
    }

    /// A name in RFC 2253 form, such as "CN=node1,O=Oscar cluster".
    private static func text(of name: OpaquePointer?) -> String {
        guard let name else { return "" }
        return MemoryBIO.writing { oscar_x509_name_print_rfc2253($0, name) >= 0 ? 1 : 0 } ?? ""
    }

    /// Seconds since 1970 (UTC) of an ASN.1 time.
    private static func seconds(_ time: UnsafePointer<ASN1_TIME>?) -> Int64 {
        guard let time else { return 0 }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return 0 }
        return Int64(timegm(&parts))
    }
}

/// An EVP_PKEY, owned (freed in deinit).
final class PrivateKey {
    let pointer: OpaquePointer

    private init(taking pointer: OpaquePointer) { self.pointer = pointer }

    deinit { EVP_PKEY_free(pointer) }

    /// A new EC P-256 key.
    static func generate() throws(CertificateError) -> PrivateKey {
        OpenSSLError.clear()
        guard let key = oscar_ec_p256_key() else { throw .openSSL(OpenSSLError.reason(or: "key generation failed")) }
        return PrivateKey(taking: key)
    }

    /// The first key in `pem`. One protected by a passphrase is refused:
    /// the callback supplies none (OpenSSL's default would prompt on the
    /// terminal, blocking).
    convenience init(pem: String) throws(CertificateError) {
        OpenSSLError.clear()
        var key: OpaquePointer?
        MemoryBIO.over(pem) { bio in key = PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil) }
        guard let key else { throw .invalidFile("no private key found (\(OpenSSLError.reason(or: "unreadable")))") }
        self.init(taking: key)
    }

    /// PKCS #8 PEM, unencrypted (the file's mode protects it).
    func pem() throws(CertificateError) -> String {
        guard let text = MemoryBIO.writing({ PEM_write_bio_PrivateKey($0, pointer, nil, nil, 0, nil, nil) }) else {
            throw .openSSL(OpenSSLError.reason(or: "cannot write the key"))
        }
        return text
    }
}

/// What a certificate says, for people (`oscar certs show`) and for the
/// transport (the peer a session authenticated).
package struct CertificateSummary: Sendable, Equatable, CustomStringConvertible {
    package var subject: String
    package var issuer: String
    /// Validity, in seconds since 1970 UTC.
    package var notBefore: Int64
    package var notAfter: Int64
    /// "IP:…" and "DNS:…" entries, in the certificate's order.
    package var subjectAlternativeNames: [String]
    package var isCA: Bool
    package var sha256Fingerprint: [UInt8]

    /// The fingerprint as `openssl x509 -fingerprint -sha256` prints it.
    package var fingerprintText: String {
        sha256Fingerprint.map { ($0 < 16 ? "0" : "") + String($0, radix: 16, uppercase: true) }
            .joined(separator: ":")
    }

    package var description: String {
        """
        subject:     \(subject)
        issuer:      \(issuer)
        not before:  \(UTCTime.text(notBefore))
        not after:   \(UTCTime.text(notAfter))
        names (SAN): \(subjectAlternativeNames.isEmpty ? "none" : subjectAlternativeNames.joined(separator: ", "))
        CA:          \(isCA ? "yes" : "no")
        SHA-256:     \(fingerprintText)
        """
    }
}

/// Seconds since 1970 as "2026-12-02 09:57:43 UTC".
enum UTCTime {
    static func text(_ seconds: Int64) -> String {
        var time = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return "\(seconds)" }
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) UTC"
    }
}

/// IP addresses as text and back (inet_pton/inet_ntop).
enum IPAddressText {
    /// The 4 or 16 bytes of an IPv4 or IPv6 address; nil for anything else.
    static func parse(_ text: String) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET, text, &bytes) == 1 { return Array(bytes.prefix(4)) }
        if inet_pton(AF_INET6, text, &bytes) == 1 { return bytes }
        return nil
    }

    static func format(_ bytes: [UInt8]) -> String {
        let family: Int32
        switch bytes.count {
        case 4: family = AF_INET
        case 16: family = AF_INET6
        default: return bytes.map { String($0) }.joined(separator: ".")
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(family, bytes, &text, socklen_t(text.count)) != nil else { return "?" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// OpenSSL memory BIOs for PEM in and out.
enum MemoryBIO {
    /// Runs `body` with a read-only BIO over `text`.
    static func over(_ text: String, _ body: (OpaquePointer) -> Void) {
        var text = text
        text.withUTF8 { utf8 in
            guard let base = utf8.baseAddress, let bio = BIO_new_mem_buf(base, Int32(utf8.count)) else { return }
            defer { BIO_free(bio) }
            body(bio)
        }
    }

    /// What `body` writes to a fresh memory BIO, as text; nil when it
    /// returns anything but 1.
    static func writing(_ body: (OpaquePointer) -> Int32) -> String? {
        guard let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard body(bio) == 1 else { return nil }
        var data: UnsafeMutablePointer<CChar>?
        let count = oscar_bio_mem_data(bio, &data)
        guard count > 0, let data else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: count), as: UTF8.self)
    }
}

/// The calling thread's OpenSSL error queue. OpenSSL reports failures there,
/// per thread; each operation starts with it empty and drains it after.
enum OpenSSLError {
    /// Empties the queue. Looks first: clearing an empty queue still
    /// resets each of its sixteen slots, about a third of a microsecond,
    /// which four records a round trip turned into W2's largest TLS cost.
    static func clear() { if ERR_peek_error() != 0 { ERR_clear_error() } }

    /// Empties the queue; the first error's code and reason ("certificate
    /// verify failed"), or nil when it was empty.
    static func drain() -> (code: UInt, reason: String)? {
        let first = ERR_get_error()
        ERR_clear_error()
        guard first != 0 else { return nil }
        if let reason = ERR_reason_error_string(first) { return (first, String(cString: reason)) }
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(first, &text, text.count)
        return (first, String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// The reason of the first queued error, or `fallback`.
    static func reason(or fallback: String) -> String { drain()?.reason ?? fallback }
}
