import Glibc
import OscarBase
import OscarRemote
import OscarRuntime
import Synchronization

extension ClusterNode {
    /// An application's node process, from its command line to its exit
    /// status: what `oscar node` does, for your own actors.
    ///
    ///     @main struct InventoryNode {
    ///         static func main() async {
    ///             await ClusterNode.Runner(name: "inventory-node") { actors in
    ///                 actors.instance("inventory", Inventory())
    ///             }.main()
    ///         }
    ///     }
    ///
    /// It takes every node setting as a flag (`--port 7001`), an `OSCAR_*`
    /// variable or a key of the JSON file named by `--config` (the reference
    /// is `docs/CONFIGURATION.md`, or `--help`), and `--print-config` and
    /// `--check-config`. It serves the management endpoint when `http-port`
    /// is set, logs at `log-level` to standard error, and line-buffers
    /// standard output so a supervisor or a log sees each line at once.
    /// SIGINT, SIGTERM and SIGHUP make the node leave the cluster gracefully
    /// (bounded by `leaveBound`); the process then exits. SIGUSR1 reloads the
    /// TLS certificate, key and CA files (`reloadTLS`). Started by `oscar
    /// cluster up --exec`, it dies with its supervisor.
    ///
    /// Exit status: 0 after a graceful leave or when the cluster removed the
    /// node; 64 for a command line or configuration that cannot work (a
    /// restart would not mend it); 1 when the node could not start or
    /// `started` threw.
    public struct Runner: Sendable {
        /// The program's name, for messages and the first line it prints.
        public var name: String
        public var arguments: [String]
        public var environment: [String: String]
        /// Declares the node's actors, pools and singletons.
        public var actors: @Sendable (inout ActorSystemBuilder) -> Void
        /// Runs once the node listens and before it waits for a signal: host
        /// distributed actors here (keep them with `ClusterNode.retain`),
        /// start work. A throw stops the node, with exit status 1.
        public var started: @Sendable (ClusterNode) async throws -> Void
        /// Lines printed after the first, "NAME listening on oscar://…": say
        /// what the node hosts.
        public var banner: [String] = []
        /// Whether SIGINT, SIGTERM and SIGHUP start a graceful leave (and
        /// SIGUSR1 reloads the TLS files). Off for a runner inside a process
        /// that handles its own signals (a test).
        public var handlesSignals = true
        /// The longest a graceful leave may take before the node stops anyway.
        public var leaveBound = Duration.seconds(10)

        /// The caller's own options and switches, taken from the command
        /// line beside the settings (the `oscar` tool's chaos options).
        package var extraOptions: Set<String> = []
        package var extraSwitches: Set<String> = []
        /// Runs once the command line is parsed, before anything else: a
        /// status ends the process there (a chaos run's `--chaos-check`).
        package var intercept: @Sendable (NodeArguments) async -> Int32? = { _ in nil }
        /// Adjusts the settings before the node starts (the tool's fault gate).
        package var adjust: @Sendable (inout ClusterNode.Settings, NodeArguments) -> Void = { _, _ in }
        /// Runs when the cluster removes the node, before it stops.
        package var removed: @Sendable (String) -> Void = { _ in }
        /// Runs after the leave, before the node shuts down.
        package var stopping: @Sendable () -> Void = {}

        public init(
            name: String, arguments: [String] = Array(CommandLine.arguments.dropFirst()),
            environment: [String: String]? = nil, actors: @escaping @Sendable (inout ActorSystemBuilder) -> Void,
            started: @escaping @Sendable (ClusterNode) async throws -> Void = { _ in }
        ) {
            self.name = name
            self.arguments = arguments
            self.environment = environment ?? ProcessControl.environment
            self.actors = actors
            self.started = started
        }

        /// Runs the node and exits the process with its status.
        public func main() async -> Never {
            exit(await run())
        }

        /// Runs the node until it has left or been removed; its exit status.
        public func run() async -> Int32 {
            ProcessControl.lineBufferStandardOutput()
            let parsed: NodeArguments
            let resolved: NodeConfiguration.Resolved
            let secret: String
            let tlsCredentials: TLSCredentials?
            do {
                parsed = try NodeArguments(arguments, extraOptions: extraOptions, extraSwitches: extraSwitches)
                if parsed.switches.contains("help") {
                    print(usage)
                    return 0
                }
                if let status = await intercept(parsed) { return status }
                resolved = try resolve(parsed)
                if parsed.switches.contains("print-config") {
                    print(resolved.printed)
                    return 0
                }
                // Checked before anything starts (and by --check-config): a
                // node without a usable secret cannot join anything.
                secret = try NodeSecret.forNode(resolved)
                // Read once, here: a missing or bad file is a configuration
                // error, named, before anything starts.
                tlsCredentials = try resolved.configuration.clusterSettings(secret: secret).tls?.load()
            } catch let problem as NodeArguments.Problem {
                ProcessControl.writeStandardError("\(name): \(problem) ('\(name) --help' lists the settings)\n")
                return 64
            } catch {
                ProcessControl.writeStandardError("\(name): \(error)\n")
                return 64
            }
            if parsed.switches.contains("check-config") {
                print("configuration is valid")
                return 0
            }
            if let supervisor = environment["OSCAR_SUPERVISOR_PID"].flatMap({ Int32($0) }),
                !ProcessControl.dieWithSupervisor(supervisor)
            {
                ProcessControl.writeStandardError(
                    "\(name): the supervisor (pid \(supervisor)) has gone; not starting\n")
                return 1
            }
            var config = resolved.configuration
            OscarLog.shared.level = config.logLevel
            if let dns = config.seedDNS {
                print(
                    "looking up seeds: \(dns.host) (port \(dns.port)), until it gives \(config.seedDNSMinimum) address(es)"
                )
                let found = await SeedDiscovery(name: dns.host, port: dns.port, minimum: config.seedDNSMinimum).seeds()
                config.seeds += found.filter { !config.seeds.contains($0) }
            }
            var settings = config.clusterSettings(secret: secret)
            settings.tls?.loaded = tlsCredentials
            adjust(&settings, parsed)
            let node: ClusterNode
            do {
                node = try ClusterNode(settings: settings, actors)
            } catch {
                ProcessControl.writeStandardError("\(name): \(error)\n")
                return 1
            }
            OscarLog.shared.setPrefix("[\(node.address)]")
            // Everything that can end the node arrives on one stream: a
            // signal, membership removing it, or the bound on a leave.
            let (wakeups, wake) = AsyncStream<Wakeup>.makeStream()
            // Before the banner: whoever waits for "listening on" may signal
            // at once, and a SIGUSR1 that came first was lost (or, before
            // the handler, ended the node).
            if handlesSignals {
                ProcessControl.onSignals([SIGINT, SIGTERM, SIGHUP]) { wake.yield(.signal($0)) }
                // On a dispatch queue, off the node's loops: the reload reads files.
                ProcessControl.onSignals([SIGUSR1]) { _ in reloadTLS(node) }
            }
            let loops = config.loops
            print(
                "\(name) listening on oscar://\(node.address) (uid \(node.address.uid), \(loops) loop\(loops == 1 ? "" : "s"))"
            )
            for line in banner { print(line) }
            if let management = node.managementPort {
                let scheme = settings.tls == nil ? "http" : "https"
                print("management: \(scheme)://\(config.httpHost):\(management)/members, /health, /metrics")
            }
            if config.seeds.isEmpty {
                print("no seeds: this node forms a new cluster; others join with --seeds \(node.address)")
            } else {
                print("joining through \(config.seeds.map(\.description).joined(separator: ", "))")
            }
            let removed = self.removed
            node.onRemoved { reason in
                removed(reason)
                OscarLog.shared.warning("leaving the cluster: \(reason)")
                wake.yield(.removed)
            }
            do {
                try await started(node)
            } catch {
                OscarLog.shared.error("\(name): start-up failed: \(error)")
                stopping()
                node.shutdown()
                return 1
            }
            var iterator = wakeups.makeAsyncIterator()
            if case .signal(let signal) = await iterator.next() {
                // A graceful leave: leaving, exiting, removed, so the others
                // never see this node unreachable. Bounded.
                OscarLog.shared.info("received \(ProcessControl.signalName(signal)); leaving the cluster")
                node.leave()
                let bound = Task { [leaveBound] in
                    try? await Task.sleep(for: leaveBound)
                    wake.yield(.timedOut)
                }
                while let next = await iterator.next(), next != .removed, next != .timedOut {}
                bound.cancel()
            }
            stopping()
            node.shutdown()
            print("\(name) stopped")
            return 0
        }

        /// SIGUSR1: new credentials for new connections, or the old ones kept.
        private func reloadTLS(_ node: ClusterNode) {
            guard let files = node.tlsFiles else {
                return OscarLog.shared.warning("received SIGUSR1, but this node runs without TLS; nothing to reload")
            }
            do throws(TransportError) {
                try node.reloadTLS()
                OscarLog.shared.info(
                    "reloaded TLS certificates from \(files.certificateFile), \(files.privateKeyFile) and \(files.caFile)"
                )
            } catch {
                OscarLog.shared.error("TLS reload failed, keeping the current certificates: \(error)")
            }
        }

        private enum Wakeup: Equatable, Sendable { case signal(Int32), removed, timedOut }

        /// Flags, then `OSCAR_*`, then `--config` (or `OSCAR_CONFIG`), then defaults.
        private func resolve(_ parsed: NodeArguments) throws -> NodeConfiguration.Resolved {
            var file: (path: String, text: String)?
            if let path = parsed.config ?? environment["OSCAR_CONFIG"] {
                file = (path, try ProcessControl.readFile(path, atMost: NodeConfiguration.maxFileSize))
            }
            return try NodeConfiguration.resolve(flags: parsed.settings, environment: environment, file: file)
        }

        /// `--help`: the settings, each with its variable and default.
        var usage: String {
            let rows = NodeConfiguration.reference.map { setting in
                "  --\(setting.name) (\(setting.environment), default \(setting.defaultValue))\n      \(setting.help)"
            }
            return """
                usage: \(name) [--SETTING VALUE]... [--config FILE] [--print-config] [--check-config] [-- ARGS]
                Every setting is also an OSCAR_* variable and a key of the JSON --config file; flags win, then
                variables, then the file. SIGINT, SIGTERM or SIGHUP: leave the cluster gracefully and exit 0.
                SIGUSR1: read the tls-cert, tls-key and tls-ca files again; new connections use them, open ones
                keep theirs (a bad file is logged and the current certificates stay).

                settings:
                """ + "\n" + rows.joined(separator: "\n")
        }
    }

    /// Keeps `object` alive until the node shuts down. A `ClusterSystem` and
    /// the distributed actors it hosts are held weakly by the node; a
    /// `Runner`'s `started` keeps them here.
    public func retain(_ object: any AnyObject & Sendable) {
        retained.withLock { $0.append(object) }
    }
}
