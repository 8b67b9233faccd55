import Foundation
import OscarTestSupport
import Testing

/// `oscar cluster` driven as a user would: real node processes started in
/// the background, asked, killed, added and stopped.
@Suite(.serialized, .timeLimit(.minutes(8))) struct ClusterCLITests {
    /// A base port with `count` consecutive free ports on 127.0.0.1.
    static func freeRange(_ count: Int) -> Int? {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            let base = Int.random(in: 20_000...50_000, using: &rng)
            if (base..<base + count).allSatisfy(isFree) { return base }
        }
        return nil
    }

    static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = UInt16(port).bigEndian
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// Statuses by address from `oscar members --json`.
    static func members(_ port: Int) async -> [String: String]? {
        guard
            let r = try? await OscarProcess.run(["members", "--node", "127.0.0.1:\(port)", "--json"]),
            r.status == 0, let json = try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any],
            let list = json["members"] as? [[String: Any]]
        else { return nil }
        var out: [String: String] = [:]
        for m in list { out[m["address"] as? String ?? "?"] = m["status"] as? String }
        return out
    }

    /// Pids recorded in the cluster directory.
    static func pids(_ dir: String) -> [Int32] {
        guard let data = FileManager.default.contents(atPath: dir + "/cluster.json"),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let nodes = json["nodes"] as? [[String: Any]]
        else { return [] }
        return nodes.compactMap { ($0["pid"] as? NSNumber)?.int32Value }
    }

    static func isAlive(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        return !(stat.split(separator: ")").last?.trimmingCharacters(in: .whitespaces).hasPrefix("Z") ?? false)
    }

    @Test func upAskKillAddAndDownACluster() async throws {
        let base = try #require(Self.freeRange(4))
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("oscar-cluster-\(base)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var everyPid: Set<Int32> = []
        do {
            let up = try await OscarProcess.run(
                ["cluster", "up", "--nodes", "3", "--base-port", "\(base)", "--dir", dir], timeout: .seconds(60))
            #expect(up.status == 0, "\(up.stdout)\(up.stderr)")
            #expect(up.stdout.contains("cluster converged"))
            #expect(up.stderr.contains("3/3 nodes see the whole cluster up"))
            everyPid.formUnion(Self.pids(dir))
            #expect(everyPid.count == 3)

            // An ask to each node, answered by that node.
            for port in base..<base + 3 {
                let r = try await OscarProcess.run(
                    ["ask", "oscar://127.0.0.1:\(port)/user/echo", "Echo", #"{"text":"hi"}"#])
                #expect(r.status == 0 && r.stdout.contains("127.0.0.1:\(port)"), "\(r.stdout)\(r.stderr)")
            }
            // The demo's workers pool answers from any node, naming the node that did the work.
            let work = try await OscarProcess.run(
                ["ask", "oscar://127.0.0.1:\(base + 2)/user/workers", "Work", #"{"id":7}"#])
            #expect(work.status == 0 && work.stdout.contains(#""id":7"#), "\(work.stdout)\(work.stderr)")
            #expect(work.stdout.contains(#""node":"127.0.0.1:"#) && work.stdout.contains("/user/workers/"))
            let view = await Self.members(base)
            #expect(view?.count == 3 && view?.values.allSatisfy { $0 == "up" } == true, "\(String(describing: view))")

            // Kill one; status names it.
            let victim = base + 1
            let killed = try await OscarProcess.run(["cluster", "kill", "\(victim)", "--dir", dir])
            #expect(killed.status == 0, "\(killed.stderr)")
            let status = try await OscarProcess.run(["cluster", "status", "--dir", dir])
            #expect(status.stdout.contains("gone: 127.0.0.1:\(victim)"), "\(status.stdout)")

            // Add one: three up again, once the killed node is removed.
            let added = try await OscarProcess.run(["cluster", "add", "--dir", dir], timeout: .seconds(60))
            #expect(added.status == 0, "\(added.stdout)\(added.stderr)")
            everyPid.formUnion(Self.pids(dir))
            let threeUp = await eventually(timeout: .seconds(30)) {
                guard let v = await Self.members(base) else { return false }
                return v.count == 3 && v.values.allSatisfy { $0 == "up" } && v["127.0.0.1:\(victim)"] == nil
            }
            let last = await Self.members(base)
            #expect(threeUp, "\(String(describing: last))")
        } catch {
            Issue.record(error)
        }
        // Down, always; twice is harmless; no process started here remains.
        let down = try await OscarProcess.run(["cluster", "down", "--dir", dir], timeout: .seconds(60))
        #expect(down.status == 0, "\(down.stdout)\(down.stderr)")
        #expect(down.stdout.contains("stopped 3 nodes"), "\(down.stdout)")
        let again = try await OscarProcess.run(["cluster", "down", "--dir", dir])
        #expect(again.status == 0 && again.stdout.contains("nothing to stop"))
        let started = everyPid
        #expect(started.count == 4)
        let gone = await eventually(timeout: .seconds(10)) { started.allSatisfy { !Self.isAlive($0) } }
        #expect(gone, "still running: \(started.filter(Self.isAlive))")
    }

    /// A cluster file holds `up`'s options; a flag beside it wins; its paths
    /// are the file's folder's; the other commands find the cluster through
    /// it; a wrong key or type is refused as bad arguments (64), naming it.
    @Test func aClusterFileStartsTheClusterItDescribes() async throws {
        let base = try #require(Self.freeRange(3))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("oscar-file-\(base)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "/oscar-cluster.json"
        try #"{"nodes": 3, "base-port": \#(base), "dir": "state", "timeout": "60s"}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        var pids: [Int32] = []
        do {
            let up = try await OscarProcess.run(
                ["cluster", "up", "--file", file, "--nodes", "2"], timeout: .seconds(90))
            #expect(up.status == 0, "\(up.stdout)\(up.stderr)")
            pids = Self.pids(folder + "/state")
            #expect(pids.count == 2, "--nodes beats the file's 3; the state is in the file's folder")
            let status = try await OscarProcess.run(["cluster", "status", "--file", file])
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("127.0.0.1:\(base + 1)"), "\(status.stdout)")
            // The client commands find the cluster, its secret and a node through the file.
            let asked = try await OscarProcess.run(
                ["ask", "oscar://127.0.0.1:\(base + 1)/user/echo", "Echo", #"{"text":"f"}"#, "--file", file], secret: ""
            )
            #expect(asked.status == 0 && asked.stdout.contains(#""text":"f""#), "\(asked.stdout)\(asked.stderr)")
            let members = try await OscarProcess.run(["members", "--file", file], secret: "")
            #expect(members.stdout.contains("as 127.0.0.1:\(base) sees them"), "\(members.stdout)\(members.stderr)")
        } catch {
            Issue.record(error)
        }
        let down = try await OscarProcess.run(["cluster", "down", "--file", file], timeout: .seconds(60))
        #expect(down.status == 0 && down.stdout.contains("stopped 2 nodes"), "\(down.stdout)\(down.stderr)")
        let started = pids
        let gone = await eventually(timeout: .seconds(10)) { started.allSatisfy { !Self.isAlive($0) } }
        #expect(gone)

        for (text, complaint) in [
            (#"{"node": 3}"#, #"unknown key "node""#), (#"{"nodes": "3"}"#, #""nodes" must be a whole number"#),
            (#"{"arguments": [1]}"#, #""arguments" must be a list of strings"#), ("[]", "one JSON object"),
        ] {
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let r = try await OscarProcess.run(["cluster", "up", "--file", file])
            #expect(r.status == 64 && r.stderr.contains(complaint), "\(text): \(r.stderr)")
        }
    }
}
