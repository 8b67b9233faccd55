import Foundation
import Testing

/// docker-compose.yml cannot run here (no Docker engine), so this checks
/// what can be checked: each service's command and environment, on top of
/// the image's ENV from Cluster/Dockerfile, pass `oscar node --check-config`,
/// and the file has what the deployment needs. The example configs pass too.
@Suite(.timeLimit(.minutes(5))) struct DeploymentConfigTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    struct Service {
        var name: String
        var lines: [String] = []
        var command: [String] = []
        var environment: [String: String] = [:]
    }

    /// The services of docker-compose.yml, read from its plain layout:
    /// two-space service names, `command:` as a JSON array, and
    /// `environment:` as `KEY: value` lines.
    static func services() throws -> [Service] {
        let text = try String(contentsOf: root.appendingPathComponent("docker-compose.yml"), encoding: .utf8)
        var out: [Service] = []
        var inServices = false
        var inEnvironment = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line == "services:" { inServices = true; continue }
            guard inServices, !line.trimmingCharacters(in: .whitespaces).hasPrefix("#") else { continue }
            let indent = line.prefix { $0 == " " }.count
            let body = line.trimmingCharacters(in: .whitespaces)
            if indent == 2, body.hasSuffix(":") {
                out.append(Service(name: String(body.dropLast())))
                inEnvironment = false
                continue
            }
            guard !out.isEmpty, !body.isEmpty else { continue }
            out[out.count - 1].lines.append(body)
            if indent == 4 { inEnvironment = body == "environment:" }
            if indent == 4, body.hasPrefix("command:") {
                let json = Data(body.dropFirst("command:".count).utf8)
                out[out.count - 1].command = try JSONSerialization.jsonObject(with: json) as? [String] ?? []
            } else if inEnvironment, indent == 6, let colon = body.firstIndex(of: ":") {
                var value = body[body.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                // ${VAR:?message}: the value the operator supplies.
                if value.hasPrefix("${") { value = "from-the-operator" }
                out[out.count - 1].environment[String(body[..<colon])] = value
            }
        }
        return out
    }

    /// `ENV KEY=value` lines of the runtime stage.
    static func imageEnvironment() throws -> [String: String] {
        let text = try String(contentsOf: root.appendingPathComponent("Cluster/Dockerfile"), encoding: .utf8)
        var env: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("ENV ") {
            let pair = line.dropFirst(4).split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { env[pair[0]] = pair[1] }
        }
        return env
    }

    @Test func everyComposeServicePassesCheckConfig() async throws {
        let services = try Self.services()
        let image = try Self.imageEnvironment()
        #expect(services.map(\.name) == ["oscar-1", "oscar-2", "oscar-3"])
        #expect(image["OSCAR_BIND_HOST"] == "0.0.0.0" && image["OSCAR_HTTP_PORT"] == "8080")
        for service in services {
            #expect(service.command.first == "node", "\(service.name)")
            #expect(service.environment["OSCAR_SECRET"] == "from-the-operator", "the secret comes from the environment")
            #expect(service.environment["OSCAR_SEEDS"]?.contains("oscar-1:7000") == true, "a seed by service name")
            #expect(service.lines.contains("restart: on-failure"), "\(service.name): restarted after a crash")
            #expect(service.lines.contains { $0.hasPrefix("ports:") && $0.contains(":8080") }, "\(service.name): ports")
            #expect(
                service.lines.contains { $0.contains(#"["CMD", "oscar", "health", "--http", "127.0.0.1:8080"]"#) },
                "\(service.name): healthcheck on /health")
            let r = try await OscarProcess.run(
                Array(service.command) + ["--check-config"], secret: "",
                environment: image.merging(service.environment) { $1 })
            #expect(r.status == 0, "\(service.name): \(r.stderr)")
            #expect(r.stdout.contains("configuration is valid"))
            let printed = try await OscarProcess.run(
                Array(service.command) + ["--print-config"], secret: "",
                environment: image.merging(service.environment) { $1 })
            #expect(printed.stdout.contains("advertised-host = \(service.name)  (flag)"), "\(printed.stdout)")
            #expect(printed.stdout.contains("bind-host = 0.0.0.0  (environment)"))
            #expect(!printed.stdout.contains("from-the-operator"), "the secret is masked")
        }
    }

    @Test func theExampleConfigsPassCheckConfig() async throws {
        for name in ["seed.json", "worker.json"] {
            let path = Self.root.appendingPathComponent("Cluster/config/\(name)").path
            let r = try await OscarProcess.run(["node", "--config", path, "--check-config"])
            #expect(r.status == 0, "\(name): \(r.stderr)")
        }
        // And a broken one is refused, naming the key.
        let bad = FileManager.default.temporaryDirectory.appendingPathComponent("oscar-bad-\(getpid()).json")
        try #"{"port": "seventy"}"#.write(to: bad, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: bad) }
        let r = try await OscarProcess.run(["node", "--config", bad.path, "--check-config"])
        #expect(r.status == 64 && r.stderr.contains("port (from \(bad.path))"), "\(r.stderr)")
    }

    /// The container's environment in Cluster/kubernetes/inventory.yaml,
    /// read from its plain layout (`- name: X` then `value: "Y"`), with what
    /// Kubernetes fills in (the pod's IP and namespace) filled in.
    static func kubernetesEnvironment() throws -> [String: String] {
        let text = try String(
            contentsOf: root.appendingPathComponent("Cluster/kubernetes/inventory.yaml"), encoding: .utf8)
        var env: [String: String] = [:]
        var name: String?
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("- name: ") {
                name = String(line.dropFirst("- name: ".count))
            } else if let current = name, line.hasPrefix("value: ") {
                env[current] = String(line.dropFirst("value: ".count)).trimmingCharacters(in: ["\""])
                name = nil
            } else if let current = name, line.hasPrefix("fieldPath: ") {
                env[current] = line.hasSuffix("status.podIP") ? "10.1.2.3" : "shop"
                name = nil
            }
        }
        return env.mapValues { $0.replacingOccurrences(of: "$(POD_NAMESPACE)", with: env["POD_NAMESPACE"] ?? "") }
    }

    /// Every OSCAR_* variable the manifest sets is a setting, and together
    /// they pass `--check-config` and find seeds through the headless
    /// Service's name.
    @Test func theKubernetesManifestsSettingsPassCheckConfig() async throws {
        var env = try Self.kubernetesEnvironment()
        // Every setting, as --print-config names it, as a variable.
        let settings = try await OscarProcess.run(["node", "--port", "1", "--print-config"], secret: "").stdout
        let known = Set(
            settings.split(separator: "\n").compactMap { $0.split(separator: " ").first }.map {
                "OSCAR_" + $0.uppercased().replacingOccurrences(of: "-", with: "_")
            })
        for name in env.keys where name.hasPrefix("OSCAR_") {
            #expect(known.contains(name), "\(name) is not a setting")
        }
        #expect(env["OSCAR_SEED_DNS"] == "inventory.shop.svc.cluster.local:7000")
        #expect(env["OSCAR_ADVERTISED_HOST"] == "10.1.2.3")
        let secret = NSTemporaryDirectory() + "oscar-k8s-secret-\(getpid())"
        try "a-long-cluster-secret-from-k8s\n".write(toFile: secret, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: secret) }
        env["OSCAR_SECRET_FILE"] = secret
        let r = try await OscarProcess.run(["node", "--check-config"], secret: "", environment: env)
        #expect(r.status == 0 && r.stdout.contains("configuration is valid"), "\(r.stdout)\(r.stderr)")
        let printed = try await OscarProcess.run(["node", "--print-config"], secret: "", environment: env)
        #expect(printed.stdout.contains("seed-dns = inventory.shop.svc.cluster.local:7000  (environment)"))
        #expect(printed.stdout.contains("seed-dns-min = 3  (environment)"))
    }
}
