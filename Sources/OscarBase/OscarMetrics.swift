/// The counters a cluster node keeps (the same figures its `/metrics` page
/// shows), pushed to a handler an application installs as they change
/// (`ClusterNode.Settings.metrics`). Shaped like swift-metrics'
/// `CounterHandler`, so an application that uses swift-metrics bridges it in
/// a few lines:
///
/// ```swift
/// struct SwiftMetricsBridge: OscarMetrics.Handler {
///     let counters = Dictionary(uniqueKeysWithValues: OscarMetrics.Counter.allCases.map {
///         ($0, Metrics.Counter(label: "oscar_\($0)"))
///     })
///     func add(_ delta: Int, to counter: OscarMetrics.Counter) {
///         if delta > 0 { counters[counter]?.increment(by: delta) }
///     }
/// }
/// ```
///
/// Without a handler nothing is pushed: counting costs one atomic add, as
/// before.
public enum OscarMetrics {
    public enum Counter: String, Sendable, CaseIterable, Hashable {
        case framesIn, framesOut
        /// Asks waiting for a reply from another node: it goes down as well
        /// as up (a gauge).
        case asksPending
        case gossipRounds
        /// Handshakes that failed on a wrong MAC: someone without the secret.
        case authenticationFailures
        /// Connections closed on arrival because a limit was reached.
        case connectionsRefused
        /// Connections closed because the peer stopped reading.
        case peersCutOff
        /// Connections refused over TLS: a failed TLS handshake, a refused
        /// certificate, a certificate that does not name the peer's host, or
        /// a plaintext peer of a node that requires TLS.
        case tlsRefusals
        /// Chunks of large messages sent and received (a message larger
        /// than 64 KiB travels in chunks of up to 64 KiB).
        case chunksOut, chunksIn
        /// Large messages sent and received whole on the bulk lane (a
        /// second connection per node pair; without TLS).
        case bulkMessagesOut, bulkMessagesIn
        /// Times a large message left the bulk lane for chunks: the lane
        /// made no progress for `bulkStallTimeout`, its connection failed,
        /// or the peer took none. On a busy machine its copying thread (at
        /// `SCHED_IDLE`) may not run; many of these say the lane does not
        /// pay there.
        case bulkFallbacks
    }

    /// Receives every change of every counter of one node. Called on the
    /// thread that counts (often an event loop, once per frame): it must be
    /// cheap and must not block.
    public protocol Handler: Sendable {
        func add(_ delta: Int, to counter: Counter)
    }
}
