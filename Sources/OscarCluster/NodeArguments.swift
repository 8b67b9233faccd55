/// A node's command line: its settings (`--port 7001`, `--seeds=a:1,b:2`),
/// `--config FILE`, the runner's switches, options the caller declares as its
/// own, and everything after `--`, left to the application.
///
/// Small on purpose: no argument-parsing package can be fetched here, and a
/// node's command line is only settings.
package struct NodeArguments: Sendable, Equatable {
    /// Settings by key name (`NodeConfiguration`'s keys).
    package var settings: [String: String] = [:]
    package var config: String?
    package var switches: Set<String> = []
    /// The caller's own options (`--supervise`'s, a chaos run's), by name.
    package var extras: [String: String] = [:]
    /// After `--`: the application's own arguments.
    package var rest: [String] = []

    /// The switches every node runner takes.
    package static let runnerSwitches: Set<String> = ["print-config", "check-config", "help"]
    /// Short forms kept from earlier releases.
    static let aliases = ["seed": "seeds", "host": "bind-host"]

    /// A command line that cannot be a node's, said so a person can mend it.
    package struct Problem: Error, CustomStringConvertible, Equatable {
        package let description: String
    }

    package init(
        _ raw: [String], extraOptions: Set<String> = [], extraSwitches: Set<String> = []
    ) throws(Problem) {
        let settingNames = Set(NodeConfiguration.keys.map(\.name))
        var rest = raw[...]
        while let arg = rest.popFirst() {
            if arg == "--" {
                self.rest = Array(rest)
                break
            }
            if arg == "-h" {
                switches.insert("help")
                continue
            }
            guard arg.hasPrefix("--") else {
                throw Problem(description: "unexpected argument '\(arg)' (the application's own go after --)")
            }
            var name = String(arg.dropFirst(2))
            var value: String?
            if let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if Self.runnerSwitches.contains(name) || extraSwitches.contains(name) {
                guard value == nil else { throw Problem(description: "--\(name) takes no value") }
                switches.insert(name)
                continue
            }
            let key = Self.aliases[name] ?? name
            guard settingNames.contains(key) || key == "config" || extraOptions.contains(key) else {
                throw Problem(description: "unknown option --\(name)")
            }
            if value == nil {
                // A switch's flag alone, at the end or before another flag.
                let bare = NodeConfiguration.keys.first { $0.name == key }?.bare
                value = bare != nil && rest.first?.hasPrefix("-") != false ? bare : rest.popFirst()
            }
            guard let value else { throw Problem(description: "--\(name) needs a value") }
            if key == "config" {
                config = value
            } else if extraOptions.contains(key) {
                extras[key] = value
            } else {
                settings[key] = value
            }
        }
    }
}
