import Distributed
import Foundation
import Oscar
import Testing

// The README shows `import Distributed`, `import Oscar`, a blank line, then
// this region verbatim.
// README-DISTRIBUTED-BEGIN
distributed actor Scoreboard {
    typealias ActorSystem = ClusterSystem
    // Runs on one of the node's loops, like every Oscar actor.
    nonisolated var unownedExecutor: UnownedSerialExecutor { actorSystem.executor(for: id) }

    private var total = 0

    distributed func add(_ points: Int) -> Int {
        total += points
        return total
    }
}

func scoreAcrossTwoNodes() async throws -> Int {
    let a = ClusterSystem(node: try ClusterNode(settings: .init(secret: "a-long-cluster-secret")))
    let b = ClusterSystem(node: try ClusterNode(settings: .init(secret: "a-long-cluster-secret")))
    defer { [b, a].forEach { $0.shutdown() } }
    let board = a.named("scoreboard") { Scoreboard(actorSystem: a) }  // oscar://<a>/user/scoreboard
    let remote = try Scoreboard.resolve(id: board.id, using: b)  // a proxy on b
    _ = try await remote.add(2)  // a call over TCP, answered on a
    return try await remote.add(3)
}
// README-DISTRIBUTED-END

@Suite(.timeLimit(.minutes(5))) struct ReadmeDistributedExampleTests {
    @Test func theDistributedExampleRunsAndReadsAsItDoesInTheReadme() async throws {
        #expect(try await scoreAcrossTwoNodes() == 5)

        let here = #filePath
        let source = try String(contentsOfFile: here, encoding: .utf8)
        let root = here.components(separatedBy: "/Tests/")[0]
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        let begin = try #require(source.range(of: "// README-DISTRIBUTED-BEGIN\n"))
        let end = try #require(source.range(of: "// README-DISTRIBUTED-END", range: begin.upperBound..<source.endIndex))
        let example = String(source[begin.upperBound..<end.lowerBound])
        #expect(readme.contains("```swift\nimport Distributed\nimport Oscar\n\n" + example + "```"))
    }
}
