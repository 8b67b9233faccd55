import Oscar
import OscarDemo
import OscarTestSupport
import Testing

/// Inputs that used to trap (and so end the whole node) now fail one ask
/// with a typed error, and the actor keeps answering.
@Suite(.timeLimit(.minutes(5))) struct TrapAuditTests {
    static let overflow = Demo.DemoError.overflow(1, Int.max).description

    /// Durations come from users (`--timeout`, configuration files): none
    /// may trap, however large.
    @Test func absurdDurationsAreRefusedOrSaturateInsteadOfTrapping() async throws {
        for text in ["1e300s", "99999999999999m", "1e20", "inf", "nan", "-1s"] {
            #expect(DurationText.parse(text) == nil, "\(text)")
        }
        #expect(DurationText.parse("9000000000s") != nil)
        #expect(Duration.seconds(Int64.max).nanoseconds == Int64.max)
        let system = ActorSystem(settings: .init(loopCount: 1)) { Demo.declare(in: &$0) }
        defer { system.shutdown() }
        let counter = try #require(system.actor("counter"))
        // An ask whose timeout is "never" is answered, and its timer neither
        // traps nor fires.
        #expect(try await counter.ask(Demo.GetCount(), timeout: .seconds(Int64.max)) == 0)
        #expect(try await counter.ask(Demo.GetCount(), timeout: .seconds(9_000_000_000)) == 0)
    }

    @Test func theDemoCounterRefusesAnOverflowingIncrementAndKeepsItsCount() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2)) { Demo.declare(in: &$0) }
        defer { system.shutdown() }
        let counter = try #require(system.actor("counter"))
        _ = try await counter.ask(Demo.Increment(by: 1))
        await #expect(throws: AskError.handlerFailed(Self.overflow)) {
            try await counter.ask(Demo.Increment(by: Int.max))
        }
        #expect(try await counter.ask(Demo.GetCount()) == 1, "the count is unchanged and the actor answers")
        _ = try await counter.ask(Demo.Increment(by: Int.min))
        await #expect(throws: AskError.handlerFailed(Demo.DemoError.overflow(Int.min + 1, Int.min).description)) {
            try await counter.ask(Demo.Increment(by: Int.min))
        }
        #expect(try await counter.ask(Demo.GetCount()) == Int.min + 1)
    }

    @Test func anOverflowingIncrementAsTheCLISendsItFailsTheAskOnly() async throws {
        let system = ActorSystem(settings: .init(loopCount: 2)) { Demo.declare(in: &$0) }
        defer { system.shutdown() }
        let counter = try #require(system.actor("counter"))
        let one: CBORValue = .map([(key: .text("by"), value: .unsigned(1))])
        let max: CBORValue = .map([(key: .text("by"), value: .unsigned(UInt64(Int.max)))])
        counter.tell(manifest: Demo.Increment.manifest, value: one)
        await #expect(throws: AskError.handlerFailed(Self.overflow)) {
            try await counter.ask(manifest: Demo.Increment.manifest, value: max)
        }
        #expect(try await counter.ask(Demo.GetCount()) == 1)
    }

    @Test func theDemoGreeterRefusesAnOverflowingAddAcrossNodes() async throws {
        let host = try ClusterNode(settings: .init(secret: "a-long-cluster-secret", loopCount: 2))
        let caller = try ClusterNode(settings: .init(secret: "a-long-cluster-secret", loopCount: 2))
        defer { [caller, host].forEach { $0.shutdown() } }
        let (greeterSystem, greeter) = Demo.hostGreeter(on: host)
        let ref = try #require(caller.system.ref("oscar://127.0.0.1:\(host.address.port)/user/greeter"))
        do {
            _ = try await ref.call("add", arguments: [.unsigned(UInt64(Int.max)), .unsigned(1)], timeout: .seconds(20))
            Issue.record("an overflowing add must fail")
        } catch let error as RemoteCallError {
            #expect(error.message.contains("outside the range"), "\(error)")
        }
        let sum = try await ref.call("add", arguments: [.unsigned(2), .unsigned(40)], timeout: .seconds(20))
        #expect(sum == .unsigned(42), "the greeter still answers")
        withExtendedLifetime((greeterSystem, greeter)) {}
    }
}
