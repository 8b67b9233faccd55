import Foundation
import Oscar
import Testing

// The getting-started article (Sources/Oscar/Oscar.docc/GettingStarted.md)
// shows each region between ARTICLE-<NAME>-BEGIN and ARTICLE-<NAME>-END
// verbatim, as one Swift code block; the first block starts with
// `import Oscar` and a blank line. The test below runs the code and checks
// the article still shows it unchanged.

// ARTICLE-REACTOR-BEGIN
struct Deposit: Message {  // no reply type: `Reply` is `Done`
    var amount: Int
}

struct Balance: Message {
    typealias Reply = Int
}

struct Audit: Message {
    typealias Reply = String
    var wallet: ActorRef  // refs are Codable, so messages can carry them
}

final class Wallet: Reactor {
    private var balance = 0

    static func reactions(_ r: inout Reactions<Wallet>) {
        r.on(Deposit.self, do: { me, m in me.balance += m.amount })  // void
        r.on(Balance.self, result: { me, _ in me.balance })  // result
    }
}

final class Auditor: Reactor {
    static func reactions(_ r: inout Reactions<Auditor>) {
        // future: async work, here an ask to another actor. The auditor
        // takes its next message when this one has finished.
        r.on(
            Audit.self,
            future: { _, m in
                let balance = try await m.wallet.ask(Balance())
                return "\(m.wallet.address.path) holds \(balance)"
            })
    }
}
// ARTICLE-REACTOR-END

// ARTICLE-LOCAL-BEGIN
func auditOneWallet() async throws -> String {
    let system = ActorSystem { actors in
        actors.nodeSingleton("wallet") { Wallet() }  // created at its first message
        actors.pool("auditors", size: 2) { Auditor() }  // up to 2, as load needs
    }
    defer { system.shutdown() }

    let wallet = system.actor("wallet")!  // the ref of /user/wallet
    wallet.tell(Deposit(amount: 40))  // one way, never blocks
    wallet.tell(Deposit(amount: 2))
    let auditors = system.actor("auditors")!
    return try await auditors.ask(Audit(wallet: wallet), timeout: .seconds(2))
}
// ARTICLE-LOCAL-END

// ARTICLE-CLUSTER-BEGIN
func depositAcrossNodes(secret: String) async throws -> Int {
    let a = try ClusterNode(settings: .init(host: "127.0.0.1", port: 0, secret: secret)) { actors in
        actors.nodeSingleton("wallet") { Wallet() }
    }
    defer { a.shutdown() }
    let events = a.events  // subscribed before b exists, so its arrival is seen

    let b = try ClusterNode(settings: .init(host: "127.0.0.1", port: 0, secret: secret, seeds: [a.address]))
    defer { b.shutdown() }
    for await case .memberUp(let member) in events where member.node == b.address { break }

    let wallet = b.system.ref("oscar://\(a.address)/user/wallet")!  // a's wallet, seen from b
    wallet.tell(Deposit(amount: 5))
    return try await wallet.ask(Balance(), timeout: .seconds(2))  // 5: FIFO per sender, across nodes too
}
// ARTICLE-CLUSTER-END

@Suite(.timeLimit(.minutes(4))) struct GettingStartedArticleTests {
    @Test func theLocalExampleAuditsTheWalletAfterBothDeposits() async throws {
        #expect(try await auditOneWallet() == "/user/wallet holds 42")
    }

    @Test func twoNodesFormAClusterAndAnAskCrossesIt() async throws {
        #expect(try await depositAcrossNodes(secret: "a-long-cluster-secret") == 5)
    }

    @Test func aSecretUnderSixteenBytesIsRefused() async throws {
        await #expect(throws: (any Error).self) { try await depositAcrossNodes(secret: "too-short") }
    }

    @Test func theArticleShowsTheCodeAboveUnchanged() throws {
        let here = #filePath
        let source = try String(contentsOfFile: here, encoding: .utf8)
        let root = here.components(separatedBy: "/Tests/")[0]
        let article = try String(
            contentsOfFile: root + "/Sources/Oscar/Oscar.docc/GettingStarted.md", encoding: .utf8)
        for (name, prefix) in [("REACTOR", "import Oscar\n\n"), ("LOCAL", ""), ("CLUSTER", "")] {
            let region = try #require(between("// ARTICLE-\(name)-BEGIN\n", "// ARTICLE-\(name)-END", in: source))
            #expect(article.contains("```swift\n" + prefix + region + "```"), "region \(name)")
        }
    }

    private func between(_ start: String, _ end: String, in text: String) -> String? {
        guard let a = text.range(of: start), let b = text.range(of: end, range: a.upperBound..<text.endIndex)
        else { return nil }
        return String(text[a.upperBound..<b.lowerBound])
    }
}
