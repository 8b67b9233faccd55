import Dispatch
import Glibc
import Oscar
import OscarDemo
import OscarTestKit

/// `oscar node`, `oscar tell`, `oscar ask`.
enum NetworkCommands {
    /// The secret of a command that talks to a cluster: see
    /// `ClusterSecret.forClient` for where it is found. There is no default.
    static func secret(_ args: inout Arguments) throws(CLIError) -> String {
        let dir = args.option("dir")
        return try ClusterSecret.forClient(&args, dir: dir)
    }

    /// A duration option (`100us`, `500ms`, `2s`, `1m`); zero only when
    /// `allowZero`.
    static func duration(_ text: String, option: String, allowZero: Bool = false) throws(CLIError) -> Duration {
        guard let d = DurationText.parse(text), allowZero || d > .zero else {
            throw .usage("--\(option) takes a duration such as 2s or 500ms, not '\(text)'")
        }
        return d
    }

    // MARK: - oscar node

    /// Parses `host:port` (a seed, or the node to ask).
    static func nodeAddress(_ text: String, option: String) throws(CLIError) -> NodeAddress {
        guard let address = NodeAddress(hostPort: text) else {
            throw .usage("--\(option) takes host:port, such as 127.0.0.1:7000, not '\(text)'")
        }
        return address
    }

    /// Resolves `oscar node`'s configuration: flags, then `OSCAR_*`, then
    /// `--config` (or `OSCAR_CONFIG`), then defaults.
    static func configuration(_ args: inout Arguments) throws(CLIError) -> NodeConfiguration.Resolved {
        var flags: [String: String] = [:]
        for key in NodeConfiguration.reference.map(\.name) {
            if let value = args.option(key) { flags[key] = value }
        }
        // Short forms kept from earlier releases.
        if let seeds = args.option("seed") { flags["seeds"] = seeds }
        if let host = args.option("host") { flags["bind-host"] = host }
        let environment = ProcessInfoLite.environment
        var file: (path: String, text: String)?
        if let path = args.option("config") ?? environment["OSCAR_CONFIG"] {
            let text = try FileStream.read(path, atMost: NodeConfiguration.maxFileSize)
            file = (path, text)
        }
        try args.rejectUnknownOptions()
        do {
            return try NodeConfiguration.resolve(flags: flags, environment: environment, file: file)
        } catch {
            throw .usage("\(error)")
        }
    }

    static func node(_ args: inout Arguments) async throws(CLIError) {
        let supervision = try NodeSupervisor.policy(&args)
        let chaos = try ChaosNodeOptions(&args)
        let injectFaults = args.has("inject-faults")
        let resolved = try configuration(&args)
        let config = resolved.configuration
        if args.has("print-config") {
            print(resolved.printed)
            return
        }
        // Checked before anything starts (and by --check-config): a node
        // without a usable secret cannot join anything.
        let secret = try ClusterSecret.forNode(resolved)
        if args.has("check-config") {
            print("configuration is valid")
            return
        }
        if let supervision {
            exit(
                await NodeSupervisor.run(
                    NodeSupervisor.childArguments(Array(CommandLine.arguments.dropFirst())), policy: supervision))
        }
        if let supervisor = ProcessInfoLite.environment["OSCAR_SUPERVISOR_PID"].flatMap({ Int32($0) }),
            !LocalProcesses.dieWithSupervisor(supervisor)
        {
            throw .failed("the supervisor (pid \(supervisor)) has gone; not starting")
        }
        OscarLog.shared.level = config.logLevel
        let node: ClusterNode
        do {
            var settings = config.clusterSettings(secret: secret)
            if chaos != nil || injectFaults {
                // Only a chaos run's nodes, or a test's, take faults from outside.
                settings.injectFaults(with: FaultGate())
                PlantedFault.plantFromEnvironment()
            }
            node = try ClusterNode(settings: settings) { actors in
                Demo.declare(in: &actors)
                if let chaos { ChaosWorkload.declare(in: &actors, recorder: chaos.recorder) }
            }
        } catch {
            throw .failed("\(error)")
        }
        let (seeds, loops) = (config.seeds, config.loops)
        OscarLog.shared.setPrefix("[\(node.address)]")
        print(
            "oscar node listening on oscar://\(node.address) (uid \(node.address.uid), \(loops) loop\(loops == 1 ? "" : "s"))"
        )
        print(
            "actors: /user/echo (Echo, Sleep), /user/counter (Increment, GetCount), /user/kv (Put, Get), /user/workers (Work: a pool across the cluster), /user/greeter (distributed: .greet, .add, .check)"
        )
        if let management = node.managementPort {
            print("management: http://\(config.httpHost):\(management)/members, /health, /metrics")
        }
        if seeds.isEmpty {
            print("no seeds: this node forms a new cluster; others join with --seed \(node.address)")
        } else {
            print("joining through \(seeds.map(\.description).joined(separator: ", "))")
        }
        // Everything that can end the node arrives on one stream: a signal,
        // membership removing it, or the bound on a graceful leave.
        let (wakeups, wake) = AsyncStream<Wakeup>.makeStream()
        let greeter = Demo.hostGreeter(on: node)  // the distributed demo actor, /user/greeter
        let workload = chaos?.start(on: greeter.0)
        node.onRemoved { reason in
            chaos?.recorder.record(.removed, detail: reason)
            OscarLog.shared.warning("leaving the cluster: \(reason)")
            wake.yield(.removed)
        }
        // SIGHUP too: a closed terminal or a service manager's stop must
        // not end a node without leaving (a config reload would need its own
        // signal; none is reserved yet).
        onSignals([SIGINT, SIGTERM, SIGHUP]) { wake.yield(.signal($0)) }
        var iterator = wakeups.makeAsyncIterator()
        if case .signal(let signal) = await iterator.next() {
            // A signal is a graceful leave: leaving, exiting, removed, so the
            // others never see this node unreachable. Bounded: 10 s at most.
            OscarLog.shared.info("received \(NodeSupervisor.signalName(signal)); leaving the cluster")
            node.leave()
            let bound = Task {
                try? await Task.sleep(for: .seconds(10))
                wake.yield(.timedOut)
            }
            while let next = await iterator.next(), next != .removed, next != .timedOut {}
            bound.cancel()
        }
        workload?.cancel()
        withExtendedLifetime(greeter) {}
        node.shutdown()
        print("oscar node stopped")
    }

    enum Wakeup: Equatable, Sendable { case signal(Int32), removed, timedOut }

    // MARK: - oscar members / leave

    static func members(_ args: inout Arguments, json: Bool) async throws(CLIError) {
        let (client, target) = try clusterClient(&args)
        defer { client.shutdown() }
        let view: MembershipSnapshot
        do {
            view = try await client.membership(of: target)
        } catch {
            throw askFailure(error)
        }
        print(json ? view.json : MembersTable.text(view))
    }

    static func leave(_ args: inout Arguments) async throws(CLIError) {
        let (client, target) = try clusterClient(&args)
        defer { client.shutdown() }
        do {
            try await client.requestLeave(of: target)
        } catch {
            throw askFailure(error)
        }
        print("asked \(target) to leave the cluster")
    }

    static func down(_ args: inout Arguments) async throws(CLIError) {
        guard let text = args.option("member") else { throw .usage("oscar down needs --member host:port") }
        let member = try nodeAddress(text, option: "member")
        let (client, target) = try clusterClient(&args)
        defer { client.shutdown() }
        let found: Bool
        do {
            found = try await client.down(member, via: target)
        } catch {
            throw askFailure(error)
        }
        guard found else { throw .failed("\(target) has no member \(member)") }
        print("\(target) marked \(member) down; the leader removes it")
    }

    /// A one-shot, silent client node and the `--node` it talks to.
    static func clusterClient(_ args: inout Arguments) throws(CLIError) -> (ClusterNode, NodeAddress) {
        let target = try nodeAddress(args.option("node") ?? "127.0.0.1:7000", option: "node")
        let secret = try secret(&args)
        try args.rejectUnknownOptions()
        OscarLog.shared.level = .off
        do {
            return (try ClusterNode(settings: .init(secret: secret, loopCount: 1)), target)
        } catch {
            throw .failed("\(error)")
        }
    }

    /// Calls `handler` (on a dispatch queue) for each of these signals,
    /// which no longer terminate the process.
    static func onSignals(_ signals: [Int32], _ handler: @escaping @Sendable (Int32) -> Void) {
        var sources: [any DispatchSourceSignal] = []
        for s in signals {
            Glibc.signal(s, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: s)
            source.setEventHandler { handler(s) }
            source.resume()
            sources.append(source)
        }
        SignalSources.keep(sources)
    }

    // MARK: - oscar tell / ask

    struct Target {
        var ref: ActorRef
        var node: ClusterNode
        var manifest: String
        var value: CBORValue
        var timeout: Duration
    }

    static func target(_ args: inout Arguments, command: String) throws(CLIError) -> Target {
        guard args.positionals.count == 3 else {
            throw .usage("usage: oscar \(command) oscar://host:port/user/actor MessageType '{json}'")
        }
        let (uri, manifest, json) = (args.positionals[0], args.positionals[1], args.positionals[2])
        guard let address = ActorAddress(uri: uri) else {
            throw .usage("'\(uri)' is not an actor URI such as oscar://127.0.0.1:7001/user/echo")
        }
        let value: CBORValue
        do {
            value = try JSONBridge.cbor(fromJSON: json)
        } catch {
            throw .usage("\(error)")
        }
        let timeout = try duration(args.option("timeout") ?? "5s", option: "timeout")
        let secret = try secret(&args)
        try args.rejectUnknownOptions()
        // A one-shot client: its own connection events are not news.
        OscarLog.shared.level = .off
        let node: ClusterNode
        do {
            node = try ClusterNode(settings: .init(secret: secret, loopCount: 1))
        } catch {
            throw .failed("\(error)")
        }
        return Target(
            ref: node.system.ref(for: address), node: node, manifest: manifest, value: value, timeout: timeout)
    }

    /// `oscar ask URI Type '{json}'` asks with a message; `oscar ask URI
    /// .function '[args]'` calls a distributed function by name, with its
    /// arguments as a JSON array.
    static func ask(_ args: inout Arguments, json: Bool) async throws(CLIError) {
        let t = try target(&args, command: "ask")
        defer { t.node.shutdown() }
        print(JSONBridge.json(from: try await send(t)))
    }

    /// `oscar tell` sends the message as an ask and discards the reply, so a
    /// message the actor cannot take (no reaction for its type, a value it
    /// cannot decode) fails as it does for `oscar ask`, instead of being
    /// dropped at the far end while the command reports success. Like the
    /// `Identify` round trip it replaces, it returns once the actor has
    /// handled the message.
    static func tell(_ args: inout Arguments) async throws(CLIError) {
        let t = try target(&args, command: "tell")
        defer { t.node.shutdown() }
        _ = try await send(t)
        print("sent \(t.manifest) to \(t.ref)")
    }

    /// The target's message, asked (or its function called); the reply, or
    /// the failure with `askFailure`'s exit codes.
    static func send(_ t: Target) async throws(CLIError) -> CBORValue {
        if t.manifest.hasPrefix(".") {
            guard case .array(let arguments) = t.value else {
                throw .usage("the arguments of \(t.manifest) are a JSON array, such as '[\"Ada\"]' or '[]'")
            }
            do {
                return try await t.ref.call(String(t.manifest.dropFirst()), arguments: arguments, timeout: t.timeout)
            } catch let error as AskError {
                throw askFailure(error)
            } catch {
                throw .failed("\(error)")
            }
        }
        do {
            return try await t.ref.ask(manifest: t.manifest, value: t.value, timeout: t.timeout)
        } catch {
            throw askFailure(error)
        }
    }

    /// Exit codes: 1 the actor or its node answered with an error, 3 timeout,
    /// 4 the node is unreachable or refused us.
    static func askFailure(_ error: AskError) -> CLIError {
        switch error {
        case .timeout: .exit(3, "\(error)")
        case .nodeUnreachable: .exit(4, "\(error)")
        case .rejected(let reason) where reason.contains("authentication"):
            .exit(4, "\(error); check the secret this command used (--secret, --secret-file, --dir or OSCAR_SECRET)")
        case .rejected: .exit(4, "\(error)")
        default: .failed("\(error)")
        }
    }
}

/// Keeps signal sources alive for the life of the process.
enum SignalSources {
    nonisolated(unsafe) private static var kept: [any DispatchSourceSignal] = []
    static func keep(_ sources: [any DispatchSourceSignal]) { kept += sources }
}
