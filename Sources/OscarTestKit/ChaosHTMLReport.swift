extension ChaosReport {
    /// One kind of ask's two plots, and the file names they are written to.
    package struct KindPlots: Sendable {
        package var kind: String
        package var latency: String
        package var rate: String
        /// The kind made safe for a file name: `latency-<stem>.svg`.
        package var stem: String
        package var latencyFile: String { "latency-\(stem).svg" }
        package var rateFile: String { "rate-\(stem).svg" }
    }

    /// The latency and rate plots of every kind of ask in the history, by
    /// kind. Kinds come from the history (whatever the workload asked), so
    /// each is reduced to letters, digits, `-` and `_` for its file names,
    /// and made unique should two reduce to the same.
    package static func kindPlots(_ history: [ChaosEvent]) -> [KindPlots] {
        let kinds = Set(ChaosAsk.all(in: history).map(\.kind)).sorted()
        var stems: Set<String> = []
        return kinds.map { kind in
            let safe = String(
                kind.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") ? $0 : "_" })
            var stem = safe.isEmpty ? "unknown" : safe
            var n = 2
            while stems.contains(stem) {
                stem = "\(safe)-\(n)"
                n += 1
            }
            stems.insert(stem)
            return KindPlots(
                kind: kind, latency: latencyPlot(history, kind: kind), rate: ratePlot(history, kind: kind),
                stem: stem)
        }
    }

    /// The page a person opens after a run: the verdict, the checks with
    /// their findings, the text report, the timeline and each kind's plots,
    /// all in one file (the pictures inline, no outside style or script),
    /// so it can be mailed or attached to an issue as it is.
    package static func html(
        title: String, verdict: ChaosChecker.Verdict, summary: String, timeline: String, plots: [KindPlots]
    ) -> String {
        let shownFindings = 50
        var rows: [String] = []
        for check in verdict.checks {
            var findings = check.findings.prefix(shownFindings).map { "<li>\($0.xmlEscaped)</li>" }
            if check.findings.count > shownFindings {
                findings.append("<li>… and \(check.findings.count - shownFindings) more</li>")
            }
            rows.append(
                "<tr class=\"\(check.passed ? "ok" : "fail")\"><td>\(check.passed ? "ok" : "FAIL")</td><td>\(check.name.xmlEscaped)</td><td>"
                    + (findings.isEmpty ? "" : "<ul>\(findings.joined())</ul>") + "</td></tr>")
        }
        var sections = [
            "<h2>Membership timeline</h2>",
            "<p>One row per node: what it saw of the cluster. Shaded: network faults.</p>",
            "<figure>\(timeline)</figure>",
        ]
        for plot in plots {
            sections += [
                "<h2>\(plot.kind.xmlEscaped) asks</h2>",
                "<figure>\(plot.latency)</figure>",
                "<figure>\(plot.rate)</figure>",
            ]
        }
        return """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <title>\(title.xmlEscaped)</title>
            <style>
            body { font-family: sans-serif; margin: 1.5em; color: #222; }
            .verdict { font-size: 1.4em; font-weight: bold; }
            .verdict.pass, tr.ok td:first-child { color: \(Colour.healthy); }
            .verdict.fail, tr.fail td:first-child { color: \(Colour.down); }
            table { border-collapse: collapse; }
            td, th { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
            td ul { margin: 0; padding-left: 1.2em; font-family: monospace; }
            pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
            figure { margin: 1em 0; }
            svg { max-width: 100%; height: auto; }
            </style>
            </head>
            <body>
            <h1>\(title.xmlEscaped)</h1>
            <p class="verdict \(verdict.passed ? "pass" : "fail")">\(verdict.passed ? "PASS" : "FAIL")</p>
            <h2>Checks</h2>
            <table>
            <tr><th></th><th>check</th><th>findings</th></tr>
            \(rows.joined(separator: "\n"))
            </table>
            <h2>Report</h2>
            <pre>\(summary.xmlEscaped)</pre>
            \(sections.joined(separator: "\n"))
            </body>
            </html>

            """
    }
}
