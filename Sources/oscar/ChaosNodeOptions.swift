import Glibc
import Oscar
import OscarDemo
import OscarTestKit

/// `oscar node`'s chaos mode, which `oscar chaos` turns on for the nodes it
/// starts: the node runs `ChaosWorkload` and appends its history to a file.
///
///     --chaos-history FILE      JSON lines appended here
///     --chaos-until NS          when the workload stops (monotonic clock, ns)
///     --chaos-seed N            seeds the workload's choices
///     --chaos-stream-to H:P     produce the reliable stream to that node
struct ChaosNodeOptions {
    let recorder: ChaosRecorder
    let settings: ChaosWorkload.Settings

    /// The options above, which the node runner leaves to this type.
    static let optionNames = ["chaos-history", "chaos-until", "chaos-seed", "chaos-stream-to"]

    /// Nil when the node is not in chaos mode.
    init?(_ args: inout Arguments) throws(CLIError) {
        guard let path = args.option("chaos-history") else { return nil }
        guard let file = FileStream.appending(path) else { throw .failed("cannot open \(path) for the history") }
        guard let until = args.option("chaos-until").flatMap({ UInt64($0) }) else {
            throw .usage("--chaos-history needs --chaos-until (monotonic nanoseconds)")
        }
        let seed = args.option("chaos-seed").flatMap { UInt64($0) } ?? 1
        var settings = ChaosWorkload.Settings(until: until, seed: seed)
        if let target = args.option("chaos-stream-to") {
            settings.streamTo = try NetworkCommands.nodeAddress(target, option: "chaos-stream-to")
        }
        self.settings = settings
        recorder = ChaosRecorder { file.write($0) }
    }

    /// Starts recording and the workload on `node`.
    func start(on system: ClusterSystem) -> Task<Void, Never> {
        recorder.bind(to: system.node.address)
        recorder.record(.nodeStart, pid: getpid())
        let (recorder, settings) = (self.recorder, self.settings)
        return Task { await ChaosWorkload.run(on: system, settings: settings, recorder: recorder) }
    }
}
