import OscarBase
import OscarCluster
import OscarMembership
import OscarRuntime
import Synchronization

/// A chaos node's own membership view: recorded to the history whenever it
/// changes (the checks for convergence and split brain read these lines),
/// and kept for the operations, which pick among the members up and
/// reachable in it.
package final class ChaosMembershipWatch: Sendable {
    private let members = Mutex<[String]>([])

    package init() {}

    /// Looks at `node`'s view every 200 ms until `until` (monotonic ns),
    /// recording each change.
    package func run(_ node: ClusterNode, until: UInt64, recorder: ChaosRecorder) async {
        var last: [String] = []
        while MonotonicTime.now() < until {
            if let snapshot = try? await node.membership(timeout: .seconds(1)) {
                let line = Self.membersLine(snapshot)
                if line != last {
                    recorder.record(.view, members: line)
                    members.withLock { $0 = line }
                    last = line
                }
            }
            try? await Task.sleep(for: .milliseconds(200))  // the next look; a view is recorded when it changes
        }
    }

    /// The members up and reachable in the latest view; `me` alone before
    /// the first.
    package func upMembers(or me: NodeAddress) -> [NodeAddress] {
        let up = members.withLock { $0 }.compactMap(ChaosViewEntry.init).filter(\.isUpAndReachable)
            .compactMap { NodeAddress(hostPort: $0.node) }
        return up.isEmpty ? [me] : up
    }

    /// A view as the history records it: `host:port=status`, `!` when
    /// unreachable, sorted.
    package static func membersLine(_ snapshot: MembershipSnapshot) -> [String] {
        snapshot.members.map { m in
            ChaosViewEntry(
                node: "\(m.node.host):\(m.node.port)", status: m.status.rawValue,
                reachable: !snapshot.unreachable.contains(m.uid)
            ).text
        }.sorted()
    }
}
