import Foundation
import Oscar
import Testing

// The README shows `import Oscar`, a blank line, then this region verbatim.
// README-EXAMPLE-BEGIN
struct Greet: Message {  // a message names its reply type
    typealias Reply = String
    var name: String
}

final class Greeter: Reactor {  // an actor declares a reaction per message type
    static func reactions(_ r: inout Reactions<Greeter>) {
        r.on(Greet.self, result: { _, m in "Hello, \(m.name)!" })
    }
}

func greetAda() async throws -> String {
    let system = ActorSystem { $0.nodeSingleton("greeter") { Greeter() } }
    defer { system.shutdown() }
    return try await system.actor("greeter")!.ask(Greet(name: "Ada"))
}
// README-EXAMPLE-END

@Suite(.timeLimit(.minutes(5))) struct ReadmeExampleTests {
    @Test func theReadmeExampleRunsAndReadsAsItDoesInTheReadme() async throws {
        #expect(try await greetAda() == "Hello, Ada!")

        // The README shows exactly the code above, so the example compiles.
        let here = #filePath
        let source = try String(contentsOfFile: here, encoding: .utf8)
        let root = here.components(separatedBy: "/Tests/")[0]
        let readme = try String(contentsOfFile: root + "/README.md", encoding: .utf8)
        let example = try #require(between("// README-EXAMPLE-BEGIN\n", "// README-EXAMPLE-END", in: source))
        #expect(readme.contains("```swift\nimport Oscar\n\n" + example + "```"))
    }

    private func between(_ start: String, _ end: String, in text: String) -> String? {
        guard let a = text.range(of: start), let b = text.range(of: end, range: a.upperBound..<text.endIndex)
        else { return nil }
        return String(text[a.upperBound..<b.lowerBound])
    }
}
