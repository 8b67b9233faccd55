import Foundation
import Testing

@testable import Oscar

/// Downing's safety, searched for counterexamples on the simulator: random
/// fault schedules (symmetric, partial and one-way partitions, partitions
/// that follow partitions, pauses, kills, restarts, leaves, loss) over 3 to
/// 9 nodes, checked every tenth of a virtual second. `oscar simulate
/// --search N` runs the same search, longer.
@Suite(.timeLimit(.minutes(5))) struct SplitBrainSearchTests {
    /// Fewer schedules under AddressSanitizer, which runs the suite again
    /// several times slower.
    static let scale = ProcessInfo.processInfo.environment["OSCAR_SANITIZER_RUN"] == nil ? 1 : 4

    static func failures(_ outcomes: [SplitBrainSearch.Outcome]) -> String {
        outcomes.filter { $0.violation != nil }.map { o in
            "seed \(o.seed), \(o.nodes) nodes: \(o.violation!)\n\(o.minimal ?? o.schedule)"
        }.joined(separator: "\n")
    }

    @Test func randomSchedulesOnFiveNodesBreakNoProperty() {
        let outcomes = SplitBrainSearch().search(seeds: 1...UInt64(200 / Self.scale), nodes: { _ in 5 })
        #expect(outcomes.count == 200 / Self.scale)
        #expect(outcomes.allSatisfy { $0.violation == nil }, "\(Self.failures(outcomes))")
        // The schedules did make the cluster decide: members were downed.
        #expect(outcomes.map(\.downed).reduce(0, +) > outcomes.count)
    }

    @Test func randomSchedulesOnThreeToNineNodesBreakNoProperty() {
        let outcomes = SplitBrainSearch().search(
            seeds: 50_001...UInt64(50_000 + 140 / Self.scale), nodes: { 3 + Int($0 % 7) })
        #expect(outcomes.allSatisfy { $0.violation == nil }, "\(Self.failures(outcomes))")
        #expect(Set(outcomes.map(\.nodes)) == Set(3...9))
    }

    /// The checker has teeth: with no removal margin, a downed side's
    /// singleton still runs when its successor starts, and the search finds
    /// it, shrinks the schedule and reports it.
    @Test func theSearchFindsTheSecondSingletonThatNoRemovalMarginAllows() throws {
        var search = SplitBrainSearch()
        search.settings.removalMargin = 0
        let outcomes = search.search(seeds: 1...UInt64(60 / Self.scale), nodes: { _ in 5 })
        let found = try #require(outcomes.first { $0.violation?.property == .twoSingletons })
        let minimal = try #require(found.minimal)
        #expect(minimal.steps.count <= found.schedule.steps.count)
        // The minimal schedule still fails the same way, and replays exactly.
        let again = search.run(minimal, nodes: found.nodes, seed: found.seed).0
        #expect(again?.property == .twoSingletons)
        #expect(search.run(minimal, nodes: found.nodes, seed: found.seed).0 == again)
        let story = search.trace(minimal, nodes: found.nodes, seed: found.seed)
        #expect(story.last?.contains("two singletons") == true)
    }

    /// `oscar chaos --nodes 5 --duration 60s --seed 23` split the cluster in
    /// two and then lost four of five nodes. Its plan, replayed on the
    /// simulator under many network seeds, keeps one cluster.
    @Test func chaosSeedTwentyThreesPlanKeepsOneClusterOnTheSimulator() {
        let plan = NemesisPlan(
            seed: 23, nodes: 5, duration: .seconds(60), faults: [.kill, .pause, .partition, .delay, .loss],
            protected: [3, 4])
        let schedule = FaultSchedule(plan: plan)
        #expect(
            schedule.steps.contains { step in
                if case .partition(let groups) = step.fault { groups.contains([1]) } else { false }
            }, "the plan cuts node 1 (7106) off on its own")
        for seed in UInt64(1)...UInt64(40 / Self.scale) {
            let (violation, _) = SplitBrainSearch().run(schedule, nodes: 5, seed: seed)
            #expect(violation == nil, "network seed \(seed): \(violation!)")
        }
    }

    @Test func aScheduleIsTheSameForTheSameSeedAndReadsAsALine() {
        let a = FaultSchedule.random(nodes: 5, seed: 7)
        #expect(a == FaultSchedule.random(nodes: 5, seed: 7))
        #expect(a != FaultSchedule.random(nodes: 5, seed: 8))
        #expect(a.steps.last?.fault == .heal)
        #expect(a.description.split(separator: "\n").count == a.steps.count)
        #expect(FaultSchedule.Fault.isolate(1, from: [0, 2]).description == "isolate 1 from [0, 2] (both ways)")
    }
}
