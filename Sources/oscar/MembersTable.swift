import Oscar
import OscarDemo
import OscarTestKit

/// `oscar members` output: a table for people, JSON for scripts.
enum MembersTable {
    static func text(_ view: MembershipSnapshot) -> String {
        var rows = [["ADDRESS", "UID", "STATUS", "REACHABLE", "LEADER", "ROLES"]]
        for m in view.members {
            rows.append([
                "\(m.node)", "\(m.uid)", m.status.rawValue, view.unreachable.contains(m.uid) ? "no" : "yes",
                isLeader(m, view) ? "*" : "",
                m.roles.sorted().joined(separator: ","),
            ])
        }
        let widths = (0..<rows[0].count).map { c in rows.map { $0[c].count }.max()! }
        let lines = rows.map { row in
            let line = zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
            return String(line.reversed().drop(while: { $0 == " " }).reversed())
        }
        return (["members as \(view.observer) sees them:"] + lines).joined(separator: "\n")
    }

    static func isLeader(_ m: Member, _ view: MembershipSnapshot) -> Bool { view.leader == m.node }
}
