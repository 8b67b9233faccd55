import CoreEngine
import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime

/// A node's configuration, resolved from four sources in a fixed order:
/// command-line flags, then `OSCAR_*` environment variables, then a JSON
/// file, then defaults. Pure: the caller hands in the flags, the environment
/// and the file's text, so the resolution is tested without a process.
///
/// Every setting has one name, spelled the same everywhere: `--bind-host`
/// on the command line, `OSCAR_BIND_HOST` in the environment, `"bind-host"`
/// in the file.
package struct NodeConfiguration: Sendable, Equatable {
    public enum Downing: String, Sendable, CaseIterable { case keepMajority = "keep-majority", manual }
    /// What a TLS node does with a peer that connects without TLS.
    public enum TLSPlaintext: String, Sendable, CaseIterable { case refuse, accept }

    public var port = 7000
    public var bindHost = "127.0.0.1"
    public var advertisedHost: String?
    public var seeds: [NodeAddress] = []
    /// A DNS name and port whose A records are seeds (a Kubernetes headless
    /// service), found before the node starts.
    public var seedDNS: NodeAddress?
    /// How many addresses the name must give before the node starts.
    public var seedDNSMinimum = 1
    public var secret: String?
    /// A file holding the secret, so it need not be on the command line.
    public var secretFile: String?
    public var roles: Set<String> = []
    public var loops = EventLoopGroup.defaultLoopCount
    /// `ClusterNode.Settings.loopCPUs`.
    public var loopCPUs: [Int] = []
    /// `ClusterNode.Settings.maxMessageSize`.
    public var maxMessageSize = 64 << 20
    /// `ClusterNode.Settings.bulkLane`.
    public var bulkLane = false
    /// Nil: no management endpoint.
    public var httpPort: Int?
    public var httpHost = "127.0.0.1"
    public var phiThreshold = 8.0
    public var acceptablePause = Duration.milliseconds(800)
    public var heartbeatInterval = Duration.milliseconds(500)
    public var downing = Downing.keepMajority
    public var stableAfter = Duration.seconds(5)
    public var decideWhenUnstableAfter = Duration.seconds(4)
    public var removalMargin = Duration.seconds(8)
    /// `MembershipSettings.removesRefusingMembers`.
    public var removeRefusing = true
    /// The most members the cluster may grow to; above 1,000 the downing
    /// windows widen (`MembershipSettings.scaled(toClusterSize:)`). Nil:
    /// as set.
    public var clusterSize: Int?
    public var logLevel = OscarLog.Level.info
    /// TLS on the cluster port: this node's certificate, its key and the
    /// cluster CA (PEM files); all three or none.
    public var tlsCertificate: String?
    public var tlsKey: String?
    public var tlsCA: String?
    public var tlsPlaintext = TLSPlaintext.refuse

    /// Where a resolved value came from, for `--print-config`.
    public enum Source: String, Sendable { case flag, environment, file, `default` }

    public init() {}

    /// One setting: its name, what it takes, and how it is applied.
    package struct Key: Sendable {
        package let name: String
        package let help: String
        /// What the flag alone means (`--bulk-lane` is `--bulk-lane on`), for
        /// a switch; nil when a value must follow.
        package var bare: String? = nil
        package let apply: @Sendable (inout NodeConfiguration, String) throws(Reason) -> Void
        package let show: @Sendable (NodeConfiguration) -> String

        var environmentName: String { "OSCAR_" + String(name.uppercased().map { $0 == "-" ? "_" : $0 }) }
    }

    /// Why a value was refused (the key and source are added by the caller).
    package struct Reason: Error { package let text: String }

    // MARK: - Resolving

    /// The resolved configuration and where each setting came from.
    public struct Resolved: Sendable {
        public var configuration: NodeConfiguration
        public var sources: [String: Source]
        /// The settings as `--print-config` shows them, the secret masked.
        public var printed: String {
            NodeConfiguration.keys.map { key in
                let value =
                    key.name == "secret" ? (configuration.secret == nil ? "(none)" : "******") : key.show(configuration)
                return "\(key.name) = \(value)  (\(sources[key.name]?.rawValue ?? "default"))"
            }.joined(separator: "\n")
        }
    }

    /// Resolves flags (by key name, without dashes), the environment and the
    /// config file's JSON text (nil: no file). A bad value, an unknown key in
    /// the file, or a file that is not a JSON object fails with the key, the
    /// source and the reason.
    public static func resolve(
        flags: [String: String], environment: [String: String], file: (path: String, text: String)? = nil
    ) throws(ConfigurationError) -> Resolved {
        var out = Resolved(configuration: NodeConfiguration(), sources: [:])
        let fileValues = try file.map { (f) throws(ConfigurationError) in try fileSettings(f.path, f.text) } ?? [:]
        for key in keys {
            let candidates: [(Source, String?)] = [
                (.flag, flags[key.name]), (.environment, environment[key.environmentName]),
                (.file, fileValues[key.name]),
            ]
            guard let (source, text) = candidates.first(where: { $0.1 != nil }).map({ ($0.0, $0.1!) }) else {
                out.sources[key.name] = .default
                continue
            }
            do {
                try key.apply(&out.configuration, text)
            } catch {
                throw ConfigurationError(
                    key: key.name, source: source.describe(key: key, file: file?.path), reason: error.text)
            }
            out.sources[key.name] = source
        }
        try out.configuration.check()
        return out
    }

    /// Settings that are fine alone but not together.
    package func check() throws(ConfigurationError) {
        let tlsFiles = [("tls-cert", tlsCertificate), ("tls-key", tlsKey), ("tls-ca", tlsCA)]
        if tlsFiles.contains(where: { $0.1 != nil }), let missing = tlsFiles.first(where: { $0.1 == nil }) {
            throw ConfigurationError(
                key: missing.0, source: "",
                reason:
                    "TLS needs tls-cert, tls-key and tls-ca together ('oscar certs' makes them); this one is missing")
        }
        if bindHost == "0.0.0.0", advertisedHost == nil {
            throw ConfigurationError(
                key: "advertised-host", source: "",
                reason: "bind-host 0.0.0.0 listens on every interface; say which host others should dial")
        }
    }

    /// The largest config file read: larger is refused, not read to its
    /// end (`--config /dev/zero` never ends).
    public static let maxFileSize = 1 << 20

    /// The file's settings as text, keyed by name; unknown keys and keys
    /// given twice are refused (a typo in a file should not be silently
    /// ignored, nor one of two values silently win).
    static func fileSettings(_ path: String, _ text: String) throws(ConfigurationError) -> [String: String] {
        guard text.utf8.count <= maxFileSize else {
            throw ConfigurationError(
                key: "config", source: path, reason: "larger than the maximum of \(maxFileSize) bytes")
        }
        let value: CBORValue
        do {
            value = try JSONBridge.cbor(fromJSON: text)
        } catch .duplicateKey(let key) {
            throw ConfigurationError(key: key, source: path, reason: "given twice in the file")
        } catch {
            throw ConfigurationError(key: "config", source: path, reason: "not valid JSON: \(error)")
        }
        guard case .map(let pairs) = value else {
            throw ConfigurationError(key: "config", source: path, reason: "must be a JSON object of settings")
        }
        var out: [String: String] = [:]
        for (k, v) in pairs {
            guard case .text(let name) = k, keys.contains(where: { $0.name == name }) else {
                throw ConfigurationError(
                    key: "\(JSONBridge.json(from: k))", source: path,
                    reason: "unknown setting; known: \(keys.map(\.name).joined(separator: ", "))")
            }
            switch v {
            case .text(let s): out[name] = s
            case .array(let items):
                out[name] = items.map { if case .text(let s) = $0 { s } else { JSONBridge.json(from: $0) } }.joined(
                    separator: ",")
            case .null: continue
            default: out[name] = JSONBridge.json(from: v)
            }
        }
        return out
    }

    // MARK: - Using

    /// The cluster node's settings. The secret is required here.
    public func clusterSettings(secret: String) -> ClusterNode.Settings {
        var s = ClusterNode.Settings(
            host: bindHost, port: port, secret: secret, loopCount: loops, seeds: seeds, roles: roles,
            httpPort: httpPort, httpHost: httpHost)
        s.advertisedHost = advertisedHost
        s.maxMessageSize = maxMessageSize
        s.bulkLane = bulkLane
        s.loopCPUs = loopCPUs
        s.membership = membership
        s.membershipTick = heartbeatInterval
        if let tlsCertificate, let tlsKey, let tlsCA {
            s.tls = .init(
                certificateFile: tlsCertificate, privateKeyFile: tlsKey, caFile: tlsCA,
                acceptsPlaintext: tlsPlaintext == .accept)
        }
        return s
    }

    /// The membership settings these keys make, widened for `clusterSize`.
    var membership: MembershipSettings {
        var m = MembershipSettings()
        m.failureDetector.threshold = phiThreshold
        m.failureDetector.acceptablePause = acceptablePause
        m.failureDetector.firstHeartbeatEstimate = heartbeatInterval
        m.downing = downing == .manual ? .manual : .keepMajority
        m.stableAfter = stableAfter.inSeconds
        m.decideWhenUnstableAfter = decideWhenUnstableAfter.inSeconds
        m.removalMargin = removalMargin.inSeconds
        m.removesRefusingMembers = removeRefusing
        return clusterSize.map { m.scaled(toClusterSize: $0) } ?? m
    }

    /// Every setting, in the order `--print-config` shows them.
    package static let keys: [Key] = [
        Key(name: "port", help: "TCP port for the cluster protocol (0: any free one)") { c, t throws(Reason) in
            c.port = try int(t, 0...65535)
        } show: {
            "\($0.port)"
        },
        Key(name: "bind-host", help: "IPv4 address to listen on (0.0.0.0: every interface)") { c, t throws(Reason) in
            c.bindHost = try ipv4(t)
        } show: {
            $0.bindHost
        },
        Key(name: "advertised-host", help: "host others dial to reach this node; part of its identity") {
            c, t throws(Reason) in
            guard !t.isEmpty, !t.contains(where: { $0 == ":" || $0 == "/" || $0 == " " }) else {
                throw Reason(text: "'\(t)' is not a host name or address")
            }
            c.advertisedHost = t
        } show: {
            $0.advertisedHost ?? "(bind-host)"
        },
        Key(name: "seeds", help: "host:port of nodes to join through, comma-separated") { c, t throws(Reason) in
            c.seeds = try t.split(separator: ",").map { (s) throws(Reason) in try address(String(s)) }
        } show: {
            $0.seeds.isEmpty ? "(none: forms a new cluster)" : $0.seeds.map(\.description).joined(separator: ",")
        },
        Key(name: "seed-dns", help: "name:port whose DNS A records are seeds too (a headless service)") {
            c, t throws(Reason) in
            c.seedDNS = try address(t)
        } show: {
            $0.seedDNS?.description ?? "(none)"
        },
        Key(name: "seed-dns-min", help: "addresses seed-dns must give, stable over two looks, before starting") {
            c, t throws(Reason) in
            c.seedDNSMinimum = try int(t, 1...1000)
        } show: {
            "\($0.seedDNSMinimum)"
        },
        Key(name: "secret", help: "the cluster secret, 16 bytes or more (never sent; masked when printed)") {
            c, t throws(Reason) in
            guard !t.isEmpty else { throw Reason(text: "must not be empty") }
            c.secret = t
        } show: { _ in
            "******"
        },
        file("secret-file", \.secretFile, help: "a file holding the cluster secret, so it is not on the command line"),
        file(
            "tls-cert", \.tlsCertificate,
            help: "TLS on the cluster port: this node's certificate (PEM), naming its hosts",
            unset: "(none: no TLS)"),
        file("tls-key", \.tlsKey, help: "TLS: the private key of tls-cert (PEM)"),
        file("tls-ca", \.tlsCA, help: "TLS: the cluster CA's certificate (PEM), which every peer's must chain to"),
        Key(name: "tls-plaintext", help: "TLS: refuse peers without TLS, or accept them too (a rolling switch)") {
            c, t throws(Reason) in
            guard let mode = TLSPlaintext(rawValue: t) else {
                throw Reason(text: "must be refuse or accept, not '\(t)'")
            }
            c.tlsPlaintext = mode
        } show: {
            $0.tlsPlaintext.rawValue
        },
        Key(name: "roles", help: "this node's roles, comma-separated") { c, t throws(Reason) in
            guard !t.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw Reason(text: "a role may not contain control characters")
            }
            c.roles = Set(t.split(separator: ",").map { String($0.filter { $0 != " " }) }.filter { !$0.isEmpty })
        } show: {
            $0.roles.isEmpty ? "(none)" : $0.roles.sorted().joined(separator: ",")
        },
        Key(name: "loops", help: "event loops") { c, t throws(Reason) in
            c.loops = try int(t, 1...256)
        } show: {
            "\($0.loops)"
        },
        Key(
            name: "loop-cpus",
            help:
                "CPUs the event loops are kept on, as 0,2 or 0-3 (loop i on the i-th, round the list); for several nodes on one machine"
        ) { c, t throws(Reason) in
            var cpus: [Int] = []
            for part in t.split(separator: ",", omittingEmptySubsequences: false) {
                let bounds = part.filter { $0 != " " }.split(separator: "-", omittingEmptySubsequences: false)
                guard bounds.count <= 2, !bounds.contains(where: \.isEmpty) else {
                    throw Reason(text: "'\(part)' is not a CPU or a range of CPUs like 0-3")
                }
                let first = try int(String(bounds[0]), 0...1023)
                let last = try bounds.count == 2 ? int(String(bounds[1]), first...1023) : first
                cpus += first...last
            }
            c.loopCPUs = cpus
        } show: {
            $0.loopCPUs.isEmpty ? "(any)" : $0.loopCPUs.map(String.init).joined(separator: ",")
        },
        Key(
            name: "max-message-size",
            help:
                "largest message sent or accepted, in bytes or with KiB, MiB or GiB (at most 2GiB)"
        ) { c, t throws(Reason) in
            c.maxMessageSize = try byteCount(t, 1...(1 << 31))
        } show: {
            byteText($0.maxMessageSize)
        },
        Key(
            name: "bulk-lane",
            help:
                "on (or the flag alone): large messages sent beside small ones take a second connection, copied at SCHED_IDLE (PROTOCOL.md §6b); off (default)",
            bare: "on"
        ) { c, t throws(Reason) in
            guard t == "on" || t == "off" else { throw Reason(text: "must be on or off, not '\(t)'") }
            c.bulkLane = t == "on"
        } show: {
            $0.bulkLane ? "on" : "off"
        },
        Key(name: "http-port", help: "management HTTP port: /members, /health, /metrics (0: any free one)") {
            c, t throws(Reason) in
            c.httpPort = try int(t, 0...65535)
        } show: {
            $0.httpPort.map { "\($0)" } ?? "(off)"
        },
        Key(name: "http-host", help: "IPv4 address the management endpoint listens on") { c, t throws(Reason) in
            c.httpHost = try ipv4(t)
        } show: {
            $0.httpHost
        },
        Key(name: "phi-threshold", help: "failure detector: suspicion level that marks a node unreachable") {
            c, t throws(Reason) in
            guard let v = Double(t), v > 0, v <= 50 else {
                throw Reason(text: "must be a number in (0, 50], not '\(t)'")
            }
            c.phiThreshold = v
        } show: {
            "\($0.phiThreshold)"
        },
        Key(name: "acceptable-pause", help: "failure detector: lateness tolerated beyond the usual interval") {
            c, t throws(Reason) in
            c.acceptablePause = try duration(t)
        } show: {
            DurationText.format($0.acceptablePause)
        },
        Key(name: "heartbeat-interval", help: "gossip, heartbeat and check period") { c, t throws(Reason) in
            c.heartbeatInterval = try duration(t)
        } show: {
            DurationText.format($0.heartbeatInterval)
        },
        Key(name: "downing", help: "how partitions end: keep-majority or manual") { c, t throws(Reason) in
            guard let d = Downing(rawValue: t) else {
                throw Reason(text: "must be keep-majority or manual, not '\(t)'")
            }
            c.downing = d
        } show: {
            $0.downing.rawValue
        },
        Key(name: "stable-after", help: "keep-majority: how long unreachability must last before downing") {
            c, t throws(Reason) in
            c.stableAfter = try duration(t)
        } show: {
            DurationText.format($0.stableAfter)
        },
        Key(
            name: "decide-when-unstable-after",
            help:
                "keep-majority: how much longer than stable-after the view may keep changing before nodes decide anyway"
        ) { c, t throws(Reason) in
            c.decideWhenUnstableAfter = try duration(t)
        } show: {
            DurationText.format($0.decideWhenUnstableAfter)
        },
        Key(name: "removal-margin", help: "how long a downed member stays before removal (and singleton hand-over)") {
            c, t throws(Reason) in
            c.removalMargin = try duration(t)
        } show: {
            DurationText.format($0.removalMargin)
        },
        Key(
            name: "remove-refusing",
            help:
                "remove a downed member at once when its address refuses connections (its process is gone); false where a firewall rejects rather than drops",
            bare: "true"
        ) { c, t throws(Reason) in
            guard let value = ["true": true, "false": false][t] else {
                throw Reason(text: "must be true or false; not '\(t)'")
            }
            c.removeRefusing = value
        } show: {
            "\($0.removeRefusing)"
        },
        Key(
            name: "cluster-size",
            help:
                "the most members the cluster may grow to; above 1000 it widens decide-when-unstable-after, removal-margin and the first seed's wait (every node the same)"
        ) { c, t throws(Reason) in
            c.clusterSize = try int(t, 1...1_000_000)
        } show: {
            c in
            // The windows in effect: the keys above show what was given.
            c.clusterSize.map { n in
                let m = c.membership
                return n <= 1_000
                    ? "\(n)"
                    : "\(n) (in effect: decide-when-unstable-after \(seconds(m.decideWhenUnstableAfter)), "
                        + "removal-margin \(seconds(m.removalMargin)), first seed's wait \(seconds(m.firstSeedTimeout)))"
            } ?? "(not set)"
        },
        Key(name: "log-level", help: "debug, info, warning, error or off") { c, t throws(Reason) in
            guard let level = OscarLog.Level.allCases.first(where: { $0.description == t }) else {
                throw Reason(text: "must be one of debug, info, warning, error, off; not '\(t)'")
            }
            c.logLevel = level
        } show: {
            $0.logLevel.description
        },
    ]

    /// Names, help lines and defaults, for the CLI reference.
    public static var reference: [(name: String, environment: String, help: String, defaultValue: String)] {
        // Defaults that are not one value everywhere say what they are.
        let described = ["secret": "(none)", "loops": "one per core"]
        let defaults = NodeConfiguration()
        return keys.map { ($0.name, $0.environmentName, $0.help, described[$0.name] ?? $0.show(defaults)) }
    }

    private static func int(_ text: String, _ range: ClosedRange<Int>) throws(Reason) -> Int {
        guard let n = Int(text.filter { $0 != "_" }), range.contains(n) else {
            throw Reason(text: "must be a whole number in \(range.lowerBound)...\(range.upperBound), not '\(text)'")
        }
        return n
    }

    private static let byteUnits = [("GiB", 30), ("MiB", 20), ("KiB", 10)]

    /// A size as `67108864`, `64MiB`, `512KiB` or `2GiB`, in `range` bytes.
    private static func byteCount(_ text: String, _ range: ClosedRange<Int>) throws(Reason) -> Int {
        let unit = byteUnits.first { text.hasSuffix($0.0) }
        let digits = unit.map { String(text.dropLast($0.0.count)) } ?? text
        let shift = unit?.1 ?? 0
        guard let n = Int(digits.filter { $0 != "_" }), n >= 0, n <= range.upperBound >> shift,
            range.contains(n << shift)
        else {
            throw Reason(
                text:
                    "must be a size from \(byteText(range.lowerBound)) to \(byteText(range.upperBound)) (bytes, or with KiB, MiB or GiB), not '\(text)'"
            )
        }
        return n << shift
    }

    /// A size as `byteCount` reads it: in the largest unit that divides it.
    private static func byteText(_ bytes: Int) -> String {
        guard bytes > 0, let unit = byteUnits.first(where: { bytes % (1 << $0.1) == 0 }) else { return "\(bytes)" }
        return "\(bytes >> unit.1)\(unit.0)"
    }

    /// A setting that names a file: any path but an empty one.
    private static func file(
        _ name: String, _ field: WritableKeyPath<NodeConfiguration, String?> & Sendable, help: String,
        unset: String = "(none)"
    ) -> Key {
        Key(name: name, help: help) { c, t throws(Reason) in
            guard !t.isEmpty else { throw Reason(text: "must not be empty") }
            c[keyPath: field] = t
        } show: {
            $0[keyPath: field] ?? unset
        }
    }

    private static func ipv4(_ text: String) throws(Reason) -> String {
        guard SocketAddress.ipv4(text, 0) != nil else { throw Reason(text: "'\(text)' is not an IPv4 address") }
        return text
    }

    /// Seconds as a duration setting is written ("11s").
    private static func seconds(_ value: Double) -> String { DurationText.format(.seconds(value)) }

    private static func duration(_ text: String) throws(Reason) -> Duration {
        guard let d = DurationText.parse(text), d > .zero else {
            throw Reason(text: "must be a duration such as 500ms or 5s, not '\(text)'")
        }
        return d
    }

    private static func address(_ text: String) throws(Reason) -> NodeAddress {
        guard let a = NodeAddress(hostPort: text) else {
            throw Reason(text: "'\(text)' is not host:port, such as 10.0.0.2:7000 or oscar-1:7000")
        }
        return a
    }
}

extension NodeConfiguration.Source {
    fileprivate func describe(key: NodeConfiguration.Key, file: String?) -> String {
        switch self {
        case .flag: "--\(key.name)"
        case .environment: key.environmentName
        case .file: file ?? "config file"
        case .default: "default"
        }
    }
}

/// A setting that cannot be used, named with where it came from.
package struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public var key: String
    public var source: String
    public var reason: String

    public var description: String {
        source.isEmpty ? "configuration: \(key): \(reason)" : "configuration: \(key) (from \(source)): \(reason)"
    }
}
