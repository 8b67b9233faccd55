import Glibc
import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime

/// The management endpoint's pages, as pure functions of a snapshot: the
/// HTTP shell parses requests and writes responses, nothing else.
package enum ManagementRoutes {
    public struct Response: Sendable, Equatable {
        public var status: Int
        public var contentType: String
        public var body: String

        package init(status: Int, contentType: String, body: String) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }
    }

    /// What the pages are rendered from.
    public struct Snapshot: Sendable {
        public var membership: MembershipSnapshot
        public var deadLetters: Int
        public var framesIn: Int
        public var framesOut: Int
        public var asksPending: Int
        public var gossipRounds: Int
        public var authenticationFailures: Int = 0
        public var connectionsRefused: Int = 0
        public var peersCutOff: Int = 0
        public var tlsRefusals: Int = 0
        public var chunksOut: Int = 0
        public var chunksIn: Int = 0
        public var bulkMessagesOut: Int = 0
        public var bulkMessagesIn: Int = 0
        public var bulkFallbacks: Int = 0
    }

    /// One HTTP request, as the shell parsed it; header names are lowercase.
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var headers: [String: String] = [:]
        public var body: [UInt8] = []
        /// The subject of the certificate the client presented over TLS,
        /// verified against the cluster CA; nil without one.
        package var clientCertificate: String? = nil
    }

    /// A refused request, as an error value.
    public struct Refusal: Error, Sendable {
        public var response: Response
        package init(status: Int, _ text: String) {
            response = Response(status: status, contentType: "text/plain", body: text + "\n")
        }
    }

    public static func respond(_ request: Request, _ s: Snapshot) -> Response {
        let path = request.path
        guard request.method == "GET" || request.method == "HEAD" else {
            return Response(status: 405, contentType: "text/plain", body: "only GET and HEAD\n")
        }
        switch path {
        case "/health":
            let me = s.membership.members.first { $0.node == s.membership.observer }
            let status = me?.status.rawValue ?? "unknown"
            let healthy = me?.status == .up
            return Response(
                status: healthy ? 200 : 503, contentType: "application/json",
                body:
                    "{\"node\":\(JSONBridge.quote("\(s.membership.observer)")),\"status\":\(JSONBridge.quote(status))}\n"
            )
        case "/members":
            return Response(status: 200, contentType: "application/json", body: s.membership.json + "\n")
        case "/metrics":
            return Response(status: 200, contentType: "text/plain; version=0.0.4", body: metrics(s))
        default:
            return Response(
                status: 404, contentType: "text/plain", body: "not found: try /members, /health, /metrics\n")
        }
    }

    /// Prometheus text format.
    static func metrics(_ s: Snapshot) -> String {
        var lines = [
            "# HELP oscar_members Members of the cluster by status, as this node sees them.",
            "# TYPE oscar_members gauge",
        ]
        for status in MemberStatus.allCases where status != .removed {
            let n = s.membership.members.filter { $0.status == status }.count
            lines.append("oscar_members{status=\"\(status.rawValue)\"} \(n)")
        }
        lines += [
            "# HELP oscar_members_unreachable Members some member observes as unreachable.",
            "# TYPE oscar_members_unreachable gauge",
            "oscar_members_unreachable \(s.membership.unreachable.count)",
            "# HELP oscar_frames_in_total Message frames received from other nodes.",
            "# TYPE oscar_frames_in_total counter",
            "oscar_frames_in_total \(s.framesIn)",
            "# HELP oscar_frames_out_total Message frames sent to other nodes.",
            "# TYPE oscar_frames_out_total counter",
            "oscar_frames_out_total \(s.framesOut)",
            "# HELP oscar_asks_pending Asks to other nodes waiting for their outcome.",
            "# TYPE oscar_asks_pending gauge",
            "oscar_asks_pending \(s.asksPending)",
            "# HELP oscar_gossip_rounds_total Membership ticks (each gossips and checks).",
            "# TYPE oscar_gossip_rounds_total counter",
            "oscar_gossip_rounds_total \(s.gossipRounds)",
            "# HELP oscar_dead_letters_total Messages that could not be delivered.",
            "# TYPE oscar_dead_letters_total counter",
            "oscar_dead_letters_total \(s.deadLetters)",
            "# HELP oscar_node_restarts Times a supervisor (oscar node --supervise) restarted this node after a crash.",
            "# TYPE oscar_node_restarts gauge",
            "oscar_node_restarts \(getenv("OSCAR_RESTARTS").flatMap { Int(String(cString: $0)) } ?? 0)",
            "# HELP oscar_authentication_failures_total Handshakes refused because the peer's MAC was wrong.",
            "# TYPE oscar_authentication_failures_total counter",
            "oscar_authentication_failures_total \(s.authenticationFailures)",
            "# HELP oscar_connections_refused_total Inbound connections closed on arrival at a connection limit.",
            "# TYPE oscar_connections_refused_total counter",
            "oscar_connections_refused_total \(s.connectionsRefused)",
            "# HELP oscar_peers_cut_off_total Connections closed because the peer stopped reading.",
            "# TYPE oscar_peers_cut_off_total counter",
            "oscar_peers_cut_off_total \(s.peersCutOff)",
            "# HELP oscar_tls_refused_total Connections refused over TLS (handshake, certificate, host, or plaintext).",
            "# TYPE oscar_tls_refused_total counter",
            "oscar_tls_refused_total \(s.tlsRefusals)",
            "# HELP oscar_chunks_out_total Chunks of large messages sent.",
            "# TYPE oscar_chunks_out_total counter",
            "oscar_chunks_out_total \(s.chunksOut)",
            "# HELP oscar_chunks_in_total Chunks of large messages received.",
            "# TYPE oscar_chunks_in_total counter",
            "oscar_chunks_in_total \(s.chunksIn)",
            "# HELP oscar_bulk_messages_out_total Large messages sent on the bulk lane.",
            "# TYPE oscar_bulk_messages_out_total counter",
            "oscar_bulk_messages_out_total \(s.bulkMessagesOut)",
            "# HELP oscar_bulk_messages_in_total Large messages received on the bulk lane.",
            "# TYPE oscar_bulk_messages_in_total counter",
            "oscar_bulk_messages_in_total \(s.bulkMessagesIn)",
            "# HELP oscar_bulk_fallbacks_total Large messages that left the bulk lane for chunks.",
            "# TYPE oscar_bulk_fallbacks_total counter",
            "oscar_bulk_fallbacks_total \(s.bulkFallbacks)",
        ]
        return lines.joined(separator: "\n") + "\n"
    }
}

extension MembershipSnapshot {
    /// `{"observer": …, "members": [{address, uid, status, reachable, leader, roles, upNumber}]}`:
    /// what `oscar members --json` prints and `GET /members` serves. Every
    /// text is escaped (`JSONBridge.quote`): roles and addresses come from
    /// other nodes' gossip.
    public var json: String {
        let rows = members.map { m in
            let roles = m.roles.sorted().map(JSONBridge.quote).joined(separator: ",")
            return "{\"address\":\(JSONBridge.quote("\(m.node)")),\"uid\":\(m.uid),"
                + "\"status\":\(JSONBridge.quote(m.status.rawValue)),"
                + "\"reachable\":\(!unreachable.contains(m.uid)),\"leader\":\(leader == m.node),"
                + "\"roles\":[\(roles)],\"upNumber\":\(m.upNumber)}"
        }
        return "{\"observer\":\(JSONBridge.quote("\(observer)")),\"members\":[\(rows.joined(separator: ","))]}"
    }
}
