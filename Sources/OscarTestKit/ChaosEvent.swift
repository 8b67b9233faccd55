import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// One line of a chaos run's history: an operation's invocation or
/// outcome, an observation a node made, or something the nemesis or the
/// runner did. Every process of the run writes its own lines; the runner
/// merges them by `t`, which all processes read from one monotonic clock.
///
/// JSON lines, for example:
/// `{"t":1203,"node":"127.0.0.1:7001","uid":77,"kind":"invoke","op":4,"target":"pool","value":2000}`
public struct ChaosEvent: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// An ask was sent (`op`, `target`, `value` = its timeout in ms).
        case invoke
        /// Its outcome: a reply, a typed error, or the timeout.
        case ok, fail, timeout
        /// The reliable stream: accepted by the producer (`seq`), acknowledged
        /// (`seq` = all up to it), processed by the consumer (`seq`).
        case streamSend = "stream-send"
        case streamAck = "stream-ack"
        case streamProcess = "stream-process"
        /// What a node sees: `members` as `host:port=status`, with a trailing
        /// `!` for a member it considers unreachable.
        case view
        case singletonStart = "singleton-start"
        case singletonStop = "singleton-stop"
        /// A virtual actor was activated or deactivated here (`target` = its key).
        case activationStart = "activation-start"
        case activationStop = "activation-stop"
        /// A node process began recording (`pid`), membership removed it
        /// (`detail` says why), it finished its workload.
        case nodeStart = "node-start"
        case removed
        case workloadDone = "workload-done"
        /// The runner: a node process started, was killed (SIGKILL), paused,
        /// resumed, told to stop gracefully (SIGTERM), exited (`value` = exit
        /// code, or `detail` = the signal).
        case start, kill, pause, resume, stop, exit
        /// The nemesis: a network fault began (`detail` describes it), or all
        /// faults were lifted.
        case fault, heal
        /// After heal: how long the live nodes took to agree (`value` ms), or
        /// `detail` when they did not.
        case converged
        /// A node process's peak resident memory (`value` bytes).
        case rss
    }

    /// Nanoseconds on the host's monotonic clock.
    public var t: UInt64
    /// The node the line is about, `host:port`.
    public var node: String
    public var kind: Kind
    /// The node process's uid (its incarnation), on lines a node wrote.
    public var uid: UInt64?
    /// The operation's number, unique within one node process.
    public var op: Int?
    /// What an ask went to: `echo@host:port`, `pool` or `singleton`.
    public var target: String?
    public var seq: UInt64?
    public var members: [String]?
    public var pid: Int32?
    public var value: Int?
    public var detail: String?
    /// On stream lines: the stream's id (its producer's incarnation).
    public var stream: UInt64?

    public init(
        t: UInt64? = nil, node: String, kind: Kind, uid: UInt64? = nil, op: Int? = nil,
        target: String? = nil, seq: UInt64? = nil, members: [String]? = nil, pid: Int32? = nil, value: Int? = nil,
        detail: String? = nil, stream: UInt64? = nil
    ) {
        self.t = t ?? MonotonicTime.now()  // nil: now
        self.node = node
        self.kind = kind
        self.uid = uid
        self.op = op
        self.target = target
        self.seq = seq
        self.members = members
        self.pid = pid
        self.value = value
        self.detail = detail
        self.stream = stream
    }

    /// One JSON line (without the newline).
    public var jsonLine: String { JSONBridge.json(encoding: self) ?? "{}" }

    /// Parses one JSON line; nil for a line that is not an event.
    public init?(jsonLine line: Substring) {
        guard let event = JSONBridge.decode(ChaosEvent.self, fromJSON: String(line)) else { return nil }
        self = event
    }

    /// Every event in `text` (JSON lines), sorted by time; the number of
    /// lines that were not events (a line cut short by a kill, say).
    public static func parse(_ text: String) -> (events: [ChaosEvent], skipped: Int) {
        var events: [ChaosEvent] = []
        var skipped = 0
        for line in text.split(separator: "\n") where !line.isEmpty {
            if let e = ChaosEvent(jsonLine: line) { events.append(e) } else { skipped += 1 }
        }
        events.sort { $0.t < $1.t }
        return (events, skipped)
    }
}

/// Where a node process writes its history lines: a sink the shell gives
/// (a file opened for appending), called from any thread, one line a call.
/// Bound to its node once the node exists; nothing is recorded before.
public final class ChaosRecorder: Sendable {
    private let identity = Mutex<(node: String, uid: UInt64)?>(nil)
    private let sink: @Sendable (String) -> Void

    public init(sink: @escaping @Sendable (String) -> Void) { self.sink = sink }

    public func bind(to node: NodeAddress) { identity.withLock { $0 = (node.description, node.uid) } }

    public func record(
        _ kind: ChaosEvent.Kind, op: Int? = nil, target: String? = nil, seq: UInt64? = nil, members: [String]? = nil,
        pid: Int32? = nil, value: Int? = nil, detail: String? = nil, stream: UInt64? = nil
    ) {
        guard let me = identity.withLock({ $0 }) else { return }
        let event = ChaosEvent(
            node: me.node, kind: kind, uid: me.uid, op: op, target: target, seq: seq, members: members, pid: pid,
            value: value, detail: detail, stream: stream)
        sink(event.jsonLine + "\n")
    }
}
