import Glibc
import Oscar
import OscarDemo
import OscarTestKit

/// The cluster secret: where a command finds it, how long it must be, and how
/// a new one is made. There is no built-in default: a secret everybody can
/// read in the source protects nothing.
enum ClusterSecret {
    /// The bytes `generate` draws from the kernel (printed as hex).
    static let generatedBytes = 32

    /// How to get a secret, for the messages that ask for one.
    static var howToGetOne: String { NodeSecret.howToGetOne }

    /// The file `oscar cluster up` writes the secret to (mode 0600), read by
    /// every command given the same `--dir`.
    static func file(inClusterDirectory dir: String) -> String { "\(dir)/secret" }

    /// The cluster directory commands use when given no `--dir`.
    static let defaultClusterDirectory = ".oscar/cluster"

    // MARK: - Making one

    /// A new secret: `generatedBytes` from /dev/urandom, as lowercase hex.
    static func generate() throws(CLIError) -> String {
        let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .failed("cannot open /dev/urandom: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: generatedBytes)
        var filled = 0
        while filled < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw .failed("cannot read /dev/urandom: \(String(cString: strerror(errno)))") }
            filled += n
        }
        return bytes.hex
    }

    /// `oscar secret`: prints a new random secret.
    static func command(_ args: inout Arguments) throws(CLIError) {
        try args.rejectUnknownOptions()
        guard args.positionals.isEmpty else { throw .usage("usage: oscar secret") }
        print(try generate())
    }

    /// Writes a new secret file, readable by its owner only. An existing
    /// file is replaced, not rewritten in place, so its old mode cannot stay.
    static func write(_ secret: String, to path: String) throws(CLIError) {
        unlink(path)
        try FileStream.replace(path, with: secret + "\n", mode: 0o600)
    }

    // MARK: - Checking and reading

    /// `NodeSecret.validated`, as a usage error.
    static func validated(_ secret: String, from source: String) throws(CLIError) -> String {
        do { return try NodeSecret.validated(secret, from: source) } catch { throw .usage("\(error)") }
    }

    /// `NodeSecret.read`, as a usage error.
    static func read(file path: String, from source: String) throws(CLIError) -> String {
        do { return try NodeSecret.read(file: path, from: source) } catch { throw .usage("\(error)") }
    }

    // MARK: - Where a command finds it

    /// The secret for a command that talks to a cluster, from the first of:
    /// `--secret`, `--secret-file`, the secret file of `--dir` (`dir`),
    /// `OSCAR_SECRET`, `OSCAR_SECRET_FILE`, and the secret file of the
    /// default cluster directory when there is one. None: a usage error
    /// that says how to get one.
    static func forClient(_ args: inout Arguments, dir: String?) throws(CLIError) -> String {
        if let secret = try forClientIfGiven(&args, dir: dir) { return secret }
        throw .usage(
            "no cluster secret: give --secret-file FILE, --secret S, --dir of a cluster 'oscar cluster up' started, "
                + "or set OSCAR_SECRET_FILE or OSCAR_SECRET; \(howToGetOne)")
    }

    /// The same search, with nil when no source names a secret (one that
    /// names an unreadable or weak secret is still an error).
    static func forClientIfGiven(_ args: inout Arguments, dir: String?) throws(CLIError) -> String? {
        if let flags = try fromFlags(&args) { return flags }
        if let dir { return try read(file: file(inClusterDirectory: dir), from: "--dir") }
        if let fromEnvironment = try fromEnvironment() { return fromEnvironment }
        let fallback = file(inClusterDirectory: defaultClusterDirectory)
        if access(fallback, F_OK) == 0 { return try read(file: fallback, from: "the default cluster directory") }
        return nil
    }

    /// `--secret`, else the file of `--secret-file`; nil when neither is
    /// given (both is an error).
    static func fromFlags(_ args: inout Arguments) throws(CLIError) -> String? {
        let flag = args.option("secret")
        let flagFile = args.option("secret-file")
        if flag != nil, flagFile != nil { throw .usage("give --secret or --secret-file, not both") }
        if let flag { return try validated(flag, from: "--secret") }
        if let flagFile { return try read(file: flagFile, from: "--secret-file") }
        return nil
    }

    /// `OSCAR_SECRET`, else the file named by `OSCAR_SECRET_FILE`; nil when
    /// neither is set (both set is an error: which one is meant?).
    static func fromEnvironment() throws(CLIError) -> String? {
        let environment = ProcessControl.environment
        let value = environment["OSCAR_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
        let path = environment["OSCAR_SECRET_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        if value != nil, path != nil { throw .usage("set OSCAR_SECRET or OSCAR_SECRET_FILE, not both") }
        if let value { return try validated(value, from: "OSCAR_SECRET") }
        if let path { return try read(file: path, from: "OSCAR_SECRET_FILE") }
        return nil
    }
}
