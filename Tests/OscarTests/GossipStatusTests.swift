import Oscar
import Testing

/// A gossip round sends only the state's version once every member has seen
/// the state (`MembershipCore.Directive.sendGossipStatus`); the whole state
/// goes only to a member whose version differs.
@Suite(.timeLimit(.minutes(2))) struct GossipStatusTests {
    @Test func atRestAGossipRoundCarriesOnlyTheVersion() {
        var c = HandDrivenCluster.formed(5)
        let converged = c.tick(until: { c in (1...5).allSatisfy { c.view($0).isConverged } })
        #expect(converged)
        let start = c.log.count
        for _ in 0..<20 { c.tick() }
        var statuses = 0
        for entry in c.log[start...] {
            for directive in entry.directives {
                switch directive {
                case .sendGossip: Issue.record("node \(entry.uid) sent its whole state at rest after \(entry.action)")
                case .sendGossipStatus: statuses += 1
                default: break
                }
            }
        }
        // 5 nodes, 20 rounds, one member each.
        #expect(statuses == 100)
        #expect((1...5).allSatisfy { c.sees($0, all: [1, 2, 3, 4, 5], are: .up) })
    }

    @Test func aVersionIsAnsweredOnlyWhenTheStatesDiffer() throws {
        let c = HandDrivenCluster.formed(3)
        let core = c.core
        let behind = try #require(c.states[3])
        var ahead = try #require(c.states[1])
        _ = core.reduce(&ahead, .down(2))  // a change node 3 has not seen
        #expect(ahead.gossip.version != behind.gossip.version)
        let one = HandDrivenCluster.address(1)
        let three = HandDrivenCluster.address(3)

        // Behind: it says where it is, so the member ahead sends its state.
        var state = behind
        let reply = core.reduce(&state, .gossipStatus(ahead.gossip.version, from: one))
        #expect(reply == [.sendGossipStatus(to: one, behind.gossip.version)])
        // Ahead: it sends its state.
        state = ahead
        let answer = core.reduce(&state, .gossipStatus(behind.gossip.version, from: three))
        #expect(answer == [.sendGossip(to: three, ahead.gossip)])
        // The state it sent brings the member behind level.
        state = behind
        _ = core.reduce(&state, .gossip(ahead.gossip, from: one))
        #expect(state.gossip.members[2]?.status == .down)
        // Equal versions, or a sender that is no member: nothing.
        state = behind
        let level = core.reduce(&state, .gossipStatus(behind.gossip.version, from: one))
        let stranger = core.reduce(&state, .gossipStatus(ahead.gossip.version, from: HandDrivenCluster.address(9)))
        #expect(level.isEmpty)
        #expect(stranger.isEmpty)
    }
}
