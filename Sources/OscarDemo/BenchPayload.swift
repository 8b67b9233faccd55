import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime
import OscarTestKit

/// The workloads' one small message: an integer and a 16-byte string
/// (docs/BENCHMARKS.md, "The workloads").
public struct Payload: Message {
    public var i: Int64
    public var s: String

    /// Exactly 16 ASCII bytes, one over Swift's small-string limit, as in every peer.
    public static let text = "abcdefghijklmnop"

    public init(i: Int64, s: String = Payload.text) {
        self.i = i
        self.s = s
    }
}

/// Replies with the number of `Payload` tells received, then resets it.
public struct Flush: Message {
    public typealias Reply = Int64
    public init() {}
}

/// One line of benchmark output: `peer metric value unit`.
public struct BenchFigure: Codable, Sendable, CustomStringConvertible {
    /// The first column: `oscar`, or `oscar-distributed` for the
    /// distributed-actor variant of a workload.
    public var name = "oscar"
    public var metric: String
    public var value: Double
    public var unit: String

    public init(metric: String, value: Double, unit: String) {
        self.metric = metric
        self.value = value
        self.unit = unit
    }

    public var description: String {
        let formatted =
            value >= 1000 || value == value.rounded() ? String(Int(value.rounded())) : String(format2(value))
        return "\(name) \(metric) \(formatted) \(unit)"
    }

    private func format2(_ v: Double) -> String {
        let scaled = (v * 100).rounded() / 100
        return String(scaled)
    }
}
