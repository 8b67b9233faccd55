/// The command line after the command name: positionals, `--flag value`
/// options and `--switch` booleans. Small on purpose: no package can be fetched.
struct Arguments {
    private(set) var positionals: [String] = []
    private var options: [String: String] = [:]
    /// Every value of each option, in order, for those that may repeat
    /// (`--host A --host B`); `options` keeps the last.
    private var allValues: [String: [String]] = [:]
    private var switches: Set<String> = []
    private var used: Set<String> = []

    /// Options that take no value.
    static let booleanSwitches: Set<String> = [
        "json", "help", "quiet", "print-config", "check-config", "follow", "graceful", "netns", "list", "trace",
        "supervise", "no-supervise", "crash", "inject-faults", "tls", "force", "bulk-lane", "pin",
    ]

    init(_ raw: ArraySlice<String>) throws(CLIError) {
        var rest = raw
        while let arg = rest.popFirst() {
            if arg == "--" {
                positionals.append(contentsOf: rest)
                break
            }
            if arg.hasPrefix("--") {
                var name = String(arg.dropFirst(2))
                if let eq = name.firstIndex(of: "=") {
                    let (key, value) = (String(name[..<eq]), String(name[name.index(after: eq)...]))
                    options[key] = value
                    allValues[key, default: []].append(value)
                    continue
                }
                if Self.booleanSwitches.contains(name) {
                    switches.insert(name)
                    continue
                }
                guard let value = rest.popFirst() else { throw .usage("--\(name) needs a value") }
                name = String(name)
                options[name] = value
                allValues[name, default: []].append(value)
            } else if arg == "-h" {
                switches.insert("help")
            } else {
                positionals.append(arg)
            }
        }
    }

    func has(_ name: String) -> Bool { switches.contains(name) }

    /// Takes a cluster file's options and switches where the command line
    /// gave none: the command line wins.
    mutating func fillIn(from file: ClusterFile.Contents) {
        options.merge(file.options) { given, _ in given }
        switches.formUnion(file.switches)
    }

    mutating func option(_ name: String) -> String? {
        used.insert(name)
        return options[name]
    }

    /// Every value given for an option that may repeat, in order.
    mutating func values(_ name: String) -> [String] {
        used.insert(name)
        return allValues[name] ?? []
    }

    mutating func int(_ name: String, default value: Int, range: ClosedRange<Int>) throws(CLIError) -> Int {
        guard let text = option(name) else { return value }
        guard let n = Int(text.filter { $0 != "_" }), range.contains(n) else {
            throw .usage("--\(name) must be a whole number in \(range.lowerBound)...\(range.upperBound), not '\(text)'")
        }
        return n
    }

    /// Rejects options nobody asked for, so a typo is an error, not ignored.
    func rejectUnknownOptions() throws(CLIError) {
        if let unknown = options.keys.filter({ !used.contains($0) }).sorted().first {
            throw .usage("unknown option --\(unknown)")
        }
    }
}

/// An error the CLI reports in one line, with the exit code it stands for.
enum CLIError: Error, CustomStringConvertible {
    /// Bad arguments: exit 64 (EX_USAGE).
    case usage(String)
    /// The command ran and failed: exit 1.
    case failed(String)
    /// A failure with its own exit code.
    case exit(Int32, String)

    var description: String {
        switch self {
        case .usage(let text), .failed(let text), .exit(_, let text): text
        }
    }

    var exitCode: Int32 {
        switch self {
        case .usage: 64
        case .failed: 1
        case .exit(let code, _): code
        }
    }
}
