import OscarRuntime

/// A node's cluster secret: where it comes from (`secret` or `secret-file`,
/// by flag, environment or config file) and what makes it acceptable.
/// Shared by the node runner and the `oscar` tool, so every node and client
/// refuses the same secrets with the same words.
package enum NodeSecret {
    /// The shortest secret accepted, in bytes. Whoever took part in or
    /// watched one handshake holds an HMAC under the secret and can test
    /// guesses against it offline, millions a second and without a log line;
    /// a word or a short phrase falls to a dictionary at once, 16 random
    /// bytes do not.
    package static let minimumBytes = 16
    /// The largest secret file read: a larger one is no secret.
    package static let maximumFileBytes = 4096

    package static let howToGetOne =
        "'oscar secret > FILE' makes a random one (then --secret-file FILE or OSCAR_SECRET_FILE); "
        + "'oscar cluster up' writes one to DIR/secret"

    /// A bad secret or secret file, said so that a person can mend it.
    package struct Problem: Error, CustomStringConvertible {
        package let description: String
    }

    /// `secret`, if at least `minimumBytes` long.
    package static func validated(_ secret: String, from source: String) throws(Problem) -> String {
        guard !secret.isEmpty else {
            throw Problem(description: "the cluster secret from \(source) is empty; \(howToGetOne)")
        }
        guard secret.utf8.count >= minimumBytes else {
            throw Problem(
                description: "the cluster secret from \(source) is \(secret.utf8.count) bytes; at least "
                    + "\(minimumBytes) are needed, because a peer that sees one handshake can test guesses offline "
                    + "and finds a short or dictionary secret in seconds; \(howToGetOne)")
        }
        return secret
    }

    /// The secret in the file at `path`, trailing white space dropped.
    package static func read(file path: String, from source: String) throws(Problem) -> String {
        let text: String
        do {
            text = try ProcessControl.readFile(path, atMost: maximumFileBytes)
        } catch {
            throw Problem(description: "the secret file (from \(source)): \(error)")
        }
        let trimmed = String(text.reversed().drop(while: \.isWhitespace).reversed())
        return try validated(trimmed, from: "\(source) (\(path))")
    }

    /// The secret a node's resolved configuration names. Given both as a
    /// value and as a file, the higher-ranked source wins (flag, then
    /// environment, then file); both from one source is refused.
    package static func forNode(_ resolved: NodeConfiguration.Resolved) throws(Problem) -> String {
        let config = resolved.configuration
        let rank: [NodeConfiguration.Source: Int] = [.flag: 0, .environment: 1, .file: 2, .default: 3]
        let valueSource = resolved.sources["secret"] ?? .default
        let fileSource = resolved.sources["secret-file"] ?? .default
        if let value = config.secret, let path = config.secretFile {
            guard rank[valueSource] != rank[fileSource] else {
                throw Problem(
                    description: "give the secret or a secret file, not both (both from \(valueSource.rawValue))")
            }
            return rank[valueSource, default: 3] < rank[fileSource, default: 3]
                ? try validated(value, from: describe("secret", valueSource))
                : try read(file: path, from: describe("secret-file", fileSource))
        }
        if let value = config.secret { return try validated(value, from: describe("secret", valueSource)) }
        if let path = config.secretFile { return try read(file: path, from: describe("secret-file", fileSource)) }
        throw Problem(
            description: "a node needs the cluster secret: --secret-file FILE (or OSCAR_SECRET_FILE, or "
                + "\"secret-file\" in --config), or --secret S (or OSCAR_SECRET); every node of a cluster uses "
                + "the same one; \(howToGetOne)")
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
