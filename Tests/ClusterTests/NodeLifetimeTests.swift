import Oscar
import OscarTestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct NodeLifetimeTests {
    @Test func shutDownNodesAreFreedWithTheirLoops() async throws {
        weak var weakSystemA: ActorSystem?
        weak var weakSystemB: ActorSystem?
        weak var weakLoop: EventLoop?
        do {
            let a = try node()
            let b = try node()
            weakSystemA = a.system
            weakSystemB = b.system
            weakLoop = a.system.loops.loops[1]
            let remote = a.system.ref("oscar://127.0.0.1:\(b.address.port)/user/ping")!
            _ = try await remote.ask(Ping(n: 1))
            remote.tell(Count())
            a.shutdown()
            b.shutdown()
            for loop in a.system.loops.loops + b.system.loops.loops {
                #expect(loop.shutdownReport.openHandles == 0)
            }
        }
        #expect(weakSystemA == nil)
        #expect(weakSystemB == nil)
        #expect(weakLoop == nil)
    }
}
