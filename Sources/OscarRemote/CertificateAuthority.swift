internal import COpenSSL
import Glibc
import OscarRuntime

/// The cluster's certificate authority, with no tool but Oscar: a CA (an EC
/// P-256 key and a self-signed certificate) and node certificates it signs,
/// each naming the hosts its node is reached at. What `oscar certs` runs.
///
/// A node certificate: subject CN = the node's name; SANs = its hosts (IP
/// addresses as IP SANs, names as DNS SANs), which is what a peer checks;
/// extended key usage serverAuth and clientAuth, as a node is both; a random
/// 159-bit serial; SHA-256 signature.
package enum CertificateAuthority {
    /// A certificate and its private key, as PEM.
    package struct Issued: Sendable, Equatable {
        package var certificatePEM: String
        package var privateKeyPEM: String
    }

    /// Clock skew allowed for: a new certificate is valid from this long ago.
    package static let backdating: Int64 = 300
    package static let secondsPerDay: Int64 = 86_400

    /// The current time, in seconds since 1970.
    package static var now: Int64 { Int64(time(nil)) }

    // MARK: - Certificates in memory

    /// A new CA, valid over `notBefore..<notAfter` (seconds since 1970).
    package static func makeAuthority(
        commonName: String = "Oscar cluster CA", notBefore: Int64, notAfter: Int64
    ) throws(CertificateError) -> Issued {
        let key = try PrivateKey.generate()
        let certificate = try build(
            commonName: commonName, publicKey: key, notBefore: notBefore, notAfter: notAfter,
            extensions: [
                (NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign"),
                (NID_subject_key_identifier, "hash"), (NID_authority_key_identifier, "keyid:always"),
            ],
            hosts: [], issuer: nil)
        return Issued(certificatePEM: certificate.pem, privateKeyPEM: try key.pem())
    }

    /// A node certificate for `name`, naming `hosts`, signed by `authority`.
    package static func issue(
        name: String, hosts: [String], notBefore: Int64, notAfter: Int64, authority: Issued
    ) throws(CertificateError) -> Issued {
        try validate(name: name)
        guard !hosts.isEmpty else { throw .invalidArgument("a node certificate needs at least one host") }
        for host in hosts { try validate(host: host) }
        guard let caCertificate = X509Certificate.all(fromPEM: authority.certificatePEM).first else {
            throw .invalidFile("no certificate in the CA's PEM")
        }
        let caKey = try PrivateKey(pem: authority.privateKeyPEM)
        guard X509_check_private_key(caCertificate.pointer, caKey.pointer) == 1 else {
            OpenSSLError.clear()
            throw .invalidFile("the CA's key does not match its certificate")
        }
        let key = try PrivateKey.generate()
        let certificate = try build(
            commonName: name, publicKey: key, notBefore: notBefore, notAfter: notAfter,
            extensions: [
                (NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, "critical,digitalSignature"),
                (NID_ext_key_usage, "serverAuth,clientAuth"), (NID_subject_key_identifier, "hash"),
                (NID_authority_key_identifier, "keyid:always"),
            ],
            hosts: hosts, issuer: (caCertificate, caKey))
        return Issued(certificatePEM: certificate.pem, privateKeyPEM: try key.pem())
    }

    /// What the first certificate in `pem` says.
    package static func summary(ofPEM pem: String) throws(CertificateError) -> CertificateSummary {
        guard let certificate = X509Certificate.all(fromPEM: pem).first else {
            throw .invalidFile("no PEM certificate found")
        }
        return certificate.summary
    }

    /// A certificate's fields, extensions and SANs, then its signature.
    /// `issuer` nil: self-signed by `publicKey`.
    private static func build(
        commonName: String, publicKey: PrivateKey, notBefore: Int64, notAfter: Int64,
        extensions: [(Int32, String)], hosts: [String], issuer: (certificate: X509Certificate, key: PrivateKey)?
    ) throws(CertificateError) -> X509Certificate {
        guard notBefore < notAfter else { throw .invalidArgument("the certificate would never be valid") }
        OpenSSLError.clear()
        guard let raw = X509_new() else { throw .openSSL(OpenSSLError.reason(or: "out of memory")) }
        let certificate = X509Certificate(taking: raw)
        let x509 = certificate.pointer
        let name = X509_get_subject_name(x509)
        var ok =
            X509_set_version(x509, 2) == 1 && setRandomSerial(x509)
            && ASN1_TIME_set(X509_getm_notBefore(x509), time_t(notBefore)) != nil
            && ASN1_TIME_set(X509_getm_notAfter(x509), time_t(notAfter)) != nil
            && addEntry("O", "Oscar", to: name) && addEntry("CN", commonName, to: name)
            && X509_set_issuer_name(x509, issuer.map { X509_get_subject_name($0.certificate.pointer) } ?? name) == 1
            && X509_set_pubkey(x509, publicKey.pointer) == 1
        for (nid, value) in extensions where ok {
            ok = oscar_x509_add_extension(x509, issuer?.certificate.pointer ?? x509, nid, value) == 1
        }
        if ok, !hosts.isEmpty { ok = addSubjectAlternativeNames(hosts, to: x509) }
        if ok { ok = X509_sign(x509, (issuer?.key ?? publicKey).pointer, EVP_sha256()) > 0 }
        guard ok else { throw .openSSL(OpenSSLError.reason(or: "cannot build the certificate")) }
        return certificate
    }

    /// One attribute of a name; its length given, as Swift's bytes end in no NUL.
    private static func addEntry(_ field: String, _ value: String, to name: OpaquePointer?) -> Bool {
        let bytes = Array(value.utf8)
        return X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, bytes, Int32(bytes.count), -1, 0) == 1
    }

    private static func setRandomSerial(_ x509: OpaquePointer) -> Bool {
        guard let serial = BN_new() else { return false }
        defer { BN_free(serial) }
        // 159 bits: positive in DER, and unpredictable.
        return BN_rand(serial, 159, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1
            && BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x509)) != nil
    }

    private static func addSubjectAlternativeNames(_ hosts: [String], to x509: OpaquePointer) -> Bool {
        guard let names = oscar_general_names_new() else { return false }
        defer { GENERAL_NAMES_free(names) }
        for host in hosts {
            guard let name = GENERAL_NAME_new() else { return false }
            let address = IPAddressText.parse(host)
            let bytes = address ?? Array(host.utf8)
            guard let value = address != nil ? ASN1_OCTET_STRING_new() : ASN1_IA5STRING_new() else {
                GENERAL_NAME_free(name)
                return false
            }
            // The name owns the value from here, and the stack the name.
            GENERAL_NAME_set0_value(name, address != nil ? GEN_IPADD : GEN_DNS, value)
            guard ASN1_STRING_set(value, bytes, Int32(bytes.count)) == 1 else {
                GENERAL_NAME_free(name)
                return false
            }
            guard oscar_general_names_push(names, name) > 0 else {
                GENERAL_NAME_free(name)
                return false
            }
        }
        return X509_add1_ext_i2d(
            x509, NID_subject_alt_name, UnsafeMutableRawPointer(names), 0, UInt(X509V3_ADD_DEFAULT)) == 1
    }

    // MARK: - Checks

    /// A node name: it names a file and the certificate's CN.
    package static func validate(name: String) throws(CertificateError) {
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                || byte == 0x2d || byte == 0x5f || byte == 0x2e
        }
        guard !name.isEmpty, name.utf8.count <= 64, allowed, !name.hasPrefix("."), name != "ca" else {
            throw .invalidArgument(
                "'\(name)' is not a node name: 1 to 64 letters, digits, '-', '_' or '.', not starting with '.', not 'ca'"
            )
        }
    }

    /// A host: an IPv4 or IPv6 address, or a DNS name (letters, digits and
    /// '-' in dot-separated labels of at most 63 bytes).
    package static func validate(host: String) throws(CertificateError) {
        if IPAddressText.parse(host) != nil { return }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        let valid =
            host.utf8.count <= 253
            && labels.allSatisfy { label in
                !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                    && label.utf8.allSatisfy { byte in
                        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a)
                            || (byte >= 0x61 && byte <= 0x7a) || byte == 0x2d
                    }
            }
        guard valid else { throw .invalidArgument("'\(host)' is not an IP address or a DNS name") }
    }
}

/// Why a certificate could not be made, read or written.
package enum CertificateError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A bad name, host or validity.
    case invalidArgument(String)
    /// A file that should hold a certificate or key does not.
    case invalidFile(String)
    /// A file is there already and would be overwritten.
    case exists(String)
    /// A file could not be read or written.
    case io(String)
    /// OpenSSL refused; its reason.
    case openSSL(String)

    package var description: String {
        switch self {
        case .invalidArgument(let text), .invalidFile(let text), .io(let text): text
        case .exists(let path): "\(path) exists; give --force to replace it"
        case .openSSL(let reason): "OpenSSL: \(reason)"
        }
    }
}
