import Oscar
import OscarTestSupport
import Testing

@testable import OscarCluster

/// State-changing management requests: signed over method, path, time,
/// nonce and body; accepted once, within the window, with bounded memory.
@Suite(.timeLimit(.minutes(4))) struct SignedRequestTests {
    static let secret = Array("a-long-cluster-secret".utf8)

    static func request(
        _ body: String = #"{"heal":{}}"#, method: String = "POST", path: String = "/faults", at time: Int64,
        nonce: String? = nil, secret: [UInt8] = secret
    ) -> ManagementRoutes.Request {
        let bytes = Array(body.utf8)
        let headers =
            nonce.map {
                SignedRequest.headers(method: method, path: path, body: bytes, secret: secret, now: time, nonce: $0)
            } ?? SignedRequest.headers(method: method, path: path, body: bytes, secret: secret, now: time)
        return ManagementRoutes.Request(method: method, path: path, headers: headers, body: bytes)
    }

    @Test func aSignedRequestIsAcceptedOnceAndItsReplayRefused() {
        var guardian = ReplayGuard()
        let signed = Self.request(at: 1_000)
        #expect(guardian.admit(signed, secret: Self.secret, now: 1_000) == nil)
        let replay = guardian.admit(signed, secret: Self.secret, now: 1_005)
        #expect(replay?.response.status == 401 && replay?.response.body.contains("replayed") == true)
        #expect(guardian.admit(Self.request(at: 1_005), secret: Self.secret, now: 1_005) == nil, "a new nonce")
    }

    @Test func anythingChangedOrUnsignedIsRefused() {
        var guardian = ReplayGuard()
        let good = Self.request(at: 50)
        var changed: [ManagementRoutes.Request] = []
        for edit in 0..<4 {
            var r = good
            switch edit {
            case 0: r.body = Array(#"{"blackhole":{}}"#.utf8)
            case 1: r.path = "/other"
            case 2: r.method = "PUT"
            default: r.headers[SignedRequest.timestampHeader] = "51"
            }
            changed.append(r)
        }
        changed.append(Self.request(at: 50, secret: Array("another-secret".utf8)))
        for r in changed { #expect(guardian.admit(r, secret: Self.secret, now: 50)?.response.status == 401) }
        for (name, value) in [
            (SignedRequest.nonceHeader, "abc"), (SignedRequest.nonceHeader, String(repeating: "z", count: 16)),
            (SignedRequest.nonceHeader, String(repeating: "a", count: 65)), (SignedRequest.timestampHeader, "soon"),
        ] {
            var r = good
            r.headers[name] = value
            #expect(guardian.admit(r, secret: Self.secret, now: 50)?.response.status == 401, "\(name): \(value)")
        }
        var unsigned = good
        unsigned.headers = [:]
        #expect(guardian.admit(unsigned, secret: Self.secret, now: 50)?.response.body.contains("unsigned") == true)
        #expect(guardian.remembered == 0, "nothing refused is remembered")
        #expect(guardian.admit(good, secret: Self.secret, now: 50) == nil, "the original still goes through")
    }

    @Test func onlyTimestampsWithinTheWindowOfTheNodesClockPass() {
        var guardian = ReplayGuard()
        let w = SignedRequest.window
        #expect(guardian.admit(Self.request(at: 1_000 - w), secret: Self.secret, now: 1_000) == nil)
        #expect(guardian.admit(Self.request(at: 1_000 + w), secret: Self.secret, now: 1_000) == nil)
        #expect(guardian.admit(Self.request(at: 999 - w), secret: Self.secret, now: 1_000)?.response.status == 401)
        #expect(guardian.admit(Self.request(at: 1_001 + w), secret: Self.secret, now: 1_000)?.response.status == 401)
        // Clocks at the ends of the range neither wrap into the window nor trap.
        #expect(guardian.admit(Self.request(at: .min), secret: Self.secret, now: .max)?.response.status == 401)
        #expect(guardian.admit(Self.request(at: .max), secret: Self.secret, now: .min)?.response.status == 401)
        #expect(guardian.admit(Self.request(at: .max - 1), secret: Self.secret, now: .max) == nil)
    }

    /// Random schedules of fresh requests, replays and clock steps: a nonce
    /// is never accepted twice while its request could still pass, memory
    /// never exceeds the capacity, and a full guard refuses (503) rather
    /// than forgets.
    @Test(arguments: 1...20) func noScheduleGetsANonceInTwiceOrGrowsPastTheCapacity(seed: UInt64) {
        var rng = SeededRandom(seed: seed)
        var guardian = ReplayGuard(capacity: 8)
        var now: Int64 = 10_000
        var sent: [(request: ManagementRoutes.Request, at: Int64, accepted: Bool)] = []
        for _ in 0..<400 {
            now += Int64.random(in: 0...3, using: &rng)
            let accepted = sent.filter(\.accepted)
            if !accepted.isEmpty, Bool.random(using: &rng) {
                let replay = accepted[Int.random(in: 0..<accepted.count, using: &rng)]
                let refusal = guardian.admit(replay.request, secret: Self.secret, now: now)
                #expect(refusal != nil, "seed \(seed): a replay at \(now) of a request signed at \(replay.at)")
            } else {
                let at = now - Int64.random(in: 0...5, using: &rng)
                let r = Self.request(at: at)
                let refusal = guardian.admit(r, secret: Self.secret, now: now)
                #expect(
                    refusal == nil || refusal?.response.status == 503, "seed \(seed): \(String(describing: refusal))")
                sent.append((r, at, refusal == nil))
            }
            #expect(guardian.remembered <= 8)
        }
        #expect(sent.contains { $0.accepted })
    }

    @Test func aFullGuardRefusesUntilItsNoncesExpire() {
        var guardian = ReplayGuard(capacity: 3)
        for _ in 0..<3 { #expect(guardian.admit(Self.request(at: 100), secret: Self.secret, now: 100) == nil) }
        #expect(guardian.admit(Self.request(at: 100), secret: Self.secret, now: 100)?.response.status == 503)
        let later = 100 + SignedRequest.window + 1
        #expect(guardian.admit(Self.request(at: later), secret: Self.secret, now: later) == nil)
        #expect(guardian.remembered == 1)
    }
}
