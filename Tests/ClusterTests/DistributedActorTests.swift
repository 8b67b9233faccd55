import Distributed
import Oscar
import OscarTestSupport
import Synchronization
import Testing

enum GreeterError: Error, Codable, Sendable, Equatable {
    case angry(String)
}

distributed actor Greeter {
    typealias ActorSystem = ClusterSystem
    nonisolated var unownedExecutor: UnownedSerialExecutor { actorSystem.executor(for: id) }

    private var seen: [Int] = []

    distributed func greet(_ name: String) -> String { "hello, \(name), from \(actorSystem.node.address.port)" }

    distributed func echo<T: Codable & Sendable>(_ value: T) -> T { value }

    distributed func refuse(_ why: String) throws -> String { throw GreeterError.angry(why) }

    distributed func record(_ n: Int) { seen.append(n) }

    distributed func recorded() -> [Int] { seen }
}

/// Distributed actors over real sockets between two nodes in this process.
@Suite struct DistributedActorTests {
    static func system(_ settings: ClusterSystem.Settings = .init()) throws -> ClusterSystem {
        ClusterSystem(node: try ClusterNode(settings: .init(secret: "s3cret", loopCount: 2)), settings: settings)
    }

    @Test func callsGenericCallsAndThrownErrorsCrossNodes() async throws {
        var settings = ClusterSystem.Settings()
        settings.decodableErrors = [GreeterError.self]
        let (a, b) = (try Self.system(), try Self.system(settings))
        defer { [a, b].forEach { $0.shutdown() } }
        let local = a.named("greeter") { Greeter(actorSystem: a) }
        #expect(local.id.path == "/user/greeter")
        #expect(try Greeter.resolve(id: local.id, using: a) === local, "resolve returns the local actor")

        let remote = try Greeter.resolve(id: local.id, using: b)
        #expect(remote.id == local.id)
        #expect(try await remote.greet("Ada") == "hello, Ada, from \(a.node.address.port)")
        #expect(try await remote.echo(42) == 42)
        #expect(try await remote.echo(["x", "y"]) == ["x", "y"])
        #expect(try await remote.echo([1.5: "a"]) == [1.5: "a"])

        do {
            _ = try await remote.refuse("no")
            Issue.record("the remote throw must reach the caller")
        } catch let error as RemoteCallError {
            #expect(error.typeName.hasSuffix("GreeterError"))
            #expect(error.message.contains("angry"))
            #expect(error.value as? GreeterError == .angry("no"), "decoded: the type is allowed")
        }
        // Without the setting, the type and message arrive, not the value.
        let remoteFromA = try Greeter.resolve(id: local.id, using: Self.system())
        defer { remoteFromA.actorSystem.shutdown() }
        do {
            _ = try await remoteFromA.refuse("no")
        } catch let error as RemoteCallError {
            #expect(error.value == nil && error.message.contains("angry"))
        }
    }

    @Test func tenThousandCallsFromOneCallerArriveInOrder() async throws {
        let (a, b) = (try Self.system(), try Self.system())
        defer { [a, b].forEach { $0.shutdown() } }
        let local = a.named("ordered") { Greeter(actorSystem: a) }
        let remote = try Greeter.resolve(id: local.id, using: b)
        _ = try await remote.greet("warm-up")  // connected
        // One caller: calls started one after another on one loop, none
        // awaited before the next is sent.
        let loop = b.node.system.loops.next()
        let done = Tally()
        for i in 0..<10_000 {
            Task(executorPreference: loop.taskExecutor) {
                try? await remote.record(i)
                done.increment()
            }
        }
        #expect(await eventually(timeout: .seconds(60)) { done.count == 10_000 })
        #expect(try await remote.recorded() == Array(0..<10_000))
    }

    @Test func aCallToADeadNodeFailsFast() async throws {
        let (a, b) = (try Self.system(), try Self.system())
        defer { b.shutdown() }
        let doomed = a.named("doomed") { Greeter(actorSystem: a) }
        let remote = try Greeter.resolve(id: doomed.id, using: b)
        _ = try await remote.greet("before")
        a.shutdown()
        let clock = ContinuousClock()
        let start = clock.now
        await #expect {
            _ = try await remote.greet("after")
        } throws: { error in
            if case .nodeUnreachable = error as? AskError { return true }
            return false
        }
        #expect(clock.now - start < realTimeBound(.seconds(2)), "at once, not at the 5 s timeout")
        withExtendedLifetime(doomed) {}
    }

    @Test func theTableEmptiesAsActorsDeinitAndTheSystemIsReleased() async throws {
        weak var weakSystem: ClusterSystem?
        weak var weakActors: ActorSystem?
        weak var weakLoop: EventLoop?
        do {
            let system = try Self.system()
            weakSystem = system
            weakActors = system.node.system
            weakLoop = system.node.system.loops.loops[1]
            var greeter: Greeter? = Greeter(actorSystem: system)
            let id = greeter!.id
            #expect(id.path.hasPrefix("/distributed/Greeter-"))
            #expect(system.localActorCount == 1)
            #expect(try await greeter!.greet("x").hasPrefix("hello"))
            greeter = nil
            #expect(await eventually { system.localActorCount == 0 })
            #expect(throws: AskError.self) { try Greeter.resolve(id: id, using: system) }
            // Its path is free again: a message to it finds nobody.
            await #expect(throws: AskError.self) { try await system.node.system.ref(for: id).ask(Ping(n: 1)) }
            system.shutdown()
        }
        #expect(weakSystem == nil && weakActors == nil && weakLoop == nil, "the system and its loops deinitialize")
    }
}
