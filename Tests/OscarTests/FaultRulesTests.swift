import Oscar
import Testing

@testable import OscarCluster
@testable import OscarTestKit

/// The fault gate's rules, driven with a hand-held clock.
@Suite(.timeLimit(.minutes(5))) struct FaultRulesTests {
    let peer = "127.0.0.1:7002"
    let other = "127.0.0.1:7003"

    @Test func aBlackholeDropsOnlyItsPeerInItsDirection() {
        var rules = FaultRules()
        rules.apply(.blackhole(peers: [peer], direction: .outbound))
        let fates = [
            rules.outboundFate(to: peer, bytes: 10, now: 0), rules.outboundFate(to: other, bytes: 10, now: 0),
        ]
        #expect(fates == [.drop, .pass])
        let inboundBefore = rules.dropsInbound(from: peer)
        rules.apply(.blackhole(peers: [peer], direction: .inbound))
        let inboundAfter = rules.dropsInbound(from: peer)
        #expect(!inboundBefore && inboundAfter)
        rules.apply(.restore(peers: [peer]))
        let restored = (rules.outboundFate(to: peer, bytes: 10, now: 0), rules.dropsInbound(from: peer))
        #expect(restored.0 == .pass && !restored.1)
        let status = rules.status
        #expect(status.droppedOutbound == 1 && status.droppedInbound == 1)
    }

    @Test func lossDropsAboutItsFractionAndTheSameSeedDropsTheSameFrames() {
        func run(seed: UInt64) -> [Bool] {
            var rules = FaultRules()
            rules.apply(.loss(fraction: 0.25, peers: nil, seed: seed))
            return (0..<4000).map { _ in rules.outboundFate(to: peer, bytes: 1, now: 0) == .drop }
        }
        let drops = run(seed: 3)
        #expect(drops == run(seed: 3))
        let fraction = Double(drops.filter { $0 }.count) / 4000
        #expect(abs(fraction - 0.25) < 0.03, "dropped \(fraction)")
    }

    @Test func delayWithJitterKeepsEachPeersOrderAndStaysInItsWindow() {
        var rules = FaultRules()
        rules.apply(.delay(millis: 100, jitterMillis: 40, peers: [peer]))
        var last: UInt64 = 0
        for i in 0..<500 {
            let now = UInt64(i) * 1_000_000  // one frame a millisecond
            guard case .holdUntil(let release) = rules.outboundFate(to: peer, bytes: 100, now: now) else {
                Issue.record("frame \(i) was not held")
                return
            }
            #expect(release >= last, "frame \(i) would overtake the one before")
            #expect(release >= now + 60_000_000)
            last = release
        }
        let otherFate = rules.outboundFate(to: other, bytes: 100, now: 0)
        #expect(otherFate == .pass, "the rule names one peer")
    }

    @Test func throttlingSpacesFramesByTheirSize() {
        var rules = FaultRules()
        rules.apply(.throttle(bytesPerSecond: 1000, peers: nil))
        // Ten 100-byte frames at once leave 0.1 s apart: a second in all.
        var releases: [UInt64] = []
        for _ in 0..<10 {
            if case .holdUntil(let r) = rules.outboundFate(to: peer, bytes: 100, now: 0) { releases.append(r) }
        }
        #expect(releases == (1...10).map { UInt64($0) * 100_000_000 })
    }

    @Test func healRemovesEveryRuleAndStatusNamesThem() {
        var rules = FaultRules()
        rules.apply(.blackhole(peers: [peer], direction: .both))
        rules.apply(.loss(fraction: 0.1, peers: [other], seed: nil))
        rules.apply(.delay(millis: 50, jitterMillis: 5, peers: nil))
        #expect(
            rules.status.rules == [
                "blackhole outbound 127.0.0.1:7002", "blackhole inbound 127.0.0.1:7002",
                "delay 50 ms ± 5 ms to every peer", "loss 0.1 to 127.0.0.1:7003",
            ])
        rules.apply(.heal)
        #expect(!rules.isActive)
        #expect(rules.status.rules.isEmpty)
    }
}

/// The JSON forms the README shows for `POST /faults`.
@Suite(.timeLimit(.minutes(5))) struct FaultCommandJSONTests {
    func decode(_ json: String) -> FaultCommand? {
        let request = ManagementRoutes.Request(method: "POST", path: "/faults", body: Array(json.utf8))
        return try? FaultEndpoint.command(request).get()
    }

    @Test func theDocumentedFormsDecodeWithOptionalFieldsLeftOut() {
        #expect(
            decode(#"{"blackhole":{"peers":["127.0.0.1:7002"],"direction":"both"}}"#)
                == .blackhole(peers: ["127.0.0.1:7002"], direction: .both))
        #expect(decode(#"{"heal":{}}"#) == .heal)
        #expect(
            decode(#"{"delay":{"millis":100,"jitterMillis":20}}"#) == .delay(millis: 100, jitterMillis: 20, peers: nil))
        #expect(decode(#"{"loss":{"fraction":0.1}}"#) == .loss(fraction: 0.1, peers: nil, seed: nil))
        #expect(decode(#"{"throttle":{"bytesPerSecond":65536}}"#) == .throttle(bytesPerSecond: 65536, peers: nil))
        #expect(decode(#"{"restore":{"peers":["127.0.0.1:7002"]}}"#) == .restore(peers: ["127.0.0.1:7002"]))
        #expect(decode(#"{"explode":{}}"#) == nil)
    }
}
