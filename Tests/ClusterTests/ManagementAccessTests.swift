import Foundation
import Glibc
import Oscar
import OscarTestSupport
import Testing

@testable import OscarCluster
@testable import OscarRemote

/// Who may use the management endpoint: the pure decision over every
/// combination, then the endpoint itself over real sockets, beyond
/// loopback and over TLS.
@Suite(.timeLimit(.minutes(4))) struct ManagementAccessTests {
    static let secret = "a-long-cluster-secret"

    // MARK: - The decision, over every combination

    @Test func everyCombinationIsDecidedByTheRules() {
        let methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "get", ""]
        let paths = ["/health", "/members", "/metrics", "/faults", "/", "/health/x", "/HEALTH"]
        let hosts = ["127.0.0.1", "127.1.2.3", "0.0.0.0", "10.0.0.7", "128.0.0.1", "1.127.0.0"]
        for method in methods {
            for path in paths {
                for host in hosts {
                    for certificate in [false, true] {
                        let access = ManagementAccess(host: host)
                        let decision = access.decide(method: method, path: path, hasClientCertificate: certificate)
                        let isRead = method == "GET" || method == "HEAD"
                        let open = certificate || (isRead && (path == "/health" || host.hasPrefix("127.")))
                        #expect(
                            (decision == .allowed) == open, "\(method) \(path) on \(host), certificate \(certificate)")
                    }
                }
            }
        }
    }

    // MARK: - Beyond loopback, in plaintext

    func node(httpHost: String = "127.0.0.1", tls: ClusterNode.Settings.TLS? = nil) throws -> ClusterNode {
        var settings = ClusterNode.Settings(
            secret: Self.secret, loopCount: 1, membershipTick: .milliseconds(200), httpPort: 0)
        settings.httpHost = httpHost
        settings.tls = tls
        return try ClusterNode(settings: settings)
    }

    /// One plaintext request on a fresh connection: the whole response.
    static func plain(_ request: String, port: Int) async throws -> String {
        try await offThePool {
            let client = try ManagementClient(port: port, receiveTimeout: 20)
            client.send(Array(request.utf8))
            return client.readToEnd().text
        }
    }

    static func get(_ path: String, headers: [String: String] = [:]) -> String {
        "GET \(path) HTTP/1.1\r\nHost: x\r\n" + headers.map { "\($0): \($1)\r\n" }.joined() + "\r\n"
    }

    static func signedGet(_ path: String) -> (request: String, headers: [String: String]) {
        let headers = SignedRequest.headers(
            method: "GET", path: path, body: [], secret: Array(secret.utf8), now: Int64(time(nil)))
        return (get(path, headers: headers), headers)
    }

    @Test func beyondLoopbackReadsNeedASignatureButHealthDoesNot() async throws {
        let node = try node(httpHost: "0.0.0.0")
        defer { node.shutdown() }
        let port = try #require(node.managementPort)
        #expect(
            await eventually { (try? await Self.plain(Self.get("/health"), port: port))?.contains(" 200 ") == true })
        for path in ["/members", "/metrics"] {
            let refused = try await Self.plain(Self.get(path), port: port)
            #expect(ManagementClient.status(refused) == 401, "\(path): \(refused)")
            #expect(refused.contains("beyond loopback"), "\(refused)")
            let (signed, _) = Self.signedGet(path)
            let answered = try await Self.plain(signed, port: port)
            #expect(ManagementClient.status(answered) == 200, "\(path): \(answered)")
            let replayed = try await Self.plain(signed, port: port)
            #expect(replayed.contains("replayed"), "\(replayed)")
        }
    }

    @Test func onLoopbackReadsAreOpenAndWritesStillNeedASignature() async throws {
        let node = try node()
        defer { node.shutdown() }
        let port = try #require(node.managementPort)
        #expect(ManagementClient.status(try await Self.plain(Self.get("/members"), port: port)) == 200)
        let post = "POST /faults HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        #expect(ManagementClient.status(try await Self.plain(post, port: port)) == 401)
    }

    // MARK: - Over TLS

    /// One request over TLS with `credentials` (a certificate, or none):
    /// the response, or the TLS error that ended it.
    static func tls(_ request: String, port: Int, credentials: TLSCredentials) async throws -> Result<String, TLSError>
    {
        try await offThePool {
            let client = try ManagementClient(port: port, receiveTimeout: 20)
            let session = try TLSSession(credentials: credentials, role: .client(serverHost: "127.0.0.1"))
            do throws(TLSError) {
                _ = try handshake(session, fd: client.fd) { client.send($0) }
                try session.send(Array(request.utf8))
                client.send(session.takeCiphertext())
                var response: [UInt8] = []
                while session.failure == nil, let bytes = readSome(client.fd) {
                    response += try session.receive(bytes)
                }
                return .success(String(decoding: response, as: UTF8.self))
            } catch {
                return error == .closed ? .success("") : .failure(error)
            }
        }
    }

    @Test func aTLSNodeServesItsEndpointOverTLSAndAClientCertificateIsACredential() async throws {
        let pki = try TLSClusterTests.PKI("management")
        let node = try node(httpHost: "0.0.0.0", tls: pki.issue("node"))
        defer { node.shutdown() }
        let port = try #require(node.managementPort)
        let client = try pki.issue("cli").load()

        // Plaintext is told to use TLS, in plaintext.
        let plaintext = try await Self.plain(Self.get("/health"), port: port)
        #expect(ManagementClient.status(plaintext) == 400 && plaintext.contains("https://"), "\(plaintext)")

        // With the CLI's certificate: every route, no signature.
        let members = try await Self.tls(Self.get("/members"), port: port, credentials: client).get()
        #expect(ManagementClient.status(members) == 200 && members.contains(node.address.description), "\(members)")

        // Without a certificate (a probe): /health only.
        let anonymous = try TLSCredentials(
            anonymousTrusting: String(contentsOfFile: pki.certs.caCertificate, encoding: .utf8))
        #expect(
            await eventually {
                (try? await Self.tls(Self.get("/health"), port: port, credentials: anonymous).get())?.contains(" 200 ")
                    == true
            })
        let refused = try await Self.tls(Self.get("/members"), port: port, credentials: anonymous).get()
        #expect(ManagementClient.status(refused) == 401, "\(refused)")
        let head = try await Self.tls("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n", port: port, credentials: anonymous)
            .get()
        #expect(ManagementClient.status(head) == 200 && head.hasSuffix("\r\n\r\n"), "a head, no body: \(head)")

        // A certificate from another CA is refused at the handshake.
        let strangers = try TLSClusterTests.PKI("management-stranger")
        let stranger = try strangers.issue("cli").load()
        let outcome = try await Self.tls(Self.get("/health"), port: port, credentials: stranger)
        #expect((try? outcome.get())?.contains(" 200 ") != true, "\(outcome)")

        // The node still serves.
        let again = try await Self.tls(Self.get("/metrics"), port: port, credentials: client).get()
        #expect(ManagementClient.status(again) == 200, "\(again)")
    }
}
