import Foundation
import Oscar
import OscarDemo
import OscarTestKit
import Testing

/// The README's ClusterNode snippet, compiled here (not run: it uses fixed ports).
func readmeClusterExample(secret: String) async throws {
    // README-CLUSTER-BEGIN
    let node = try ClusterNode(settings: .init(port: 7001, secret: secret)) { Demo.declare(in: &$0) }
    let remote = node.system.ref("oscar://127.0.0.1:7002/user/echo")!
    let reply = try await remote.ask(Demo.Echo(text: "hi"), timeout: .seconds(2))
    print(reply.text, "from", reply.node)
    node.shutdown()
    // README-CLUSTER-END
}

@Suite(.timeLimit(.minutes(5))) struct ReadmeClusterExampleTests {
    @Test func theReadmeShowsTheCompiledClusterSnippet() throws {
        let source = try String(contentsOfFile: #filePath, encoding: .utf8)
        let root = #filePath.components(separatedBy: "/Tests/")[0]
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        let begin = try #require(source.range(of: "// README-CLUSTER-BEGIN\n"))
        let end = try #require(source.range(of: "    // README-CLUSTER-END"))
        let snippet = source[begin.upperBound..<end.lowerBound].split(separator: "\n").map { $0.dropFirst(4) }
            .joined(separator: "\n")
        #expect(readme.contains("```swift\n" + snippet + "\n```"))
    }
}
