/// An ask as the history tells it: its invocation and every outcome recorded
/// for it, matched by the asking process (node and uid) and the ask's number
/// in that process. The checker judges these and the report's plots draw
/// them, so both read the history through this one matching.
package struct ChaosAsk: Sendable, Equatable {
    package var invoke: ChaosEvent
    /// In time order: more than one is a bug the checker reports.
    package var outcomes: [ChaosEvent]

    /// How an ask ended, as the report counts it.
    package enum Outcome: String, Sendable, CaseIterable {
        case ok, failed
        /// It may have happened: no reply in time, or its node became
        /// unreachable (recorded as `timeout`).
        case unknown
        /// No outcome in the history: the run ended, or the asking process
        /// died, before the ask did.
        case open
    }

    package var outcome: Outcome {
        switch outcomes.first?.kind {
        case .ok: .ok
        case .fail: .failed
        case .timeout: .unknown
        default: .open
        }
    }

    /// The target's kind: `echo`, `pool`, `singleton`, `virtual`.
    package var kind: String { Self.kind(of: invoke.target) }

    /// From the invocation to the first outcome; nil while open.
    package var latency: UInt64? { outcomes.first.map { $0.t &- invoke.t } }

    /// `echo@host:port` is an `echo` ask; `pool` a `pool` one.
    package static func kind(of target: String?) -> String {
        guard let target else { return "?" }
        return String(target.split(separator: "@").first ?? "?")
    }

    /// Every ask invoked in `history`, in order of invocation. Outcomes
    /// without an invocation (cut off by a kill, say) are left out.
    package static func all(in history: [ChaosEvent]) -> [ChaosAsk] {
        struct Key: Hashable {
            var node: String
            var uid: UInt64
            var op: Int
        }
        var invoked: [Key: ChaosEvent] = [:]
        var outcomes: [Key: [ChaosEvent]] = [:]
        for e in history.sorted(by: { $0.t < $1.t }) {
            guard let op = e.op, let uid = e.uid else { continue }
            let key = Key(node: e.node, uid: uid, op: op)
            switch e.kind {
            case .invoke: invoked[key] = e
            case .ok, .fail, .timeout: outcomes[key, default: []].append(e)
            default: break
            }
        }
        return invoked.map { key, invoke in ChaosAsk(invoke: invoke, outcomes: outcomes[key] ?? []) }
            .sorted { a, b in
                (a.invoke.t, a.invoke.node, a.invoke.uid ?? 0, a.invoke.op ?? 0)
                    < (b.invoke.t, b.invoke.node, b.invoke.uid ?? 0, b.invoke.op ?? 0)
            }
    }
}
