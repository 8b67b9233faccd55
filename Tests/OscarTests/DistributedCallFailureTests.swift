import Distributed
import Oscar
import Synchronization
import Testing

/// Counts the calls that reached it: a call refused before it starts must
/// leave the count alone.
distributed actor Summer {
    typealias ActorSystem = ClusterSystem
    nonisolated var unownedExecutor: UnownedSerialExecutor { actorSystem.executor(for: id) }
    private var calls = 0

    distributed func add(_ a: Int, _ b: Int) -> Int {
        calls += 1
        return a &+ b
    }

    distributed func count() -> Int { calls }
}

/// A distributed call's payload exactly as given, sent over the wire as an
/// ask from another node: what a client written from docs/PROTOCOL.md sends.
struct RawDistributedCall: Message {
    typealias Reply = DistributedOutcome<RawCBOR>
    static var manifest: String { DistributedCall.manifest }
    var payload: RawCBOR
    init(_ bytes: [UInt8]) { payload = RawCBOR(bytes: bytes) }
    init(from decoder: any Decoder) throws { payload = try RawCBOR(from: decoder) }
    func encode(to encoder: any Encoder) throws { try payload.encode(to: encoder) }
}

/// docs/PROTOCOL.md, "Distributed calls": a call that cannot be started (an
/// argument that does not decode, or more or fewer arguments than the
/// function takes) is a `decodeFailed` failure frame and the function does
/// not run; indefinite-length call arrays are read like definite ones.
@Suite(.serialized, .timeLimit(.minutes(5))) struct DistributedCallFailureTests {
    final class Pair: Sendable {
        let callee: ClusterSystem
        let caller: ClusterSystem
        let summer: Summer
        init() throws {
            let secret = "distributed-failure-secret"
            let callee = ClusterSystem(node: try ClusterNode(settings: .init(secret: secret, loopCount: 1)))
            self.callee = callee
            caller = ClusterSystem(node: try ClusterNode(settings: .init(secret: secret, loopCount: 1)))
            summer = callee.named("summer") { Summer(actorSystem: callee) }
        }
        func shutdown() {
            caller.shutdown()
            callee.shutdown()
        }
        var ref: ActorRef { caller.node.system.ref(for: summer.id) }

        /// The outcome, or the failure, of sending `payload`.
        func send(_ payload: [UInt8]) async -> Result<DistributedOutcome<RawCBOR>, AskError> {
            do {
                return .success(try await ref.ask(RawDistributedCall(payload), timeout: .seconds(10)))
            } catch {
                return .failure(error)
            }
        }
    }

    /// `["add", [], arguments]` with the arguments' items as given.
    static func add(_ arguments: [CBORValue]) -> [UInt8] {
        CBORValue.array([.text("add"), .array([]), .array(arguments)]).cbor
    }

    static func isDecodeFailed(_ result: Result<DistributedOutcome<RawCBOR>, AskError>) -> Bool {
        if case .failure(.decodeFailed) = result { return true }
        return false
    }

    static func sum(_ result: Result<DistributedOutcome<RawCBOR>, AskError>) -> Int? {
        guard case .success(.value(let raw)) = result else { return nil }
        return try? CBORDecoder().decode(Int.self, from: raw.bytes)
    }

    @Test func extraMissingAndBadArgumentsAreDecodeFailedAndTheFunctionDoesNotRun() async throws {
        let pair = try Pair()
        defer { pair.shutdown() }
        #expect(Self.sum(await pair.send(Self.add([.unsigned(2), .unsigned(40)]))) == 42)
        let refused: [(String, [UInt8])] = [
            ("an extra argument", Self.add([.unsigned(1), .unsigned(2), .unsigned(3)])),
            ("a missing argument", Self.add([.unsigned(1)])),
            ("no arguments", Self.add([])),
            ("a text for an Int", Self.add([.text("x"), .unsigned(2)])),
            ("a second argument too large", Self.add([.unsigned(1), .unsigned(UInt64.max)])),
        ]
        for (name, payload) in refused {
            let result = await pair.send(payload)
            #expect(Self.isDecodeFailed(result), "\(name): \(result)")
        }
        if case .failure(.decodeFailed(let text)) = await pair.send(refused[0].1) {
            #expect(text.contains("takes 2 arguments; the call has 3"), "\(text)")
        }
        #expect(try await pair.summer.count() == 1, "only the good call ran")
    }

    @Test func indefiniteLengthCallsAreAnswered() async throws {
        let pair = try Pair()
        defer { pair.shutdown() }
        // [_ "add", [_ ], [_ 2, 40]], and the target in two chunks.
        #expect(Self.sum(await pair.send(Hex.bytes("9f636164649fff9f021828ffff"))) == 42)
        #expect(Self.sum(await pair.send(Hex.bytes("837f6161626464ff80820102"))) == 3)
    }

    /// Random argument lists, definite or not: a call is answered exactly
    /// when it has two integers, and refused with decodeFailed otherwise.
    @Test func randomArgumentListsAreAnsweredOrRefusedAsDocumented() async throws {
        let pair = try Pair()
        defer { pair.shutdown() }
        var rng = SeededRandom(seed: 0xA_DD5)
        var answered = 0
        for _ in 0..<150 {
            let items: [CBORValue] = (0..<Int.random(in: 0...3, using: &rng)).map { _ in
                Bool.random(using: &rng) ? .unsigned(.random(in: 0...1000, using: &rng)) : .text("n")
            }
            var arguments = CBORValue.array(items).cbor
            if Bool.random(using: &rng) {
                arguments[0] = 0x9f
                arguments.append(0xff)
            }
            let payload = [0x83] + CBORValue.text("add").cbor + [0x80] + arguments
            let result = await pair.send(payload)
            let numbers = items.compactMap { if case .unsigned(let n) = $0 { Int(n) } else { nil } }
            if items.count == 2, numbers.count == 2 {
                answered += 1
                #expect(Self.sum(result) == numbers[0] + numbers[1])
            } else {
                #expect(Self.isDecodeFailed(result), "\(items): \(result)")
            }
        }
        #expect(answered > 5)
        #expect(try await pair.summer.count() == answered)
    }
}
