import Oscar
import Testing

@testable import OscarMembership

/// Who watches whom (`MembershipCore.monitored`): whatever members are
/// downed or exiting, every running member is watched by a running one, so
/// its crash is seen. Searched over random member lists.
@Suite(.timeLimit(.minutes(2))) struct WatchRingTests {
    @Test func everyRunningMemberHasARunningWatcherWhateverIsDowned() {
        var random = SplitMix64(seed: 2026_12_03)
        let statuses: [MemberStatus] = [.joining, .up, .up, .up, .leaving, .exiting, .down, .down]
        for round in 0..<5_000 {
            let count = Int.random(in: 2...20, using: &random)
            let members = (0..<count).map { i in
                Member(
                    node: NodeAddress(host: "10.0.0.1", port: 7000 + i, uid: UInt64(i + 1)),
                    status: statuses.randomElement(using: &random)!)
            }
            // Running and watching: not downed (it stopped, or will) and not
            // exiting (it stops at once).
            let running = members.filter { $0.status != .down && $0.status != .exiting }
            guard running.count >= 2 else { continue }
            for member in running {
                let watched = running.contains { watcher in
                    watcher.uid != member.uid
                        && MembershipCore.monitored(by: watcher.uid, in: members).contains { $0.uid == member.uid }
                }
                #expect(watched, "round \(round): \(member) is watched by no running member in \(members)")
                if !watched { return }
            }
        }
    }
}
