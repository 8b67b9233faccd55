import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime

/// Reads a chaos run's merged history and decides whether the cluster kept
/// its promises. Pure: the report and the doctored-history tests call it
/// the same way.
public struct ChaosChecker: Sendable {
    public struct Settings: Sendable {
        /// An ask may end this long after its timeout (loop timers, a busy
        /// machine) before it counts as hung.
        public var askGrace = Duration.seconds(1)
        /// After heal, the live nodes must agree on membership within this.
        public var convergenceBound = Duration.seconds(30)
        /// No node process may grow past this resident size.
        public var rssLimit = 256 * 1024 * 1024
        /// Membership counts as stable this long after the last change (a
        /// view change, a fault, a heal, a process starting or ending).
        public var settle = Duration.seconds(5)
        /// The run's nodes run the built-in workload (`oscar node`), whose
        /// reliable stream and virtual actors are checked too; false for an
        /// application's nodes (`oscar chaos --exec`), which have neither.
        public var builtInWorkload = true
        public init() {}
    }

    /// One checker's verdict; `findings` point at the operations concerned.
    public struct Check: Sendable, Equatable, Codable {
        public var name: String
        public var findings: [String]
        public var passed: Bool { findings.isEmpty }

        public init(name: String, findings: [String]) {
            self.name = name
            self.findings = findings
        }
    }

    /// Counts for the report.
    public struct Tally: Sendable, Equatable {
        /// Per target kind (echo, pool, singleton): ok, failed, timed out,
        /// indeterminate (the asking process died before the outcome).
        public var asks: [String: [Int]] = [:]
        public var streamSent: UInt64 = 0
        public var streamAcknowledged: UInt64 = 0
        public var streamProcessed = 0
        public var lost = 0
        public var duplicated = 0
        /// Messages processed again by a restarted consumer before their
        /// acknowledgement reached the producer (allowed: at least once).
        public var redelivered = 0
        /// Streams seen: a restarted producer starts a new one.
        public var streams = 0
        public var faults: [String: Int] = [:]
        public var convergenceMillis: Int?
        public var peakRSS: [String: Int] = [:]
    }

    public struct Verdict: Sendable {
        public var checks: [Check]
        public var tally: Tally
        public var passed: Bool { checks.allSatisfy(\.passed) }
    }

    public var settings: Settings
    /// The application's own checks (`oscar chaos --exec`), run after the
    /// generic ones over the same history.
    public var applicationChecks: (@Sendable ([ChaosEvent]) -> [Check])?

    public init(settings: Settings = Settings()) { self.settings = settings }

    public func check(_ history: [ChaosEvent]) -> Verdict {
        let events = history.sorted { $0.t < $1.t }
        let clock = Timeline(events)
        var tally = Tally()
        for e in events where [.fault, .kill, .pause, .stop].contains(e.kind) {
            tally.faults[faultName(e), default: 0] += 1
        }
        let builtIn = settings.builtInWorkload
        let checks = [
            asks(events, clock, &tally),
            builtIn ? stream(events, clock, &tally) : nil,
            convergence(events, &tally),
            singletons(events, clock),
            builtIn ? virtualActivations(events, clock) : nil,
            splitBrain(events, clock),
            crashes(events, clock),
            memory(events, &tally),
        ].compactMap { $0 }
        return Verdict(checks: checks + (applicationChecks?(events) ?? []), tally: tally)
    }

    private func faultName(_ e: ChaosEvent) -> String {
        switch e.kind {
        case .fault: String(e.detail?.split(separator: " ").first ?? "fault")
        case .stop: "restart"
        default: e.kind.rawValue
        }
    }

    /// Times relative to the first event, for messages a person reads.
    struct Timeline {
        package let origin: UInt64
        init(_ events: [ChaosEvent]) { origin = events.first?.t ?? 0 }
        package func at(_ t: UInt64) -> String { seconds(t &- origin) }

        /// A span in seconds with one decimal, such as `12.3 s`.
        package func seconds(_ span: UInt64) -> String {
            let ms = Int64(bitPattern: span) / 1_000_000
            return "\(ms / 1000).\(String(ms % 1000 / 100)) s"
        }
    }

    // MARK: - Asks

    private func asks(_ events: [ChaosEvent], _ clock: Timeline, _ tally: inout Tally) -> Check {
        // When each node process stopped: its kill or exit, as the runner saw it.
        let ends = events.filter { $0.kind == .kill || $0.kind == .exit }
        // A paused process cannot fire its timers: its pauses extend its asks' due times.
        var pauses: [String: [(from: UInt64, to: UInt64)]] = [:]
        var pausedSince: [String: UInt64] = [:]
        for e in events {
            if e.kind == .pause { pausedSince[e.node] = e.t }
            if e.kind == .resume || e.kind == .kill || e.kind == .exit,
                let since = pausedSince.removeValue(forKey: e.node)
            {
                pauses[e.node, default: []].append((since, e.t))
            }
        }
        func pausedTime(_ node: String, from: UInt64, to: UInt64) -> UInt64 {
            (pauses[node] ?? []).reduce(0) { sum, p in sum + (max(from, min(to, p.to)) - max(from, min(to, p.from))) }
        }
        let grace = UInt64(settings.askGrace.nanoseconds)
        var findings: [String] = []
        for ask in ChaosAsk.all(in: events) {
            let (invoke, results) = (ask.invoke, ask.outcomes)
            var row = tally.asks[ask.kind] ?? [0, 0, 0, 0]
            defer { tally.asks[ask.kind] = row }
            let name =
                "ask \(invoke.node)#\(invoke.op ?? 0) to \(invoke.target ?? "?") (invoked at \(clock.at(invoke.t)))"
            let timeout = UInt64(invoke.value ?? 0) * 1_000_000
            var due = invoke.t + timeout + grace
            due += pausedTime(invoke.node, from: invoke.t, to: results.first?.t ?? UInt64.max)
            guard let first = results.first else {
                let died = ends.first { $0.node == invoke.node && $0.t > invoke.t }
                if let died, died.t < due {
                    row[3] += 1  // its process ended before the ask could end: indeterminate
                } else {
                    findings.append("\(name) has no outcome; its timeout was \(invoke.value ?? 0) ms")
                }
                continue
            }
            switch first.kind {
            case .ok: row[0] += 1
            case .fail: row[1] += 1
            default: row[2] += 1
            }
            if results.count > 1 {
                findings.append("\(name) has \(results.count) outcomes: \(results.map(\.kind.rawValue))")
            }
            if first.t > due {
                let late = Double((first.t - invoke.t) / 1_000_000) / 1000
                findings.append(
                    "\(name) hung: its outcome came after \(late) s, past its \(invoke.value ?? 0) ms timeout")
            }
        }
        return Check(name: "every ask has exactly one outcome, within its timeout", findings: findings)
    }

    // MARK: - Reliable stream

    /// The stream's promise (`ReliableDelivery`): within one stream (one
    /// producer incarnation) every acknowledged message is processed; each
    /// consumer incarnation processes in order without gaps, and never a
    /// message twice; a message is processed again only by a new consumer
    /// process, and only if it was not yet acknowledged then. A restarted
    /// producer starts a new stream at 1, which is not a duplicate.
    private func stream(_ events: [ChaosEvent], _ clock: Timeline, _ tally: inout Tally) -> Check {
        var findings: [String] = []
        struct Stream {
            var acknowledged: (seq: UInt64, t: UInt64) = (0, 0)
            var sent: UInt64 = 0
            /// Per message: when, and by which consumer process.
            var processed: [UInt64: [(t: UInt64, consumer: UInt64)]] = [:]
            /// Per consumer process: the last message it processed.
            var last: [UInt64: (seq: UInt64, t: UInt64)] = [:]
        }
        var streams: [UInt64: Stream] = [:]
        var order: [UInt64] = []
        for e in events {
            guard let seq = e.seq, [.streamSend, .streamAck, .streamProcess].contains(e.kind) else { continue }
            let id = e.stream ?? 0
            if streams[id] == nil { order.append(id) }
            var s = streams[id] ?? Stream()
            defer { streams[id] = s }
            switch e.kind {
            case .streamSend: s.sent = max(s.sent, seq)
            case .streamAck where seq > s.acknowledged.seq: s.acknowledged = (seq, e.t)
            case .streamProcess:
                let consumer = e.uid ?? 0
                tally.streamProcessed += 1
                if let earlier = s.processed[seq]?.last {
                    if earlier.consumer == consumer {
                        findings.append(
                            "stream message \(seq) was processed twice by one consumer, at \(clock.at(earlier.t)) and \(clock.at(e.t)): duplicated"
                        )
                        tally.duplicated += 1
                    } else if s.acknowledged.seq >= seq {
                        findings.append(
                            "stream message \(seq) was processed again at \(clock.at(e.t)), after it was acknowledged (by \(clock.at(s.acknowledged.t))): duplicated"
                        )
                        tally.duplicated += 1
                    } else {
                        tally.redelivered += 1  // at least once across a consumer restart
                    }
                }
                if let last = s.last[consumer], seq != last.seq + 1 {
                    findings.append(
                        "stream message \(seq) was processed at \(clock.at(e.t)) right after message \(last.seq) (at \(clock.at(last.t))) by the same consumer: "
                            + (seq <= last.seq ? "out of order" : "a gap")
                    )
                }
                s.last[consumer] = (seq, e.t)
                s.processed[seq, default: []].append((e.t, consumer))
            default: break
            }
        }
        tally.streams = order.count
        for id in order {
            guard let s = streams[id] else { continue }
            tally.streamSent += s.sent
            tally.streamAcknowledged += s.acknowledged.seq
            guard s.acknowledged.seq > 0 else { continue }
            for seq in 1...s.acknowledged.seq where s.processed[seq] == nil {
                tally.lost += 1
                findings.append(
                    "stream message \(seq) was acknowledged (by \(clock.at(s.acknowledged.t))) but never processed: lost"
                )
            }
        }
        return Check(
            name: "stream: acknowledged messages processed, in order, again only after a consumer restart",
            findings: findings)
    }

    // MARK: - Convergence

    /// The last line must be a convergence (after the final heal); every
    /// convergence measured, after any heal, must be within the bound.
    private func convergence(_ events: [ChaosEvent], _ tally: inout Tally) -> Check {
        let name = "membership converges after heal"
        let measured = events.filter { $0.kind == .converged }
        guard let last = measured.last else {
            return Check(name: name, findings: ["no convergence was recorded after heal"])
        }
        var findings: [String] = []
        if last.value == nil {
            findings.append("the live nodes did not agree on membership: \(last.detail ?? "no detail")")
        }
        let bound = Int(settings.convergenceBound.nanoseconds / 1_000_000)
        for ms in measured.compactMap(\.value) where ms > bound {
            findings.append("the live nodes took \(ms) ms to agree after a heal, past the \(bound) ms bound")
        }
        tally.convergenceMillis = measured.compactMap(\.value).max()
        return Check(name: name, findings: findings)
    }

    // MARK: - Singletons

    private func singletons(_ events: [ChaosEvent], _ clock: Timeline) -> Check {
        struct Active {
            var node: String
            var uid: UInt64
            var since: UInt64
            /// The singleton's name (nil: the built-in workload's ledger).
            var name: String?
        }
        var active: [Active] = []
        var findings: [String] = []
        for e in events {
            switch e.kind {
            case .singletonStart:
                if let other = active.first(where: { $0.name == e.target && ($0.node != e.node || $0.uid != e.uid) }) {
                    findings.append(
                        "two singletons\(e.target.map { " \($0)" } ?? ""): one started on \(e.node) at \(clock.at(e.t)) while the one on \(other.node) (since \(clock.at(other.since))) was still active"
                    )
                }
                active.append(Active(node: e.node, uid: e.uid ?? 0, since: e.t, name: e.target))
            case .singletonStop:
                active.removeAll { $0.node == e.node && $0.uid == e.uid && $0.name == e.target }
            case .kill, .exit:
                active.removeAll { $0.node == e.node }  // its process is gone, and its instance with it
            default: break
            }
        }
        return Check(name: "never two singletons active at once", findings: findings)
    }

    // MARK: - Virtual actors

    /// At most one activation per virtual identity while membership is
    /// stable: every live node sees every member up and reachable, and
    /// nothing changed for `settle`. Outside that (a partition, a node being
    /// detected and downed) two activations of one key may overlap: each
    /// side places keys by its own view.
    private func virtualActivations(_ events: [ChaosEvent], _ clock: Timeline) -> Check {
        struct Active {
            var node: String
            var uid: UInt64
            var since: UInt64
        }
        let changes: Set<ChaosEvent.Kind> = [
            .view, .fault, .heal, .kill, .start, .stop, .exit, .pause, .resume, .removed, .nodeStart,
        ]
        let settle = UInt64(settings.settle.nanoseconds)
        // Views are sampled every 200 ms, and a sample waits for the
        // membership actor (up to 1 s): an activation younger than this may
        // answer a change (a member unreachable for a moment) that no view
        // has recorded yet, so it is judged only once it is this old.
        let viewLag = UInt64(Duration.seconds(2).nanoseconds)
        var lastChange: UInt64 = 0
        var active: [String: [Active]] = [:]
        var reported: Set<String> = []
        var findings: [String] = []
        // Nodes whose latest view has a member that is not up, or unreachable.
        var unsettled: Set<String> = []
        for e in events {
            if e.t > lastChange + settle, unsettled.isEmpty {
                for (key, list) in active
                where list.count > 1 && !reported.contains(key) && list.allSatisfy({ $0.since + viewLag <= e.t }) {
                    reported.insert(key)
                    let sides = list.map { "on \($0.node) (since \(clock.at($0.since)))" }.joined(separator: " and ")
                    findings.append(
                        "two activations of virtual \(key) while membership was stable: \(sides), both still active at \(clock.at(e.t)), \(clock.seconds(e.t - lastChange)) after the last membership change"
                    )
                }
            }
            if changes.contains(e.kind) { lastChange = e.t }
            switch e.kind {
            case .view:
                if e.view.allSatisfy(\.isUpAndReachable) {
                    unsettled.remove(e.node)
                } else {
                    unsettled.insert(e.node)
                }
            case .removed:
                unsettled.remove(e.node)
            case .activationStart:
                guard let key = e.target else { continue }
                active[key, default: []].append(Active(node: e.node, uid: e.uid ?? 0, since: e.t))
            case .activationStop:
                guard let key = e.target else { continue }
                if let i = active[key]?.firstIndex(where: { $0.node == e.node && $0.uid == (e.uid ?? 0) }) {
                    active[key]?.remove(at: i)
                }
            case .kill, .exit:
                for key in active.keys { active[key]?.removeAll { $0.node == e.node } }
                unsettled.remove(e.node)
            default: break
            }
        }
        return Check(name: "one activation per virtual identity while membership is stable", findings: findings)
    }

    // MARK: - Split brain

    /// Two live processes that are each up in their own view, and each have
    /// dropped the other from it: two clusters.
    private func splitBrain(_ events: [ChaosEvent], _ clock: Timeline) -> Check {
        var views: [String: Set<String>] = [:]  // node → members it counts (not down or removed)
        var selfUp: Set<String> = []
        var findings: [String] = []
        var reported: Set<[String]> = []
        for e in events {
            switch e.kind {
            case .view:
                var members: Set<String> = []
                var up = false
                for entry in e.view {
                    if entry.status != "down" && entry.status != "removed" { members.insert(entry.node) }
                    if entry.node == e.node, entry.status == "up" { up = true }
                }
                views[e.node] = members
                if up { selfUp.insert(e.node) } else { selfUp.remove(e.node) }
                for other in selfUp where other != e.node && up {
                    guard let theirs = views[other], !members.contains(other), !theirs.contains(e.node) else {
                        continue
                    }
                    let pair = [e.node, other].sorted()
                    if reported.insert(pair).inserted {
                        findings.append(
                            "split brain at \(clock.at(e.t)): \(e.node) sees {\(members.sorted().joined(separator: ", "))} and \(other) sees {\(theirs.sorted().joined(separator: ", "))}; both are up without the other"
                        )
                    }
                }
            case .kill, .exit, .removed:
                views[e.node] = nil
                selfUp.remove(e.node)
            default: break
            }
        }
        return Check(name: "no split brain", findings: findings)
    }

    // MARK: - Crashes and memory

    private func crashes(_ events: [ChaosEvent], _ clock: Timeline) -> Check {
        var killed: Set<Int32> = []
        var findings: [String] = []
        for e in events {
            switch e.kind {
            case .kill: if let pid = e.pid { killed.insert(pid) }
            case .exit:
                let byNemesis = e.pid.map(killed.contains) ?? false
                if e.value == 0 || (byNemesis && e.detail == "signal 9") { continue }
                let how = e.value.map { "exited with code \($0)" } ?? "died of \(e.detail ?? "an unknown cause")"
                findings.append("node \(e.node) (pid \(e.pid ?? 0)) \(how) at \(clock.at(e.t)) without being killed")
            default: break
            }
        }
        return Check(name: "no node crashed except those the nemesis killed", findings: findings)
    }

    private func memory(_ events: [ChaosEvent], _ tally: inout Tally) -> Check {
        var findings: [String] = []
        for e in events where e.kind == .rss {
            guard let bytes = e.value else { continue }
            let key = "\(e.node) (pid \(e.pid ?? 0))"
            tally.peakRSS[key] = max(tally.peakRSS[key] ?? 0, bytes)
            if bytes > settings.rssLimit {
                findings.append(
                    "node \(key) peaked at \(bytes / 1_048_576) MiB resident, past \(settings.rssLimit / 1_048_576) MiB"
                )
            }
        }
        return Check(name: "peak RSS per node stays bounded", findings: findings)
    }
}
