import Dispatch
import Glibc
import Oscar
import OscarDemo
import OscarTestKit
import Synchronization

/// `oscar node`, `oscar tell`, `oscar ask`.
enum NetworkCommands {
    /// `--dir`, or the directory of the cluster file `--file` names; nil
    /// when neither is given.
    static func clusterDirectory(_ args: inout Arguments) throws(CLIError) -> String? {
        let file = try args.option("file").map { (path) throws(CLIError) in try ClusterFile.read(path) }
        return args.option("dir") ?? file?.directory
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

    /// `oscar node`: the library's node runner (`ClusterNode.Runner`) with
    /// the demo actors, plus what only the tool has: `--supervise` (the
    /// runner as a supervised child), a chaos run's workload and history,
    /// and `--inject-faults` (the test kit's fault gate).
    static func node(_ args: inout Arguments, raw: [String]) async throws(CLIError) {
        let supervision = try NodeSupervisor.policy(&args)
        let chaos = try ChaosNodeOptions(&args)
        if let supervision {
            exit(await NodeSupervisor.run(NodeSupervisor.childCommand(raw, policy: supervision), policy: supervision))
        }
        let injectFaults = args.has("inject-faults") || chaos != nil
        let workload = Mutex<Task<Void, Never>?>(nil)
        var runner = ClusterNode.Runner(name: "oscar node", arguments: raw) { actors in
            Demo.declare(in: &actors)
            if let chaos { ChaosWorkload.declare(in: &actors, recorder: chaos.recorder) }
        } started: { node in
            let (system, greeter) = Demo.hostGreeter(on: node)  // the distributed demo actor, /user/greeter
            node.retain(system)
            node.retain(greeter)
            workload.withLock { $0 = chaos?.start(on: system) }
        }
        runner.banner = [
            "actors: /user/echo (Echo, Sleep), /user/counter (Increment, GetCount), /user/kv (Put, Get), "
                + "/user/workers (Work: a pool across the cluster), /user/greeter (distributed: .greet, .add, .check)"
        ]
        runner.extraOptions = Set(ChaosNodeOptions.optionNames)
        runner.extraSwitches = ["inject-faults"]
        runner.adjust = { settings, _ in
            // Only a chaos run's nodes, or a test's, take faults from outside.
            guard injectFaults else { return }
            settings.injectFaults(with: FaultGate())
            PlantedFault.plantFromEnvironment()
        }
        runner.removed = { reason in chaos?.recorder.record(.removed, detail: reason) }
        runner.stopping = { workload.withLock { $0?.cancel() } }
        let status = await runner.run()
        if status != 0 { exit(status) }
    }

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
        // The node asked: --node, else the first node of the cluster that
        // --dir (or --file) names, or of the default cluster directory's,
        // else 127.0.0.1:7000.
        let dir = try clusterDirectory(&args)
        let local = ClusterCommand.readState(dir ?? ClusterSecret.defaultClusterDirectory).flatMap { state in
            state.nodes.first.map { state.address($0).description }
        }
        let target = try nodeAddress(args.option("node") ?? local ?? "127.0.0.1:7000", option: "node")
        let secret = try ClusterSecret.forClient(&args, dir: dir)
        let tls = try ClusterTLS.client(&args, dir: dir)
        try args.rejectUnknownOptions()
        OscarLog.shared.level = .off
        return (try ClusterTLS.clientNode(secret: secret, tls: tls), target)
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
        let (uri, manifest) = (args.positionals[0], args.positionals[1])
        guard let address = ActorAddress(uri: uri) else {
            throw .usage("'\(uri)' is not an actor URI such as oscar://127.0.0.1:7001/user/echo")
        }
        let json = try messageText(args.positionals[2])
        let value: CBORValue
        do {
            value = try JSONBridge.cbor(fromJSON: json)
        } catch {
            throw .usage("\(error)")
        }
        let timeout = try duration(args.option("timeout") ?? "5s", option: "timeout")
        // The cluster file is read once: the secret and the TLS come from its directory.
        let dir = try clusterDirectory(&args)
        let secret = try ClusterSecret.forClient(&args, dir: dir)
        let tls = try ClusterTLS.client(&args, dir: dir)
        try args.rejectUnknownOptions()
        // A one-shot client: its own connection events are not news.
        OscarLog.shared.level = .off
        let node = try ClusterTLS.clientNode(secret: secret, tls: tls)
        return Target(
            ref: node.system.ref(for: address), node: node, manifest: manifest, value: value, timeout: timeout)
    }

    /// The message's JSON: the argument itself, or the contents of FILE for
    /// `@FILE`, or standard input for `-` (curl's convention). A message
    /// with a large `Data` in it does not fit a command line: Linux takes
    /// 128 KiB an argument.
    static func messageText(_ argument: String) throws(CLIError) -> String {
        guard argument == "-" || argument.hasPrefix("@") else { return argument }
        let path = argument == "-" ? "/dev/stdin" : String(argument.dropFirst())
        let bytes: [UInt8]
        do {
            bytes = try ProcessControl.readBytes(path, atMost: maxMessageText)
        } catch {
            throw .usage("\(error)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw .usage("the message in '\(argument)' is not UTF-8 text")
        }
        return text
    }

    /// The most JSON read for one message: four times the CLI's maximum
    /// message size (64 MiB), room for a `Data` spelled in hex (two digits
    /// a byte) and the text around it; a file that never ends stops there.
    static let maxMessageText = 4 * (64 << 20)

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
