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
    let mode: ChaosNodeMode
    let settings: ChaosWorkload.Settings
    var recorder: ChaosRecorder { mode.recorder }

    /// The options above, which the node runner leaves to this type.
    static let optionNames = ChaosNodeMode.runOptions.union(["chaos-stream-to"])

    /// Nil when the node is not in chaos mode. The run's options are read
    /// as an application's node reads them (`ChaosNodeMode`); the stream
    /// target is the built-in workload's own.
    init?(_ args: inout Arguments) throws(CLIError) {
        var extras: [String: String] = [:]
        for name in ChaosNodeMode.runOptions { extras[name] = args.option(name) }
        do {
            guard let mode = try ChaosNodeMode(extras) else { return nil }
            self.mode = mode
        } catch {
            throw .usage(error.description)
        }
        var settings = ChaosWorkload.Settings(until: mode.until, seed: mode.seed)
        if let target = args.option("chaos-stream-to") {
            settings.streamTo = try NetworkCommands.nodeAddress(target, option: "chaos-stream-to")
        }
        self.settings = settings
    }

    /// Starts recording and the workload on `node`.
    func start(on system: ClusterSystem) -> Task<Void, Never> {
        mode.beginRecording(as: system.node.address)
        let (recorder, settings) = (self.recorder, self.settings)
        return Task { await ChaosWorkload.run(on: system, settings: settings, recorder: recorder) }
    }
}
