import Glibc
import Synchronization

/// Where Oscar's own log lines go: a level threshold and a replaceable
/// handler, shaped like swift-log's `Logger` and `LogHandler` so that an
/// application that uses swift-log bridges it in a few lines:
///
/// ```swift
/// struct SwiftLogBridge: OscarLog.Handler {
///     let logger = Logger(label: "oscar")
///     func log(level: OscarLog.Level, message: String, prefix: String) {
///         logger.log(level: level == .debug ? .debug : level == .info ? .info : level == .warning ? .warning : .error,
///                    "\(prefix) \(message)")
///     }
/// }
/// OscarLog.shared.handler = SwiftLogBridge()
/// ```
///
/// Why our own: these machines cannot fetch swift-log, and a library must not
/// make an application take a logging package it does not use. The default
/// handler writes each line in one `write(2)` to standard error, so lines
/// from different threads never interleave.
public final class OscarLog: Sendable {
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

    /// Receives every line at or above the threshold. Called on the thread
    /// that logs (often an event loop): it must not block.
    public protocol Handler: Sendable {
        /// `prefix` is what `setPrefix` set (the node's address in `oscar
        /// node`), empty if nothing was.
        func log(level: Level, message: String, prefix: String)
    }

    /// The process-wide logger the library writes to. Its default threshold
    /// is `.warning`.
    public static let shared = OscarLog(level: .warning)

    private let threshold: Atomic<Int>
    private let state: Mutex<(prefix: String, handler: any Handler)>

    public init(level: Level, handler: any Handler = StandardErrorHandler()) {
        threshold = Atomic(level.rawValue)
        state = Mutex(("", handler))
    }

    /// The lowest level written.
    public var level: Level {
        get { Level(rawValue: threshold.load(ordering: .relaxed)) ?? .info }
        set { threshold.store(newValue.rawValue, ordering: .relaxed) }
    }

    /// Where lines go; replace it to bridge another logging system.
    public var handler: any Handler {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    /// Text put before every line, such as the node's address.
    public func setPrefix(_ text: String) { state.withLock { $0.prefix = text } }

    public func debug(_ message: @autoclosure () -> String) { write(.debug, message) }
    public func info(_ message: @autoclosure () -> String) { write(.info, message) }
    public func warning(_ message: @autoclosure () -> String) { write(.warning, message) }
    public func error(_ message: @autoclosure () -> String) { write(.error, message) }

    private func write(_ level: Level, _ message: () -> String) {
        guard level.rawValue >= threshold.load(ordering: .relaxed) else { return }
        let (prefix, handler) = state.withLock { ($0.prefix, $0.handler) }
        handler.log(level: level, message: message(), prefix: prefix)
    }

    /// The default: `HH:MM:SS.mmm level [prefix] message` on standard error,
    /// one `write(2)` a line.
    public struct StandardErrorHandler: Handler {
        public init() {}

        public func log(level: Level, message: String, prefix: String) {
            var ts = timespec()
            clock_gettime(CLOCK_REALTIME, &ts)
            var tm = tm()
            var seconds = ts.tv_sec
            gmtime_r(&seconds, &tm)
            let time =
                "\(pad(tm.tm_hour)):\(pad(tm.tm_min)):\(pad(tm.tm_sec)).\(pad(Int32(ts.tv_nsec / 1_000_000), width: 3))"
            let line = "\(time) \(level)\(prefix.isEmpty ? "" : " " + prefix) \(message)\n"
            var bytes = Array(line.utf8)
            _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
        }

        private func pad(_ v: Int32, width: Int = 2) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
    }
}
