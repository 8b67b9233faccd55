import Glibc
import OscarBase
import OscarCBOR
import OscarCluster
import OscarRuntime
import Synchronization

extension ClusterNode.Runner {
    /// Lets `oscar chaos --exec` run this node: with the options the run
    /// gives it, the node installs the fault gate, records its views, its
    /// cluster singletons' starts and stops and every operation of
    /// `operations` to its history; with `--chaos-check FILE` the process
    /// runs `operations.checks` over a merged history, prints the results
    /// (JSON lines) and exits. Without these options the node runs as
    /// usual: the call is safe in a production binary, and installs nothing.
    public mutating func chaos(_ operations: ChaosOperations) {
        extraOptions.formUnion(ChaosNodeMode.options)
        let mode = Mutex<ChaosNodeMode?>(nil)
        let (previousIntercept, previousAdjust) = (intercept, adjust)
        let (previousStarted, previousRemoved, previousStopping) = (started, removed, stopping)
        let name = self.name
        intercept = { parsed in
            if let path = parsed.extras["chaos-check"] { return ChaosNodeMode.check(path, operations) }
            do {
                let parsedMode = try ChaosNodeMode(parsed.extras)
                mode.withLock { $0 = parsedMode }
            } catch {
                ProcessControl.writeStandardError("\(name): \(error)\n")
                return 64
            }
            return await previousIntercept(parsed)
        }
        adjust = { settings, parsed in
            previousAdjust(&settings, parsed)
            // Only a chaos run's nodes take faults from outside.
            if mode.withLock({ $0 }) != nil { settings.injectFaults(with: FaultGate()) }
        }
        started = { node in
            try await previousStarted(node)
            mode.withLock { $0 }?.start(on: node, operations)
        }
        removed = { reason in
            previousRemoved(reason)
            mode.withLock { $0 }?.recorder.record(.removed, detail: reason)
        }
        stopping = {
            mode.withLock { $0 }?.stop()
            previousStopping()
        }
    }
}

/// A node in a chaos run: where its history goes, until when its workload
/// runs, and the workload's task. `oscar node` reads its chaos options
/// through it too.
package final class ChaosNodeMode: Sendable {
    /// What a chaos run passes each node: the history file, when the
    /// workload stops, its seed.
    package static let runOptions: Set<String> = ["chaos-history", "chaos-until", "chaos-seed"]
    static let options = runOptions.union(["chaos-check"])

    package struct Problem: Error, CustomStringConvertible {
        package let description: String
    }

    package let recorder: ChaosRecorder
    package let until: UInt64
    package let seed: UInt64
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// Nil without `--chaos-history`: not a chaos run.
    package init?(_ extras: [String: String]) throws(Problem) {
        guard let path = extras["chaos-history"] else { return nil }
        guard let until = extras["chaos-until"].flatMap({ UInt64($0) }) else {
            throw Problem(description: "--chaos-history needs --chaos-until (monotonic nanoseconds)")
        }
        guard let fd = ProcessControl.openForAppending(path) else {
            throw Problem(description: "cannot open \(path) for the history: \(String(cString: strerror(errno)))")
        }
        self.until = until
        seed = extras["chaos-seed"].flatMap { UInt64($0) } ?? 1
        recorder = ChaosRecorder { ProcessControl.write($0, to: fd) }
    }

    /// Opens this node's history: its address, then its start.
    package func beginRecording(as node: NodeAddress) {
        recorder.bind(to: node)
        recorder.record(.nodeStart, pid: getpid())
    }

    func start(on node: ClusterNode, _ operations: ChaosOperations) {
        beginRecording(as: node.address)
        let recorder = self.recorder
        node.observeSingletons { name, started in
            recorder.record(started ? .singletonStart : .singletonStop, target: name)
        }
        let (until, seed) = (self.until, self.seed)
        task.withLock {
            $0 = Task {
                let watch = ChaosMembershipWatch()
                async let views: Void = watch.run(node, until: until, recorder: recorder)
                await operations.run(on: node, until: until, seed: seed, view: watch, recorder: recorder)
                await views
                recorder.record(.workloadDone)
            }
        }
    }

    func stop() { task.withLock { $0?.cancel() } }

    /// `--chaos-check FILE`: the application's checks over a merged history,
    /// one JSON line per check on standard output.
    static func check(_ path: String, _ operations: ChaosOperations) -> Int32 {
        let text: String
        do {
            text = try ProcessControl.readFile(path, atMost: 1 << 30)
        } catch {
            ProcessControl.writeStandardError("--chaos-check: \(error)\n")
            return 64
        }
        let history = ChaosHistory(ChaosEvent.parse(text).events)
        for check in operations.check(history) {
            print(JSONBridge.json(encoding: check) ?? "{}")
        }
        return 0
    }
}
