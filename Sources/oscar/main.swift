import Glibc
import Oscar
import OscarDemo
import OscarRuntime
import OscarTestKit

/// `oscar`: thin by design. It parses arguments and prints; the work is in the
/// Oscar library.
let usage = """
    oscar — distributed actors for Swift

    USAGE
      oscar cluster up [--nodes 3] [--base-port 7000] [--http-base-port P] [--dir .oscar/cluster]
                       [--timeout 30s] [--no-supervise] [--secret-file F | --secret S] [--tls]
                       [--exec PATH [-- ARGS...]] [--file oscar-cluster.json]
                                      start a local cluster of N node processes in the background,
                                      each under 'oscar node --supervise' (pid and log of each in
                                      --dir, and DIR/secret: a new random secret unless one is
                                      given); waits until it has converged. --exec: your own node
                                      binary (one built on ClusterNode.Runner) instead of the demo
                                      node, given the node settings and then ARGS; status, logs,
                                      add, kill, down, ask, tell and members work on it the same.
                                      --file: these options as one JSON object ("nodes", "exec",
                                      "arguments": [...], ...; paths relative to the file), which
                                      flags override. --file F also names the cluster for the other
                                      cluster commands, ask, tell, members, leave and down.
                                      --tls: a new CA and certificates in DIR/tls, one per node and
                                      one for the CLI, and a cluster that speaks only TLS 1.3; the
                                      CLI's commands given --dir or --file use the CLI's certificate
      oscar cluster status [--dir D]  the member table with each node's restarts, and nodes whose
                                      process is gone
      oscar cluster down [--grace 15s] [--dir D]
                                      every node leaves gracefully; stragglers are killed after --grace
      oscar cluster logs [PORT] [--lines 20] [--follow] [--dir D]
                                      the end of each node's log (or one node's)
      oscar cluster add [--dir D]     start one more node and wait until it is up
      oscar cluster kill PORT [--graceful | --crash] [--dir D]
                                      SIGKILL one node and its supervisor (SIGTERM with --graceful;
                                      --crash: SIGKILL the node alone, and its supervisor restarts it)
      oscar node [SETTINGS] [--config FILE] [--print-config] [--check-config] [--inject-faults]
                 [--supervise [--max-restarts 5] [--restart-window 60s] [--state-file F] [--exec PATH]]
                                      run a node hosting the demo actors (echo, counter, kv): the
                                      library's node runner (ClusterNode.Runner) with the demo's;
                                      SIGINT/SIGTERM/SIGHUP: leave the cluster gracefully, then stop.
                                      SIGUSR1: read the tls-cert/tls-key/tls-ca files again (new
                                      connections use them; open ones keep theirs).
                                      Settings come from flags, then OSCAR_* variables, then
                                      --config (JSON), then defaults; see SETTINGS below.
                                      --supervise runs the node as a child and restarts it after a
                                      crash (non-zero exit or a signal), 1 s later, doubling to 30 s;
                                      it gives up after more than --max-restarts crashes within
                                      --restart-window. --state-file: its pid and restart count.
                                      --exec PATH: supervise that program instead (your node binary)
                                      --inject-faults installs the test kit's fault gate (POST /faults,
                                      /system/faults), as the nodes of 'oscar chaos' have; never in production
      oscar members [--node host:port] [--json] [--dir D | --file F]
                                      the member table as that node sees it
      oscar leave [--node host:port] [--dir D | --file F]
                                      ask a node to leave the cluster gracefully
      oscar down --member host:port [--node host:port] [--dir D | --file F]
                                      mark a member down (it is removed without leaving)
      oscar ask URI Type JSON [--timeout 5s] [--secret-file F | --secret S | --dir D | --file F]
                                      ask an actor; prints the reply as JSON
      oscar ask URI .function JSON-ARRAY [--timeout 5s] [--secret-file F | --secret S | --dir D | --file F]
                                      call a distributed actor's function by name, e.g.
                                      oscar ask oscar://127.0.0.1:7000/user/greeter .greet '["Ada"]'
      oscar tell URI Type JSON [--timeout 5s] [--secret-file F | --secret S | --dir D | --file F]
                                      tell an actor; waits until it has handled the message, and
                                      fails as ask does when it cannot (such as an unknown type).
                                      JSON may be @FILE or - (standard input), for a large message;
                                      {"$bytes": "<hex>"} is a byte string (a Data), as replies print it.
                                      members, leave, down, ask and tell speak TLS with
                                      --tls-cert F --tls-key F --tls-ca F, or with the CLI
                                      certificate of a cluster 'cluster up --tls' made (--dir/--file)
      oscar secret                    print a new random cluster secret (32 bytes, as hex)
      oscar certs init --dir D [--days 3650] [--force]
                                      make a cluster CA for TLS: D/ca.pem and D/ca.key (EC P-256,
                                      key mode 0600); an existing CA is kept unless --force
      oscar certs issue --dir D --name NAME --host H [--host H2...] [--days 365] [--force]
                                      a node certificate signed by D's CA: D/NAME.pem, D/NAME.key;
                                      each --host (IP address or DNS name) becomes a SAN, which
                                      peers check
      oscar certs show FILE           a certificate's subject, issuer, validity, SANs and
                                      SHA-256 fingerprint
      oscar health [--http 127.0.0.1:8080] [--dir D | --file F | --tls-ca F [--tls-cert F --tls-key F]]
                                      GET /health on a node's management port; exit 0 when up
                                      (over TLS when the node runs it: these flags, else
                                      OSCAR_TLS_CERT/KEY/CA, else D's CLI certificate;
                                      --tls-ca alone: no certificate of its own, as a probe)
      oscar get PATH [--http 127.0.0.1:8080] [--secret-file F | --dir D | --file F] [--tls-...]
                                      a management read (/members, /metrics), signed with the
                                      cluster secret when one is found (an endpoint beyond
                                      loopback requires it), else unsigned
      oscar simulate [--nodes 10,100] [--seed 1] [--window 60] [--kills 20] [--loss 5,20]
                     [--jobs CORES] [--report DIR]
                                      membership on the deterministic simulator: convergence,
                                      detection over K kills, false suspicions and nodes downed
                                      under each loss % (for --window seconds each), gossip load;
                                      kills and loss runs go --jobs at a time, each on its own
                                      copy of one formed cluster (fewer jobs, less memory, the
                                      same figures); DIR gets the table, every kill and an SVG
                                      against SWIM and Lifeguard; sizes up to 10000, over 1000
                                      with the downing windows of
                                      MembershipSettings.scaled(toClusterSize:)
      oscar simulate --search N [--nodes 3-9] [--seed 1] [--trace]
                                      N random fault schedules on the simulator, checked for
                                      split brain, two singletons and a removed connected
                                      majority; a failure prints its seed and a minimal schedule
      oscar chaos [--nodes 5] [--duration 60s] [--seed 1] [--faults kill,pause,partition,delay,loss]
                  [--scenario NAME|FILE] [--report .oscar/chaos] [--netns] [--list]
                  [--exec PATH [-- ARGS...]]
                                      chaos-test a local cluster: a workload, faults from the seed,
                                      heal, then checks on the recorded history; exit 0 only when
                                      every check passes (report.txt, report.html, history and
                                      pictures in --report). Faults also: partition-halves,
                                      isolate-leader, restart. --netns (root): faults applied by the
                                      kernel. --exec: your node binary, one that calls
                                      ClusterNode.Runner.chaos (test kit), with its own workload
                                      and checks
      oscar demo                      start a local actor system and show a round trip
      oscar bench w1|w2|w3 [--spin 100us] [--connect PORT] [--api messages|distributed] [--tls] [--pin]
                                      remote workloads W1-W3: this process is node A,
                                      node B a fresh child 'oscar bench serve'; W2 and W3
                                      with --api distributed call a distributed actor; --tls:
                                      both nodes speak TLS 1.3 (throwaway certificates); --pin:
                                      node A's loop on CPU 0, node B's on CPU 1 (loop-cpus)
      oscar bench w4 [--count N]      workload W4: local tell throughput
      oscar bench w5|w2s [--tls] [--bulk-lane] [--pin]
                                      large messages: W5 sends 1 MiB and 16 MiB messages (MB/s,
                                      beside the loopback's raw TCP limit); W2S runs W2 while
                                      16 MiB messages stream between the same two nodes;
                                      --bulk-lane: both nodes opt in to the bulk lane, and three
                                      more lines say how many messages it carried, how many
                                      chunks went on the main connection and how many messages
                                      fell back from the lane to chunks
      oscar bench all                 W1-W4 once each
      oscar bench pool [--count 200000]
                                      asks over a cluster pool on 3 local nodes, 64 outstanding:
                                      leastBusy, then roundRobin
      oscar bench flood [--seconds 60]
                                      two members flood tells past the outbound bound:
                                      counts unreachable events (goal 0) and dead letters
      oscar help | --help             this text
      oscar COMMAND --help            that command's lines of this text
      oscar version

    SETTINGS (oscar node; flag --NAME, variable OSCAR_NAME, or "name" in the JSON file)
    \(NodeConfiguration.reference.map { key in
        let flag = "  --\(key.name)"
        return flag + String(repeating: " ", count: max(1, 24 - flag.count)) + key.help + " [\(key.defaultValue)]"
    }.joined(separator: "\n"))
      --seed and --host are kept as short forms of --seeds and --bind-host.

    URI is oscar://host:port/path, e.g. oscar://127.0.0.1:7000/user/echo.

    The cluster secret has no default and must be 16 bytes or more (a shorter one can be
    guessed offline from one handshake). It comes from --secret-file or --secret, else the
    secret file of --dir, else OSCAR_SECRET_FILE or OSCAR_SECRET, else .oscar/cluster/secret
    when it exists ('oscar node': --secret-file or --secret, as any setting). A file keeps it
    out of 'ps'. 'oscar secret' prints a new one.

    Exit codes: 0 success; 1 the command failed (the actor or its node answered with
    an error, or the message is over the maximum size); 3 timeout; 4 node unreachable or connection refused; 64 bad arguments.
    """

ProcessControl.lineBufferStandardOutput()
let raw = CommandLine.arguments.dropFirst()
let command = raw.first ?? "help"

func fail(_ error: CLIError) -> Never {
    FileStream.standardError.write("oscar: \(error)\n")
    exit(error.exitCode)
}

/// The usage lines for one command (its entries and their continuation
/// lines), or the whole text when it has none.
func usage(of command: String) -> String {
    var picked: [String] = []
    var inEntry = false
    for line in usage.split(separator: "\n", omittingEmptySubsequences: false) {
        if line.hasPrefix("  oscar ") {
            inEntry = line.hasPrefix("  oscar \(command) ") || line == "  oscar \(command)"
        } else if !line.hasPrefix("   ") {
            inEntry = false
        }
        if inEntry { picked.append(String(line)) }
    }
    if command == "node" { picked.append("\nSee 'oscar help' for SETTINGS.") }
    return picked.isEmpty ? usage : "USAGE\n" + picked.joined(separator: "\n")
}

do throws(CLIError) {
    var args = try Arguments(raw.dropFirst())
    // `oscar CMD --help` (or -h) explains CMD instead of running it.
    if command != "help", args.has("help") || raw.dropFirst().contains("-h") {
        print(usage(of: command))
        exit(0)
    }
    switch command {
    case "help", "--help", "-h":
        print(usage)
    case "version", "--version":
        print("oscar \(OscarRelease.version)")
    case "demo":
        try args.rejectUnknownOptions()
        try await DemoCommand.run()
    case "node":
        try await NetworkCommands.node(&args, raw: Array(raw.dropFirst()))
    case "secret":
        try ClusterSecret.command(&args)
    case "certs":
        try CertsCommand.run(&args)
    case "members":
        try await NetworkCommands.members(&args, json: args.has("json"))
    case "leave":
        try await NetworkCommands.leave(&args)
    case "down":
        try await NetworkCommands.down(&args)
    case "ask":
        try await NetworkCommands.ask(&args, json: args.has("json"))
    case "tell":
        try await NetworkCommands.tell(&args)
    case "health":
        try ManagementCommands.health(&args)
    case "get":
        try ManagementCommands.get(&args)
    case "cluster":
        try await ClusterCommand.run(&args)
    case "simulate":
        try SimulateCommand.run(&args)
    case "bench":
        try await BenchCommand.run(&args)
    case "chaos":
        try await ChaosCommand.run(&args)
    default:
        throw .usage("unknown command '\(command)'; see 'oscar help'")
    }
} catch {
    fail(error)
}
