import Distributed
import Oscar
import Synchronization
import Testing

@testable import OscarBase
@testable import OscarCBOR
@testable import OscarCluster
@testable import OscarDistributed
@testable import OscarRuntime

enum PathTestError: Error, Codable, Sendable, Equatable {
    case refused(String)
}

/// The kinds of call the distributed actor suite covers: arguments of
/// several types, a generic function, results that own memory, nothing
/// returned, a thrown error.
distributed actor PathTestActor {
    typealias ActorSystem = ClusterSystem
    nonisolated var unownedExecutor: UnownedSerialExecutor { actorSystem.executor(for: id) }
    private var seen: [Int] = []

    distributed func describe(_ name: String, _ count: Int, _ tags: [String], _ scale: Double) -> String {
        "\(name)×\(count) [\(tags.joined(separator: ","))] @\(scale)"
    }
    distributed func echo<T: Codable & Sendable>(_ value: T) -> T { value }
    distributed func words(_ count: Int) -> [String] {
        (0..<count).map { "w\($0)-" + String(repeating: "w", count: 40) }
    }
    distributed func record(_ n: Int) { seen.append(n) }
    distributed func recorded() -> [Int] { seen }
    distributed func refuse(_ why: String) throws -> String { throw PathTestError.refused(why) }
}

/// The direct call path is used only after its start-up check passes; with
/// the check failed or the path turned off, every kind of call still works,
/// through the Distributed library's `executeDistributedTarget`.
@Suite(.serialized, .timeLimit(.minutes(3))) struct FastCallPathTests {
    enum Mode: Sendable, CustomStringConvertible {
        case off, failedCheck
        var description: String { self == .off ? "fastCallPath off" : "start-up check failed" }
    }

    static func system(_ settings: ClusterSystem.Settings = .init()) throws -> ClusterSystem {
        ClusterSystem(
            node: try ClusterNode(settings: .init(secret: "fast-call-path-secret", loopCount: 1)), settings: settings)
    }

    @Test func theDirectPathPassesItsStartUpCheckAndCarriesCalls() async throws {
        let (a, b) = (try Self.system(), try Self.system())
        defer { [a, b].forEach { $0.shutdown() } }
        #expect(await a.callPath.verdict(), "the check passes on this toolchain")
        #expect(a.callPath.isDirect)
        #expect(a.localActorCount == 0, "the check's probe is not one of the system's actors")
        let local = a.named("direct") { PathTestActor(actorSystem: a) }
        let remote = try PathTestActor.resolve(id: local.id, using: b)
        #expect(try await remote.describe("Ada", 3, ["x"], 1.5) == "Ada×3 [x] @1.5")
    }

    @Test(arguments: [Mode.off, .failedCheck])
    func everyKindOfCallWorksOnTheLibraryPath(_ mode: Mode) async throws {
        var settings = ClusterSystem.Settings()
        if mode == .off { settings.fastCallPath = false } else { settings.failsFastCallCheck = true }
        var callerSettings = ClusterSystem.Settings()
        callerSettings.decodableErrors = [PathTestError.self]
        let (a, b) = (try Self.system(settings), try Self.system(callerSettings))
        defer { [a, b].forEach { $0.shutdown() } }
        #expect(await a.callPath.verdict() == false)
        #expect(!a.callPath.isDirect, "\(mode): calls take the library's path")

        let local = a.named("library") { PathTestActor(actorSystem: a) }
        let remote = try PathTestActor.resolve(id: local.id, using: b)
        #expect(try await remote.describe("Ada", 3, ["x", "yy"], 1.5) == "Ada×3 [x,yy] @1.5")
        #expect(try await remote.echo(42) == 42)
        #expect(try await remote.echo(["x", "y"]) == ["x", "y"])
        for count in [0, 1, 6] {
            #expect(try await remote.words(count) == (0..<count).map { "w\($0)-" + String(repeating: "w", count: 40) })
        }
        for n in 0..<20 { try await remote.record(n) }
        #expect(try await remote.recorded() == Array(0..<20))
        do {
            _ = try await remote.refuse("no")
            Issue.record("the remote throw must reach the caller")
        } catch let error as PathTestError {
            #expect(error == .refused("no"))
        }
        #expect(try await local.describe("local", 1, [], 0) == "local×1 [] @0.0", "a local call")

        // A call with an extra argument is refused before the function runs,
        // as on the direct path.
        let summer = a.named("summer") { Summer(actorSystem: a) }
        let add = try CallableFunctions.identifier(of: "add", on: Summer.self)
        let extra = CBORValue.array([.text(add), .array([]), .array([.unsigned(1), .unsigned(2), .unsigned(3)])])
        let ref = b.node.system.ref(for: summer.id)
        await #expect {
            _ = try await ref.ask(RawDistributedCall(extra.cbor), timeout: .seconds(10))
        } throws: { error in
            "\(error)".contains("takes 2 arguments; the call has 3")
        }
        #expect(try await summer.count() == 0)

        // By name: the table of functions is part of the direct path.
        let byName = b.node.system.ref(for: local.id)
        if mode == .off {
            await #expect {
                _ = try await byName.call("record", arguments: [.unsigned(7)])
            } throws: { error in
                "\(error)".contains("calling by name needs ClusterSystem.Settings.fastCallPath")
            }
        } else {
            #expect(try await byName.call("record", arguments: [.unsigned(7)]) == .null)
        }
    }
}
