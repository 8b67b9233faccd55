extension ChaosReport {
    /// The asks of one kind that ended in each second of the run, one line
    /// per outcome, over the fault windows: a fault shows as the ok line
    /// dropping and the failed or timed-out line rising, and recovery as the
    /// ok line coming back.
    static func ratePlot(_ history: [ChaosEvent], kind: String) -> String {
        let events = history.sorted { $0.t < $1.t }
        guard let axis = TimeAxis(events) else { return emptyPicture("empty history") }
        let asks = ChaosAsk.all(in: events).filter { $0.kind == kind }
        let buckets = rateBuckets(asks, axis: axis)
        let frame = PlotFrame(events, axis: axis, plotHeight: 180)
        let peak = Double(buckets.values.flatMap { $0 }.max() ?? 0)
        let step = max(1, niceStep(maximum: peak, count: 4))
        let top = max(step, (peak / step).rounded(.up) * step)
        func y(_ count: Int) -> Double { frame.bottom - (frame.bottom - frame.top) * Double(count) / top }
        var ticks: [(y: Double, label: String)] = []
        var value = 0.0
        while value <= top {
            ticks.append((y(Int(value)), "\(Int(value))/s"))
            value += step
        }
        var data: [String] = []
        var legend: [(Swatch, String)] = []
        for outcome in [ChaosAsk.Outcome.ok, .failed, .unknown] {
            let counts = buckets[outcome] ?? []
            legend.append((.line(colour(of: outcome)), "\(outcome.rawValue) (\(counts.reduce(0, +)))"))
            guard counts.contains(where: { $0 > 0 }) else { continue }
            // Each second's count at the middle of its second (the last
            // one, shorter, at the middle of what is left of it).
            let points = counts.enumerated().map { second, count in
                let middle = min(axis.first + UInt64(second) * 1_000_000_000 + 500_000_000, axis.last)
                return "\(axis.x(middle).r),\(y(count).r)"
            }
            data.append(
                "<polyline class=\"rate \(outcome)\" points=\"\(points.joined(separator: " "))\" fill=\"none\" stroke=\"\(colour(of: outcome))\" stroke-width=\"1.5\" stroke-linejoin=\"round\"/>"
            )
        }
        if !frame.band.windows.isEmpty { legend.append((.block(Colour.fault, opacity: 0.12), "network fault")) }
        return frame.picture(
            title: "\(kind) asks: ended per second, by outcome", caption: ["asks ended", "per second"],
            ticks: ticks, data: data, legend: legend)
    }

    /// For each outcome, how many asks ended in each second from the run's
    /// start (the last bucket may be shorter). Open asks never ended, so
    /// they are in no bucket.
    static func rateBuckets(_ asks: [ChaosAsk], axis: TimeAxis) -> [ChaosAsk.Outcome: [Int]] {
        let seconds = Int((axis.last - axis.first + 999_999_999) / 1_000_000_000)
        var buckets: [ChaosAsk.Outcome: [Int]] = [:]
        for outcome in [ChaosAsk.Outcome.ok, .failed, .unknown] {
            buckets[outcome] = Array(repeating: 0, count: seconds)
        }
        for ask in asks {
            guard ask.outcome != .open, let end = ask.outcomes.first?.t else { continue }
            let second = min(Int((max(end, axis.first) - axis.first) / 1_000_000_000), seconds - 1)
            buckets[ask.outcome]![second] += 1
        }
        return buckets
    }
}
