import Glibc
import Oscar

/// The certificates of a local TLS cluster (`oscar cluster up --tls`), in
/// `DIR/tls`: the CA, one certificate per node (`node-PORT`) and one for
/// the CLI's own connections (`cli`), each naming 127.0.0.1. And the TLS
/// settings a CLI command talks to a cluster with.
enum ClusterTLS {
    static func directory(inClusterDirectory dir: String) -> CertificateDirectory {
        CertificateDirectory("\(dir)/tls")
    }

    /// The name of node `port`'s certificate.
    static func nodeName(_ port: Int) -> String { "node-\(port)" }

    /// A new CA in `DIR/tls` (an earlier one is replaced: a new cluster),
    /// and the CLI's certificate for `host`.
    static func create(inClusterDirectory dir: String, host: String) throws(CLIError) {
        let certs = directory(inClusterDirectory: dir)
        do {
            try certs.createAuthority(force: true)
            try certs.issue(name: "cli", hosts: [host], force: true)
        } catch {
            throw .failed("cannot make the cluster's certificates in \(certs.path): \(error)")
        }
    }

    /// Node `port`'s certificate for `host`, issued now, and the node
    /// settings that present it.
    static func nodeArguments(inClusterDirectory dir: String, port: Int, host: String) throws(CLIError) -> [String] {
        let certs = directory(inClusterDirectory: dir)
        let name = nodeName(port)
        do {
            try certs.issue(name: name, hosts: [host], force: true)
        } catch {
            throw .failed("cannot issue \(name)'s certificate in \(certs.path): \(error)")
        }
        return flags(certs, name)
    }

    /// The node settings that present `name`'s certificate from `certs`
    /// (paths made absolute: the node runs from elsewhere).
    static func flags(_ certs: CertificateDirectory, _ name: String) -> [String] {
        [
            "--tls-cert", absolute(certs.certificate(of: name)), "--tls-key", absolute(certs.key(of: name)),
            "--tls-ca", absolute(certs.caCertificate),
        ]
    }

    /// In code, the same: `name`'s certificate and key, and the CA.
    static func settings(_ certs: CertificateDirectory, _ name: String) -> ClusterNode.Settings.TLS {
        .init(
            certificateFile: certs.certificate(of: name), privateKeyFile: certs.key(of: name),
            caFile: certs.caCertificate)
    }

    /// The TLS of a client command: `--tls-cert`, `--tls-key` and `--tls-ca`
    /// (all three), else the node settings `OSCAR_TLS_*` from the environment,
    /// else the CLI certificate of the cluster directory `dir`
    /// (the default one when nil) when `oscar cluster up --tls` made one,
    /// else none (plaintext).
    static func client(_ args: inout Arguments, dir: String?) throws(CLIError) -> ClusterNode.Settings.TLS? {
        let given = (args.option("tls-cert"), args.option("tls-key"), args.option("tls-ca"))
        switch given {
        case (let cert?, let key?, let ca?):
            return .init(certificateFile: cert, privateKeyFile: key, caFile: ca)
        case (nil, nil, nil):
            // A node's own settings (a command run beside the node, in its
            // container), else, as for the secret, the default cluster
            // directory when none is named.
            return try environment() ?? cli(inClusterDirectory: dir ?? ClusterSecret.defaultClusterDirectory)
        default:
            throw .usage("give --tls-cert, --tls-key and --tls-ca together")
        }
    }

    /// `OSCAR_TLS_CERT`, `OSCAR_TLS_KEY` and `OSCAR_TLS_CA`, a node's
    /// settings, when all three are set.
    static func environment() throws(CLIError) -> ClusterNode.Settings.TLS? {
        switch environmentFiles() {
        case (nil, nil, nil): return nil
        case (let cert?, let key?, let ca?): return .init(certificateFile: cert, privateKeyFile: key, caFile: ca)
        default: throw .usage("set OSCAR_TLS_CERT, OSCAR_TLS_KEY, OSCAR_TLS_CA together, or none of them")
        }
    }

    /// The CA file when it is given without a certificate and key
    /// (`--tls-ca` alone, else `OSCAR_TLS_CA` alone): a client that checks
    /// the node's certificate and presents none, as a health probe does.
    static func caAlone(_ args: inout Arguments) -> String? {
        var look = args
        guard look.option("tls-cert") == nil, look.option("tls-key") == nil else { return nil }
        if let ca = args.option("tls-ca") { return ca }
        let environment = environmentFiles()
        return environment.cert == nil && environment.key == nil ? environment.ca : nil
    }

    /// The node's TLS variables, each nil when unset.
    private static func environmentFiles() -> (cert: String?, key: String?, ca: String?) {
        func value(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
        return (value("OSCAR_TLS_CERT"), value("OSCAR_TLS_KEY"), value("OSCAR_TLS_CA"))
    }

    /// The CLI certificate of the cluster in `dir`, when `oscar cluster up
    /// --tls` started it (its `cluster.json` says so: certificates left by
    /// an earlier TLS cluster in the directory do not count).
    static func cli(inClusterDirectory dir: String) -> ClusterNode.Settings.TLS? {
        guard ClusterCommand.readState(dir)?.tls == true else { return nil }
        return settings(directory(inClusterDirectory: dir), "cli")
    }

    /// A one-shot client node: plaintext, or TLS with `tls`.
    static func clientNode(secret: String, tls: ClusterNode.Settings.TLS?) throws(CLIError) -> ClusterNode {
        var settings = ClusterNode.Settings(secret: secret, loopCount: 1)
        settings.tls = tls
        do {
            return try ClusterNode(settings: settings)
        } catch {
            throw .failed("\(error)")
        }
    }

    private static func absolute(_ path: String) -> String { ClusterCommand.absolute(path) }
}
