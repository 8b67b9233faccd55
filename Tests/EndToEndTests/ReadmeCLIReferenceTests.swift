import Foundation
import Testing

/// docs/CLI.md's CLI reference is `oscar help`, verbatim
/// (`Cluster/scripts/cli-reference.sh` writes it).
@Suite(.timeLimit(.minutes(5))) struct ReadmeCLIReferenceTests {
    @Test func theReadmeShowsTheCurrentHelp() async throws {
        let readme = try String(
            contentsOf: DeploymentConfigTests.root.appendingPathComponent("docs/CLI.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "<!-- cli-reference:start -->\n```\n"))
        let end = try #require(readme.range(of: "\n```\n<!-- cli-reference:end -->"))
        let shown = String(readme[start.upperBound..<end.lowerBound])
        let help = try await OscarProcess.run(["help"])
        #expect(help.status == 0)
        #expect(
            shown == help.stdout.trimmingCharacters(in: .newlines),
            "docs/CLI.md's CLI reference is stale: run Cluster/scripts/cli-reference.sh")
    }
}
