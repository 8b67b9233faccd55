import Distributed
import OscarBase
import OscarCBOR
import OscarRuntime
import Synchronization

/// Whether a system's calls take the direct path (`TargetExecution`): the
/// runtime's executor with signatures read once, and the table of callable
/// functions read from metadata sections with a fixed record layout.
///
/// Both rest on Swift runtime internals that a new toolchain may change
/// without notice, so the direct path is used only after a start-up check
/// has run a known function of this module through it and got the right
/// answer; until then, when it fails, or when `Settings.fastCallPath` is
/// off, calls take the Distributed library's `executeDistributedTarget`.
package final class CallPath: Sendable {
    /// `Settings.fastCallPath`: false means the runtime internals are not
    /// touched at all (no signature read, no metadata walk).
    package let enabled: Bool
    private let verified = Atomic<Bool>(false)
    private let check = Mutex<Task<Bool, Never>?>(nil)

    init(enabled: Bool) { self.enabled = enabled }

    /// True once the check has passed (read on every call: one load).
    var isDirect: Bool { verified.load(ordering: .acquiring) }

    /// Starts the check for `system`. The first system of the process runs
    /// it, and every later one takes its verdict; a system whose settings
    /// make the check fail (a test) runs its own.
    func start(for system: ClusterSystem, failing: Bool) {
        guard enabled else { return }
        let task = Task {
            let passed =
                failing ? await FastCallCheck.run(on: system, failing: true) : await FastCallCheck.verdict(system)
            if passed {
                self.verified.store(true, ordering: .releasing)
            } else {
                OscarLog.shared.warning(
                    "distributed calls take the library's path: the direct path failed its start-up check")
            }
            return passed
        }
        check.withLock { $0 = task }
    }

    /// The check's verdict, once it has run; false when the path is off.
    package func verdict() async -> Bool {
        guard let task = check.withLock({ $0 }) else { return false }
        return await task.value
    }
}

/// The start-up check of the direct call path: a call to `FastCallProbe`'s
/// function, found by name in the table of callable functions, planned and
/// executed directly, must return what the function computes.
enum FastCallCheck {
    /// The probe's path: the system neither registers nor resigns it.
    static let probePath = "/system/fast-call-probe"

    private static let processVerdict = Mutex<Task<Bool, Never>?>(nil)

    /// The process's verdict, run with `system` if no system has run it yet.
    static func verdict(_ system: ClusterSystem) async -> Bool {
        let task = processVerdict.withLock { task in
            if let task { return task }
            let new = Task { await run(on: system, failing: false) }
            task = new
            return new
        }
        return await task.value
    }

    /// Runs the check once. `failing` (tests only) expects a wrong answer,
    /// as a runtime whose internals moved would give one.
    static func run(on system: ClusterSystem, failing: Bool) async -> Bool {
        let probe = ClusterSystem.$pendingName.withValue(probePath) { FastCallProbe(actorSystem: system) }
        let expected = failing ? "a wrong answer" : "41 oscar"
        do {
            let target = try CallableFunctions.identifier(of: "describe", on: FastCallProbe.self)
            guard case .direct(let signature) = TargetExecution.plan(for: target), signature.parameterCount == 2 else {
                return false
            }
            var encoder = ClusterInvocationEncoder()
            try encoder.recordArgument(RemoteCallArgument(label: nil, name: "number", value: 41))
            try encoder.recordArgument(RemoteCallArgument(label: nil, name: "word", value: "oscar"))
            try encoder.doneRecording()
            var decoder = try ClusterInvocationDecoder(call: encoder.call(to: target), decoder: CBORDecoder())
            let reply = ProbeReply()
            try await TargetExecution.execute(
                target, .direct(signature), on: probe, decoder: &decoder, handler: ClusterResultHandler(reply: reply))
            return withExtendedLifetime(probe) { reply.answer == expected }
        } catch {
            return false
        }
    }
}

/// The function the start-up check calls: two arguments of two types and a
/// returned value, so argument decoding, the call and the result slot are
/// all exercised.
distributed actor FastCallProbe {
    typealias ActorSystem = ClusterSystem

    distributed func describe(_ number: Int, _ word: String) -> String { "\(number) \(word)" }
}

/// Keeps the probe's answer.
private final class ProbeReply: ReplyTarget, Sendable {
    private let value = Mutex<String?>(nil)

    var answer: String? { value.withLock { $0 } }

    func arm(on loop: EventLoop) {}
    func succeed<R: Encodable & Sendable>(_ returned: R) {
        let answer = (returned as? ReturnedValue)?.value as? String
        value.withLock { $0 = answer }
    }
    func fail(_ error: AskError) {}
    func complete(_ kind: EncodedOutcome, payload: RawSpan, decoder: CBORDecoder) {}
    func waitOn(_ table: any PendingAskTable, correlation: UInt64) {}
}
