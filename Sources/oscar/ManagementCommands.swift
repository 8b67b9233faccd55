import Glibc
import Oscar
import OscarDemo
import OscarRemote
import OscarTestKit

/// The CLI's requests to a node's management endpoint, and its one-shot
/// HTTP client (the runtime image has no curl):
///
/// - `oscar health --http host:port`: `GET /health`; exit 0 when the node is
///   up in its cluster. For container health checks.
/// - `oscar get PATH --http host:port`: any read (`/members`, `/metrics`),
///   signed with the cluster secret when one is given or found (an endpoint
///   listening beyond loopback requires it), else unsigned; prints the body,
///   exit 0 on 200.
///
/// A node with TLS serves its endpoint over TLS too. Both commands then
/// speak TLS with `--tls-ca` alone (no certificate of their own: enough
/// for `/health`, and for reads on loopback), or `--tls-cert`, `--tls-key`
/// and `--tls-ca`, else the
/// node's own `OSCAR_TLS_CERT`, `OSCAR_TLS_KEY` and `OSCAR_TLS_CA` (a
/// container's health check runs with the node's environment), else the
/// CLI certificate of the `--dir` (or `--file`) cluster (the default one)
/// when it runs TLS.
enum ManagementCommands {
    static func health(_ args: inout Arguments) throws(CLIError) {
        let target = try endpoint(&args)
        let tls = try credentials(&args, dir: NetworkCommands.clusterDirectory(&args))
        try args.rejectUnknownOptions()
        let (statusLine, body) = split(try request("GET", "/health", from: target, tls: tls))
        print(body.isEmpty ? statusLine : body, terminator: body.hasSuffix("\n") ? "" : "\n")
        try requireSuccess(statusLine, body, tls: tls, failure: "not healthy")
    }

    static func get(_ args: inout Arguments) throws(CLIError) {
        guard args.positionals.count == 1, let path = args.positionals.first, path.hasPrefix("/") else {
            throw .usage("oscar get takes one path, such as /members or /metrics")
        }
        let target = try endpoint(&args)
        let dir = try NetworkCommands.clusterDirectory(&args)
        let secret = try ClusterSecret.forClientIfGiven(&args, dir: dir)
        let tls = try credentials(&args, dir: dir)
        try args.rejectUnknownOptions()
        // Without a secret the read goes unsigned: a node admits it on
        // loopback (or from a client certificate), and says 401 elsewhere.
        let response =
            if let secret {
                try signedRequest("GET", path, secret: secret, from: target, tls: tls)
            } else {
                try request("GET", path, from: target, tls: tls)
            }
        let (statusLine, body) = split(response)
        if secret == nil, statusLine.contains(" 401 ") {
            throw .failed(
                "the node asks for a credential: give the cluster secret (--secret-file FILE, --dir of its cluster, "
                    + "OSCAR_SECRET_FILE) or its cluster's client certificate")
        }
        print(body, terminator: body.hasSuffix("\n") || body.isEmpty ? "" : "\n")
        try requireSuccess(statusLine, body, tls: tls, failure: "refused")
    }

    /// The TLS credentials of a management request: the CLI's usual ones
    /// (`ClusterTLS.client`), or, given only a CA (`--tls-ca`, or
    /// `OSCAR_TLS_CA` alone), trust without a certificate of our own: a
    /// probe, which `/health` admits.
    static func credentials(_ args: inout Arguments, dir: String?) throws(CLIError) -> TLSCredentials? {
        if let ca = ClusterTLS.caAlone(&args) {
            do { return try TLSCredentials(anonymousTrustingFile: ca) } catch { throw .failed("\(error)") }
        }
        guard let files = try ClusterTLS.client(&args, dir: dir) else { return nil }
        do { return try files.load() } catch { throw .failed("\(error)") }
    }

    private static func endpoint(_ args: inout Arguments) throws(CLIError) -> NodeAddress {
        var text = args.option("http") ?? "127.0.0.1:8080"
        // A URL's scheme is accepted and dropped: TLS follows the credentials.
        for scheme in ["https://", "http://"] where text.hasPrefix(scheme) { text.removeFirst(scheme.count) }
        if text.hasSuffix("/") { text.removeLast() }
        guard let target = NodeAddress(hostPort: text) else {
            throw .usage("--http takes host:port of a management endpoint, not '\(text)'")
        }
        return target
    }

    /// The status line and the body of a response.
    private static func split(_ response: String) -> (statusLine: String, body: String) {
        (
            response.split(separator: "\r\n").first.map(String.init) ?? "",
            response.split(separator: "\r\n\r\n", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
        )
    }

    private static func requireSuccess(
        _ statusLine: String, _ body: String, tls: TLSCredentials?, failure: String
    ) throws(CLIError) {
        if tls == nil, statusLine.contains(" 400 "), body.contains("https://") {
            throw .failed(
                "the node runs TLS: give --dir of its cluster, --tls-ca alone (a probe), or --tls-cert, "
                    + "--tls-key and --tls-ca (or the same as OSCAR_TLS_CERT, OSCAR_TLS_KEY, OSCAR_TLS_CA)")
        }
        guard statusLine.contains(" 200 ") else { throw .failed("\(failure): \(statusLine)") }
    }

    /// A request signed with the cluster secret (`SignedRequest`): what a
    /// node asks of a write, and of a read when its endpoint listens beyond
    /// loopback.
    static func signedRequest(
        _ method: String, _ path: String, body: String = "", secret: String, from target: NodeAddress,
        tls: TLSCredentials? = nil
    ) throws(CLIError) -> String {
        let headers = SignedRequest.headers(
            method: method, path: path, body: Array(body.utf8), secret: Array(secret.utf8), now: Int64(time(nil)))
        return try request(method, path, headers: headers, body: body, from: target, tls: tls)
    }

    /// One HTTP/1.0 request over a blocking socket (with `tls`, over TLS),
    /// bounded by 3 s each way; the whole response, head and body.
    static func request(
        _ method: String, _ path: String, headers: [String: String] = [:], body: String = "", from target: NodeAddress,
        tls: TLSCredentials? = nil
    ) throws(CLIError) -> String {
        let socket = try BlockingSocket(connectingTo: target)
        defer { socket.close() }
        var head = "\(method) \(path) HTTP/1.0\r\nHost: \(target)\r\nContent-Length: \(body.utf8.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        let request = Array((head + "\r\n" + body).utf8)
        let response: [UInt8]
        if let tls {
            response = try TLSExchange.run(request, over: socket, credentials: tls)
        } else {
            try socket.send(request)
            response = try socket.receiveAll()
        }
        return String(decoding: response, as: UTF8.self)
    }
}
