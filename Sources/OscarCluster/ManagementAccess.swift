/// Who may use a node's management endpoint: the pure decision, made per
/// request before any route runs.
///
/// - A client that presented a certificate chaining to the cluster CA (the
///   endpoint runs TLS when the node does) may do anything: it holds the
///   same credential a node or the CLI holds.
/// - `GET /health` is always open: it says only whether the node is up, and
///   container and Kubernetes probes cannot sign requests. (The issue asked
///   for a credential on every read off loopback; a probe that cannot pass
///   one would make every such deployment unhealthy. docs/CONFIGURATION.md
///   says so.)
/// - Other reads (`GET`, `HEAD`) are open when the endpoint listens on
///   loopback, where only this host can reach it; on any other address
///   they need a signature, as writes always do (`SignedRequest`).
package struct ManagementAccess: Sendable, Equatable {
    /// The endpoint listens on a loopback address (127.0.0.0/8).
    package var listensOnLoopback: Bool

    package init(host: String) {
        listensOnLoopback = host.split(separator: ".", omittingEmptySubsequences: false).first == "127"
    }

    package enum Decision: Equatable, Sendable {
        case allowed
        /// Allowed only signed, fresh and not replayed; `why` says why a
        /// signature is needed, for the refusal.
        case signatureNeeded(why: String)
    }

    package func decide(method: String, path: String, hasClientCertificate: Bool) -> Decision {
        if hasClientCertificate { return .allowed }
        guard method == "GET" || method == "HEAD" else {
            return .signatureNeeded(why: "\(method) changes the node")
        }
        if path == "/health" || listensOnLoopback { return .allowed }
        return .signatureNeeded(
            why: "the endpoint listens beyond loopback, so reads need a credential too (`oscar get PATH` signs one)")
    }
}
