import Glibc
import Oscar
import OscarDemo
import OscarTestKit

/// The cluster secret: where a command finds it, how long it must be, and how
/// a new one is made. There is no built-in default: a secret everybody can
/// read in the source protects nothing.
enum ClusterSecret {
    /// The shortest secret accepted, in bytes. Whoever took part in or
    /// watched one handshake holds an HMAC under the secret and can test
    /// guesses against it offline, millions a second and without a log line;
    /// a word or a short phrase falls to a dictionary at once, 16 random
    /// bytes do not.
    static let minimumBytes = 16

    /// The bytes `generate` draws from the kernel (printed as hex).
    static let generatedBytes = 32

    /// The most a secret file may hold: a secret is short, and a path such
    /// as /dev/zero must not be read for ever.
    static let maximumFileBytes = 4096

    /// How to get a secret, for the messages that ask for one.
    static let howToGetOne =
        "'oscar secret > FILE' makes a random one (then --secret-file FILE or OSCAR_SECRET_FILE); "
        + "'oscar cluster up' writes one to DIR/secret"

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
        return bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
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
        guard FileStream.write(path, secret + "\n", mode: 0o600) else {
            throw .failed("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    // MARK: - Checking and reading

    /// `secret` if it is long enough; otherwise a usage error naming where
    /// it came from and why the minimum exists.
    static func validated(_ secret: String, from source: String) throws(CLIError) -> String {
        guard !secret.isEmpty else { throw .usage("the cluster secret from \(source) is empty; \(howToGetOne)") }
        guard secret.utf8.count >= minimumBytes else {
            throw .usage(
                "the cluster secret from \(source) is \(secret.utf8.count) bytes; at least \(minimumBytes) are needed, "
                    + "because a peer that sees one handshake can test guesses offline and finds a short or "
                    + "dictionary secret in seconds; \(howToGetOne)")
        }
        return secret
    }

    /// The secret in the file at `path`: its text without trailing
    /// whitespace (so `oscar secret > FILE` works), at most
    /// `maximumFileBytes`. Checked for length.
    static func read(file path: String, from source: String) throws(CLIError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw .usage("cannot read the secret file \(path) (from \(source)): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: maximumFileBytes + 1)
        var filled = 0
        while filled < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else {
                throw .usage(
                    "cannot read the secret file \(path) (from \(source)): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            filled += n
        }
        guard filled <= maximumFileBytes else {
            throw .usage("the secret file \(path) (from \(source)) is over \(maximumFileBytes) bytes; is it a secret?")
        }
        let text = String(decoding: bytes[..<filled], as: UTF8.self)
        let trimmed = String(text.reversed().drop(while: \.isWhitespace).reversed())
        return try validated(trimmed, from: "\(source) (\(path))")
    }

    // MARK: - Where a command finds it

    /// The secret for a command that talks to a cluster, from the first of:
    /// `--secret`, `--secret-file`, the secret file of `--dir` (`dir`),
    /// `OSCAR_SECRET`, `OSCAR_SECRET_FILE`, and the secret file of the
    /// default cluster directory when there is one. None: a usage error
    /// that says how to get one.
    static func forClient(_ args: inout Arguments, dir: String?) throws(CLIError) -> String {
        if let flags = try fromFlags(&args) { return flags }
        if let dir { return try read(file: file(inClusterDirectory: dir), from: "--dir") }
        if let fromEnvironment = try fromEnvironment() { return fromEnvironment }
        let fallback = file(inClusterDirectory: defaultClusterDirectory)
        if access(fallback, F_OK) == 0 { return try read(file: fallback, from: "the default cluster directory") }
        throw .usage(
            "no cluster secret: give --secret-file FILE, --secret S, --dir of a cluster 'oscar cluster up' started, "
                + "or set OSCAR_SECRET_FILE or OSCAR_SECRET; \(howToGetOne)")
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
        let environment = ProcessInfoLite.environment
        let value = environment["OSCAR_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
        let path = environment["OSCAR_SECRET_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        if value != nil, path != nil { throw .usage("set OSCAR_SECRET or OSCAR_SECRET_FILE, not both") }
        if let value { return try validated(value, from: "OSCAR_SECRET") }
        if let path { return try read(file: path, from: "OSCAR_SECRET_FILE") }
        return nil
    }

    /// The secret of `oscar node`: `secret` or `secret-file`, whichever came
    /// from the stronger source (flag, then environment, then config file).
    /// None: a usage error that says how to get one.
    static func forNode(_ resolved: NodeConfiguration.Resolved) throws(CLIError) -> String {
        let config = resolved.configuration
        let rank: [NodeConfiguration.Source: Int] = [.flag: 0, .environment: 1, .file: 2, .default: 3]
        let valueSource = resolved.sources["secret"] ?? .default
        let fileSource = resolved.sources["secret-file"] ?? .default
        if let value = config.secret, let path = config.secretFile {
            guard rank[valueSource] != rank[fileSource] else {
                throw .usage("give the secret or a secret file, not both (both from \(valueSource.rawValue))")
            }
            return rank[valueSource, default: 3] < rank[fileSource, default: 3]
                ? try validated(value, from: describe("secret", valueSource))
                : try read(file: path, from: describe("secret-file", fileSource))
        }
        if let value = config.secret { return try validated(value, from: describe("secret", valueSource)) }
        if let path = config.secretFile { return try read(file: path, from: describe("secret-file", fileSource)) }
        throw .usage(
            "oscar node needs the cluster secret: --secret-file FILE (or OSCAR_SECRET_FILE, or \"secret-file\" in "
                + "--config), or --secret S (or OSCAR_SECRET); every node of a cluster uses the same one; "
                + howToGetOne)
    }

    private static func describe(_ key: String, _ source: NodeConfiguration.Source) -> String {
        switch source {
        case .flag: "--\(key)"
        case .environment: key == "secret" ? "OSCAR_SECRET" : "OSCAR_SECRET_FILE"
        case .file: "the config file's \"\(key)\""
        case .default: key
        }
    }
}
