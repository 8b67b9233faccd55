import Glibc

extension ChaosReport {
    /// Every ask of one kind (`echo`, `pool`, …) as a point: when it was
    /// sent (x, seconds since the run began) against how long it took (y,
    /// log scale), coloured by outcome, over the fault windows. The table
    /// says how many asks failed; this says when, and how slowly the rest
    /// answered meanwhile, which is what a fault does to a caller.
    ///
    /// Asks without an outcome are drawn as grey rings at their age when
    /// the history or their asking process ended (a kill): they took at
    /// least that long, and no longer could be seen. The dashed line is the
    /// asks' timeout, where the ones that timed out gather.
    static func latencyPlot(_ history: [ChaosEvent], kind: String) -> String {
        let events = history.sorted { $0.t < $1.t }
        guard let axis = TimeAxis(events) else { return emptyPicture("empty history") }
        let asks = ChaosAsk.all(in: events).filter { $0.kind == kind }
        let frame = PlotFrame(events, axis: axis, plotHeight: 240)
        let ends = events.filter { $0.kind == .kill || $0.kind == .exit }
        func milliseconds(_ ask: ChaosAsk) -> Double {
            let end =
                ask.latency.map { ask.invoke.t + $0 }
                ?? ends.first { $0.node == ask.invoke.node && $0.t > ask.invoke.t }?.t ?? axis.last
            return Double(end - ask.invoke.t) / 1e6
        }
        let timeouts = Set(asks.compactMap(\.invoke.value)).sorted()
        let scale = LogScale(
            values: asks.map(milliseconds) + timeouts.map(Double.init), from: frame.bottom, to: frame.top)
        var data: [String] = []
        for timeout in timeouts {
            let y = scale.y(Double(timeout))
            data.append(
                "<line class=\"timeout\" x1=\"\(frame.left.r)\" y1=\"\(y.r)\" x2=\"\(frame.right.r)\" y2=\"\(y.r)\" stroke=\"\(Colour.ink)\" stroke-dasharray=\"4 3\"/>"
            )
        }
        // The common outcome first, so the rare ones are drawn on top.
        var counts: [ChaosAsk.Outcome: Int] = [:]
        for outcome in [ChaosAsk.Outcome.ok, .unknown, .failed, .open] {
            for ask in asks where ask.outcome == outcome {
                counts[outcome, default: 0] += 1
                let (x, y) = (axis.x(ask.invoke.t), scale.y(milliseconds(ask)))
                data.append(
                    outcome == .open
                        ? "<circle class=\"open-point\" cx=\"\(x.r)\" cy=\"\(y.r)\" r=\"3\" fill=\"none\" stroke=\"\(Colour.off)\" stroke-width=\"1.2\"/>"
                        : "<circle class=\"point \(outcome)\" cx=\"\(x.r)\" cy=\"\(y.r)\" r=\"2\" fill=\"\(colour(of: outcome))\" fill-opacity=\"0.65\"/>"
                )
            }
        }
        var legend: [(Swatch, String)] = [ChaosAsk.Outcome.ok, .failed, .unknown].map { outcome in
            (.dot(colour(of: outcome)), "\(outcome.rawValue) (\(counts[outcome] ?? 0))")
        }
        if let open = counts[.open] {
            legend.append((.ring(Colour.off), "no outcome, at their age when the run or their process ended (\(open))"))
        }
        if !timeouts.isEmpty {
            legend.append((.dashed(Colour.ink), "timeout (\(timeouts.map { "\($0) ms" }.joined(separator: ", ")))"))
        }
        if !frame.band.windows.isEmpty { legend.append((.block(Colour.fault, opacity: 0.12), "network fault")) }
        return frame.picture(
            title: "\(kind) asks: latency by the time each was sent (\(asks.count) asks)",
            caption: ["latency", "(log scale)"], ticks: scale.ticks, data: data, legend: legend)
    }

    /// The colour of an outcome in every plot: the timeline's colours for
    /// healthy, degraded and down, and grey for not known.
    static func colour(of outcome: ChaosAsk.Outcome) -> String {
        switch outcome {
        case .ok: Colour.healthy
        case .failed: Colour.down
        case .unknown: Colour.degraded
        case .open: Colour.off
        }
    }

    /// Milliseconds on a logarithmic axis from `from` (the smallest decade)
    /// to `to` (the largest), whole decades that hold every value: a
    /// sub-millisecond reply and a 2 s timeout are both readable.
    struct LogScale {
        let low: Double
        let high: Double
        let from: Double
        let to: Double

        init(values: [Double], from: Double, to: Double) {
            let floor = 0.01  // 10 µs: shorter is drawn there
            let smallest = max(values.min() ?? 1, floor)
            let largest = max(values.max() ?? 1, smallest)
            var low = 1.0
            while low > smallest { low /= 10 }
            while low * 10 <= smallest { low *= 10 }
            var high = low * 10
            while high < largest { high *= 10 }
            (self.low, self.high, self.from, self.to) = (low, high, from, to)
        }

        func y(_ ms: Double) -> Double {
            let v = min(max(ms, low), high)
            return from + (to - from) * (log10(v) - log10(low)) / (log10(high) - log10(low))
        }

        /// One tick a decade.
        var ticks: [(y: Double, label: String)] {
            var ticks: [(y: Double, label: String)] = []
            var decade = low
            while decade <= high * 1.001 {
                ticks.append((y(decade), Self.label(decade)))
                decade *= 10
            }
            return ticks
        }

        /// `0.1 ms`, `10 ms`, `1 s`.
        static func label(_ ms: Double) -> String {
            if ms >= 1000 { return "\(Int((ms / 1000).rounded())) s" }
            if ms >= 1 { return "\(Int(ms.rounded())) ms" }
            return "\(ms) ms"
        }
    }
}
