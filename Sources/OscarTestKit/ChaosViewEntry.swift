import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime

/// One member in a `.view` event, as the node that recorded it saw it:
/// written `host:port=status`, with a trailing `!` when that node considers
/// the member unreachable. The workload writes these; the checker, the
/// report and the workload itself read them back through this one parser.
public struct ChaosViewEntry: Sendable, Hashable {
    public var node: String
    public var status: String
    public var reachable: Bool

    public init(node: String, status: String, reachable: Bool) {
        self.node = node
        self.status = status
        self.reachable = reachable
    }

    /// Parses `host:port=status[!]`; nil for anything else.
    public init?(_ text: String) {
        let parts = text.split(separator: "=", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        reachable = !parts[1].hasSuffix("!")
        node = String(parts[0])
        status = String(reachable ? parts[1] : parts[1].dropLast())
    }

    public var text: String { "\(node)=\(status)" + (reachable ? "" : "!") }

    public var isUpAndReachable: Bool { status == "up" && reachable }
}

extension ChaosEvent {
    /// The members of a `.view` event (empty for other kinds).
    public var view: [ChaosViewEntry] { (members ?? []).compactMap(ChaosViewEntry.init) }
}
