import Foundation
import Oscar
import Testing

@testable import OscarDistributed

/// docs/PROTOCOL.md shows these bytes; the test keeps the document true.
@Suite(.timeLimit(.minutes(5))) struct ProtocolDocTests {
    struct Echo: Message {
        typealias Reply = String
        var text: String
    }

    @Test func theWorkedAskFrameIsWhatTheEncoderProduces() throws {
        var frame: [UInt8] = []
        try WireEnvelope.append(to: &frame, kind: .ask, correlation: 1, recipient: "/user/echo", manifest: "Echo") {
            (out: inout [UInt8]) throws(CBORError) in
            try CBOREncoder().encode(Echo(text: "hi"), appendingTo: &out)
        }
        let hex = Hex.string(frame)
        #expect(
            hex == "00000025" + "02" + "00" + "0000000000000001" + "000a2f757365722f6563686f" + "00044563686f"
                + "a164746578746268" + "69")
        let doc = try String(contentsOfFile: Self.root + "/docs/PROTOCOL.md", encoding: .utf8)
        #expect(doc.replacingOccurrences(of: " ", with: "").contains(hex))
    }

    @Test func theWorkedReplyFrameIsWhatTheEncoderProduces() throws {
        var frame: [UInt8] = []
        WireEnvelope.append(to: &frame, kind: .reply, correlation: 1) {
            $0.append(contentsOf: CBORValue.text("hi").cbor)
        }
        let hex = Hex.string(frame)
        #expect(hex == "0000000d" + "03" + "00" + "0000000000000001" + "626869")
        let doc = try String(contentsOfFile: Self.root + "/docs/PROTOCOL.md", encoding: .utf8)
        #expect(doc.replacingOccurrences(of: " ", with: "").contains(hex))
    }

    @Test func theWorkedDistributedCallIsWhatTheEncoderProduces() throws {
        let call = DistributedCall(target: "greet", arguments: RawCBOR(bytes: CBORValue.array([.text("hi")]).cbor))
        let payload = Hex.string(try CBOREncoder().encode(call))
        let reply = Hex.string(try CBOREncoder().encode(ReturnedValue(value: "hi")))
        #expect(payload == "836567726565748081626869")
        #expect(reply == "8200626869")
        let doc = try String(contentsOfFile: Self.root + "/docs/PROTOCOL.md", encoding: .utf8)
            .replacingOccurrences(of: " ", with: "")
        #expect(doc.contains(payload) && doc.contains(reply))
    }

    static var root: String { #filePath.components(separatedBy: "/Tests/")[0] }
}
