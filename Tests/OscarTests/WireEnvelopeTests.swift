import Oscar
import Testing

@testable import OscarRemote

@Suite(.timeLimit(.minutes(1))) struct WireEnvelopeTests {
    /// A frame encoded off the loop with correlation 0 and given its
    /// correlation there is the frame the loop would have encoded, and the
    /// parser reads it back, whatever the kind, correlation, names, payload,
    /// and where in the batch it sits.
    @Test func aCorrelationSetLaterGivesTheSameFrame() {
        var random = SplitMix64(seed: 20_261_203)
        let kinds: [WireKind] = [.tell, .ask, .reply, .failure]
        for _ in 0..<500 {
            let kind = kinds[Int.random(in: 0..<kinds.count, using: &random)]
            let correlation = UInt64.random(in: 0...UInt64.max, using: &random)
            let recipient = "/user/" + String(repeating: "r", count: Int.random(in: 0...40, using: &random))
            let manifest = String(repeating: "m", count: Int.random(in: 0...40, using: &random))
            let payload = (0..<Int.random(in: 0...300, using: &random)).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
            let before = (0..<Int.random(in: 0...50, using: &random)).map { _ in UInt8(7) }
            var direct = before
            WireEnvelope.append(
                to: &direct, kind: kind, correlation: correlation, recipient: recipient, manifest: manifest
            ) { $0.append(contentsOf: payload) }
            var later = before
            WireEnvelope.append(to: &later, kind: kind, recipient: recipient, manifest: manifest) {
                $0.append(contentsOf: payload)
            }
            WireEnvelope.setCorrelation(correlation, kind: kind, in: &later, frameAt: before.count)
            #expect(later == direct, "\(kind) \(correlation)")
            // And the parser, which reads the header on its own, reads the
            // frame back as written.
            let body = Array(later[(before.count + 4)...])
            let parsed = body.withUnsafeBytes { try? WireEnvelope.parse($0) }
            #expect(parsed?.kind == kind)
            #expect(parsed?.correlation == (WireEnvelope.hasCorrelation(kind) ? correlation : 0))
            #expect(parsed.map { Array(body[$0.payload]) } == payload)
            if WireEnvelope.hasRecipient(kind) {
                #expect(parsed.map { Array(body[$0.recipient]) } == Array(recipient.utf8))
                #expect(parsed.map { Array(body[$0.manifest]) } == Array(manifest.utf8))
            }
        }
    }
}
