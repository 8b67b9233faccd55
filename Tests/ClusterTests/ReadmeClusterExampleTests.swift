import Foundation
import Oscar
import Testing

/// The README's first example's message and actor, as an application has
/// them (nested, so they shadow this test module's own `Greeter`), and its
/// two-node block, which continues that example, compiled and run here.
private struct ReadmeCluster {
    struct Greet: Oscar.Message {  // the module's name qualifies its types
        typealias Reply = String
        var name: String
    }

    final class Greeter: Reactor {
        static func reactions(_ r: inout Reactions<Greeter>) {
            r.on(Greet.self, result: { _, m in "Hello, \(m.name)!" })
        }
    }

    // README-CLUSTER-BEGIN
    func greetGrace() async throws -> String {
        let secret = "a-long-cluster-secret"  // 16 bytes at least; `oscar secret` makes one
        let a = try ClusterNode(settings: .init(secret: secret)) { $0.nodeSingleton("greeter") { Greeter() } }
        let b = try ClusterNode(settings: .init(secret: secret, seeds: [a.address]))
        defer { [b, a].forEach { $0.shutdown() } }
        let greeter = b.system.ref("oscar://\(a.address)/user/greeter")!  // a ref on b to an actor on a
        return try await greeter.ask(Greet(name: "Grace"), timeout: .seconds(5))  // over TCP, answered on a
    }
    // README-CLUSTER-END
}

@Suite(.timeLimit(.minutes(5))) struct ReadmeClusterExampleTests {
    @Test func theReadmesTwoNodeExampleRuns() async throws {
        #expect(try await ReadmeCluster().greetGrace() == "Hello, Grace!")
    }

    @Test func theReadmeShowsTheTestedClusterSnippet() throws {
        let source = try String(contentsOfFile: #filePath, encoding: .utf8)
        let root = #filePath.components(separatedBy: "/Tests/")[0]
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        let begin = try #require(source.range(of: "// README-CLUSTER-BEGIN\n"))
        let end = try #require(source.range(of: "    // README-CLUSTER-END"))
        let snippet = source[begin.upperBound..<end.lowerBound].split(separator: "\n").map { $0.dropFirst(4) }
            .joined(separator: "\n")
        // It continues the first example's block, as the doc-blocks checker reads it.
        #expect(readme.contains("<!-- continues -->\n```swift\n" + snippet + "\n```"))
    }
}
