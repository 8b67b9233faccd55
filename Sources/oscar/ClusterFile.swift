import Oscar

/// A cluster file: `oscar cluster up`'s options as one JSON object, so a
/// project keeps how its local cluster starts beside its code and anyone
/// starts it with `oscar cluster up --file oscar-cluster.json`:
///
///     {"nodes": 3, "exec": ".build/debug/inventory-node", "arguments": ["--verbose"]}
///
/// The keys are the option names, without dashes in front; `arguments` is
/// what follows `--` on the command line (the application's own). A flag on
/// the command line wins over the file. Paths (`exec`, `dir`, `secret-file`)
/// are relative to the file's folder, as docker-compose reads its file, so
/// the file means the same from wherever it is run; without `dir`, the
/// cluster's directory is `.oscar/cluster` beside the file. The other
/// `cluster` subcommands, and `ask`, `tell`, `members`, `leave` and `down`,
/// take `--file` too, for that directory.
enum ClusterFile {
    /// Keys whose value is a whole number.
    static let numberKeys: Set<String> = ["nodes", "base-port", "http-base-port"]
    /// Keys whose value is text; the paths among them are resolved.
    static let textKeys: Set<String> = ["timeout", "dir", "secret-file", "exec"]
    static let pathKeys: Set<String> = ["dir", "secret-file", "exec"]
    /// Keys whose value is true or false: the `--switch`es.
    static let switchKeys: Set<String> = ["no-supervise", "tls"]

    /// What a file says, as the command line would have said it.
    struct Contents: Equatable {
        var options: [String: String] = [:]
        var switches: Set<String> = []
        var arguments: [String]?
        /// The cluster's directory: the file's `dir`, else `.oscar/cluster`
        /// beside the file, so the file names one cluster wherever it is
        /// used from.
        var directory = ".oscar/cluster"
    }

    /// A cluster file is a few lines; anything past this is not one.
    static let maximumBytes = 64 * 1024

    static func read(_ path: String) throws(CLIError) -> Contents {
        let text = try FileStream.read(path, atMost: maximumBytes)
        let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        return try parse(text, folder: folder.isEmpty ? "/" : folder, name: path)
    }

    /// Parses a file's text; `name` is the file as errors name it.
    static func parse(_ text: String, folder: String, name: String) throws(CLIError) -> Contents {
        let value: CBORValue
        do { value = try JSONBridge.cbor(fromJSON: text) } catch { throw .usage("\(name): not JSON: \(error)") }
        guard case .map(let entries) = value else { throw .usage("\(name): must hold one JSON object") }
        var contents = Contents(directory: resolve(".oscar/cluster", in: folder))
        for (key, value) in entries {
            guard case .text(let key) = key else { throw .usage("\(name): keys must be text") }
            switch value {
            case .unsigned(let n) where numberKeys.contains(key):
                contents.options[key] = "\(n)"
            case .text(let text) where textKeys.contains(key):
                contents.options[key] = pathKeys.contains(key) ? resolve(text, in: folder) : text
            case .bool(let on) where switchKeys.contains(key):
                if on { contents.switches.insert(key) }
            case .array(let items) where key == "arguments":
                contents.arguments = try items.map { (item) throws(CLIError) in
                    guard case .text(let argument) = item else {
                        throw .usage("\(name): \"arguments\" must be a list of strings")
                    }
                    return argument
                }
            default:
                let known = (numberKeys.union(textKeys).union(switchKeys).union(["arguments"])).sorted()
                guard known.contains(key) else {
                    throw .usage("\(name): unknown key \"\(key)\" (known: \(known.joined(separator: ", ")))")
                }
                throw .usage("\(name): \"\(key)\" must be \(kind(of: key))")
            }
        }
        if let dir = contents.options["dir"] { contents.directory = dir }
        return contents
    }

    static func kind(of key: String) -> String {
        if numberKeys.contains(key) { return "a whole number" }
        if switchKeys.contains(key) { return "true or false" }
        return "a string"
    }

    static func resolve(_ path: String, in folder: String) -> String {
        path.hasPrefix("/") || folder == "." ? path : "\(folder)/\(path)"
    }
}
