import Glibc
import Synchronization

/// A small leveled logger: one line per event on standard error.
///
/// Why our own: these machines cannot fetch swift-log. Each line goes out in one
/// `write(2)`, so lines from different threads never interleave.
public final class Log: Sendable {
    public enum Level: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
        case debug, info, warning, error, off

        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }

        public var description: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            case .off: "off"
            }
        }
    }

    /// The process-wide logger.
    public static let shared = Log(level: .warning)

    private let threshold: Atomic<Int>
    private let prefix = Mutex("")

    public init(level: Level) { threshold = Atomic(level.rawValue) }

    /// The lowest level written.
    public var level: Level {
        get { Level(rawValue: threshold.load(ordering: .relaxed)) ?? .info }
        set { threshold.store(newValue.rawValue, ordering: .relaxed) }
    }

    /// Text put before every line, such as the node's address.
    public func setPrefix(_ text: String) { prefix.withLock { $0 = text } }

    public func debug(_ message: @autoclosure () -> String) { write(.debug, message) }
    public func info(_ message: @autoclosure () -> String) { write(.info, message) }
    public func warning(_ message: @autoclosure () -> String) { write(.warning, message) }
    public func error(_ message: @autoclosure () -> String) { write(.error, message) }

    private func write(_ level: Level, _ message: () -> String) {
        guard level.rawValue >= threshold.load(ordering: .relaxed) else { return }
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var tm = tm()
        var seconds = ts.tv_sec
        gmtime_r(&seconds, &tm)
        let time =
            "\(pad(tm.tm_hour)):\(pad(tm.tm_min)):\(pad(tm.tm_sec)).\(pad(Int32(ts.tv_nsec / 1_000_000), width: 3))"
        let p = prefix.withLock { $0 }
        let line = "\(time) \(level)\(p.isEmpty ? "" : " " + p) \(message())\n"
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }

    private func pad(_ v: Int32, width: Int = 2) -> String {
        let s = String(v)
        return String(repeating: "0", count: max(0, width - s.count)) + s
    }
}
