import Oscar
import OscarTestKit
import OscarTestSupport
import Testing

@testable import OscarMembership

/// A watcher asks a quiet member again before judging it
/// (`MembershipSettings.heartbeatRetries`): under loss that removes most
/// false suspicions, and a crash is still first detected within the bound
/// docs/SIMULATION.md gives. Driven on the simulator, over seeds.
@Suite(.timeLimit(.minutes(5))) struct HeartbeatRetryTests {
    /// The documented bound on first detection: the victim's last heartbeat
    /// is at most a tick (0.5 s) before the kill; phi reaches 8 about 1.8 s
    /// after it; the verdict comes at the next tick (up to 0.5 s later).
    static let firstDetectionBound = 2.5
    static let defaultRetries = MembershipSettings().heartbeatRetries

    static func simulator(nodes: Int, seed: UInt64, retries: Int, loss: Double = 0) -> ClusterSimulator {
        var settings = ClusterSimulator.Settings(nodes: nodes, seed: seed)
        settings.core.heartbeatRetries = retries
        settings.loss = loss
        return ClusterSimulator(settings: settings)
    }

    static func formed(_ sim: inout ClusterSimulator, _ n: Int) -> Bool {
        sim.run(
            untilTrue: { s in
                (0..<n).allSatisfy { i in
                    s.view(i).current.count == n && s.view(i).current.allSatisfy { $0.status == .up }
                }
            }, limit: 60, step: 0.25) != nil
    }

    /// First detection of a killed member, with and without retries.
    static func firstDetection(seed: UInt64, retries: Int) -> Double? {
        let n = 10
        var sim = simulator(nodes: n, seed: seed, retries: retries)
        guard formed(&sim, n) else { return nil }
        // A victim and a kill time that vary with the seed, so the kill
        // falls anywhere between two ticks.
        sim.run(until: sim.now + Double(seed % 50) / 100)
        let victim = Int(seed % UInt64(n))
        let uid = sim.uid(of: victim)
        sim.kill(victim)
        return SimulationReport.firstDetection(
            in: &sim, of: uid, by: (0..<n).filter { $0 != victim }, limit: 30)
    }

    @Test func retriesKeepFirstDetectionOfACrashWithinTheBound() async throws {
        for seed in UInt64(1)...24 {
            let (a, b) = try await offThePool {
                (
                    Self.firstDetection(seed: seed, retries: Self.defaultRetries),
                    Self.firstDetection(seed: seed, retries: 0)
                )
            }
            guard let a, let b else {
                Issue.record("seed \(seed): no detection")
                continue
            }
            #expect(a <= Self.firstDetectionBound, "seed \(seed): first detection after \(a) s with retries")
            // Not slower: the retries go out a tick before the verdict,
            // which comes at the same tick as without them.
            #expect(a <= b + 0.01, "seed \(seed): \(a) s with retries, \(b) s without")
        }
    }

    /// Unreachable events about live members under loss, summed over nodes.
    static func falseSuspicions(seed: UInt64, retries: Int, loss: Double) -> Int {
        let n = 12
        var sim = simulator(nodes: n, seed: seed, retries: retries)
        guard formed(&sim, n) else { return -1 }
        let start = sim.now
        sim.loss = loss
        sim.run(until: start + 60)
        return (0..<n).reduce(0) { total, i in
            total
                + sim.events[i].filter { e in
                    guard e.time > start, case .unreachable = e.event else { return false }
                    return true
                }.count
        }
    }

    @Test func retriesCutFalseSuspicionsUnderLoss() async throws {
        var with = 0
        var without = 0
        for seed in UInt64(1)...3 {
            with += try await offThePool { Self.falseSuspicions(seed: seed, retries: Self.defaultRetries, loss: 0.15) }
            without += try await offThePool { Self.falseSuspicions(seed: seed, retries: 0, loss: 0.15) }
        }
        #expect(without > 0, "15 % loss raised no false suspicion without retries: the test has no teeth")
        #expect(with * 4 <= without, "with retries \(with), without \(without)")
    }

    @Test func theSimulationReportReplaysFromItsSeed() async throws {
        let a = try await offThePool { SimulationReport.run(nodes: 8, seed: 77, window: 20) }
        let b = try await offThePool { SimulationReport.run(nodes: 8, seed: 77, window: 20) }
        #expect(a.coldStartConvergence == b.coldStartConvergence)
        #expect(a.newMemberUp == b.newMemberUp)
        #expect(a.killFirstDetected == b.killFirstDetected)
        #expect(a.killDetected == b.killDetected)
        #expect(a.killRemoved == b.killRemoved)
        #expect(a.falseSuspicionsPerMinute == b.falseSuspicionsPerMinute)
        #expect(a.falseRemovals == b.falseRemovals)
        #expect(a.kills == b.kills)
        #expect(a.downedUnderLoss == b.downedUnderLoss)
        #expect(a.kills.count == 20)
        #expect(a.killFirstDetected != nil)
    }

    /// Nodes down or stopped after `window` seconds of `loss`.
    static func downedUnderLoss(seed: UInt64, retries: Int, loss: Double, window: Double = 30) -> Int {
        let n = 10
        var sim = simulator(nodes: n, seed: seed, retries: retries)
        guard formed(&sim, n) else { return -1 }
        sim.loss = loss
        sim.run(until: sim.now + window)
        return (0..<n).filter(sim.isDowned).count
    }

    /// Enough false suspicions keep the unreachable set changing past the
    /// unstable limit, and nodes down themselves: without retries, 30 %
    /// loss downs nodes of 10 (and with two retries a tick, 10 % took down
    /// all of 1,000). The default keeps them up.
    @Test func retriesKeepASmallClusterUpUnderHeavyLoss() async throws {
        for seed in UInt64(1)...3 {
            let noRetries = try await offThePool { Self.downedUnderLoss(seed: seed, retries: 0, loss: 0.3) }
            let byDefault = try await offThePool {
                Self.downedUnderLoss(seed: seed, retries: Self.defaultRetries, loss: 0.3)
            }
            #expect(noRetries > 0, "seed \(seed): no teeth")
            #expect(byDefault == 0, "seed \(seed)")
        }
    }

    /// Heavy loss keeps the unreachable set changing past the unstable
    /// limit, and keep-majority then downs every node without removing
    /// anyone: the report must say so, not show "no false removal" alone.
    @Test func theReportCountsNodesThatLossDowned() async throws {
        let calm = try await offThePool {
            SimulationReport.run(nodes: 10, seed: 5, lossRates: [0.05], window: 30, kills: 1)
        }
        #expect(calm.downedUnderLoss[0.05] == 0)
        let heavy = try await offThePool {
            SimulationReport.run(nodes: 10, seed: 5, lossRates: [0.6], window: 30, kills: 1)
        }
        #expect(heavy.falseRemovals[0.6] == 0)
        #expect(heavy.downedUnderLoss[0.6] == 10, "60 % loss on 10 nodes: \(heavy.downedUnderLoss)")
    }
}
