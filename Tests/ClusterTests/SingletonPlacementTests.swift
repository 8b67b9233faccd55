import Oscar
import OscarTestSupport
import Testing

@testable import OscarCluster

/// The cluster singleton follows this node's whole view, fed here directly:
/// no sockets, no gossip, each view as the membership shell would hand it.
@Suite(.timeLimit(.minutes(4))) struct SingletonPlacementTests {
    static func older(_ status: MemberStatus) -> Member {
        Member(node: NodeAddress(host: "127.0.0.1", port: 65_000, uid: 7), status: status, upNumber: 1)
    }

    @Test func theInstanceStartsOnlyOnceEveryOlderMemberIsGoneAndStopsWhenThisNodeIsNot() async throws {
        let census = SingletonCensus()
        let system = ActorSystem(settings: .init(loopCount: 1)) {
            $0.clusterSingleton("boss") { CountedSingleton(census: census) }
        }
        defer { system.shutdown() }
        let singleton = try #require(system.clusterSingletons.first)
        singleton.joinCluster()
        let me = { (status: MemberStatus) in Member(node: system.node, status: status, upNumber: 2) }

        // This node sorts before the older member: a view read one member
        // at a time would see itself alone and up first.
        #expect(Gossip.addressOrder(me(.up), Self.older(.up)))
        singleton.apply(view: [me(.up), Self.older(.up)])
        #expect(!singleton.isHosting, "an older member is up")
        for status in [MemberStatus.leaving, .down] {
            singleton.apply(view: [me(.up), Self.older(status)])
            #expect(!singleton.isHosting, "an older member that is \(status) still blocks")
        }
        singleton.apply(view: [me(.up), Self.older(.exiting)])
        #expect(singleton.isHosting, "the older member is exiting")
        #expect(await eventually(timeout: .seconds(30)) { census.starts == 1 })

        // Against the rule an older member is up again: the instance stops
        // rather than run beside it.
        singleton.apply(view: [me(.up), Self.older(.up)])
        #expect(!singleton.isHosting)
        singleton.apply(view: [me(.up)])
        #expect(singleton.isHosting, "the older member is removed")
        // The instance starts on its loop; a stop that came first would
        // rightly leave it unstarted, so wait for it before leaving.
        #expect(await eventually(timeout: .seconds(30)) { census.starts == 2 }, "\(census.history)")
        singleton.apply(view: [me(.leaving)])
        #expect(!singleton.isHosting, "this node leaves")
        #expect(await eventually(timeout: .seconds(30)) { census.running == 0 })
        #expect(census.starts == 2 && census.most == 1, "\(census.history)")
    }
}
