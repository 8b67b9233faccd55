import CLibUV
import OscarBase
import OscarCBOR
import OscarRuntime

/// Log lines about events a peer can cause at will (refused connections,
/// failed handshakes, oversized frames before authentication): the first of
/// each second is written at once, the rest are counted and summed up in one
/// line when the second is over, so a flood is visible without flooding the
/// log. Loop-confined (the transport's I/O loop).
final class ThrottledLog {
    private let loop: EventLoop
    private let write: (String) -> Void
    private var windowStart: UInt64 = 0
    private var suppressed = 0
    private var summaryArmed = false
    /// What the suppressed events were about, for the summary line.
    private let what: String

    package static let window: UInt64 = 1_000_000_000

    init(loop: EventLoop, what: String, write: @escaping (String) -> Void) {
        self.loop = loop
        self.what = what
        self.write = write
    }

    func note(_ message: @autoclosure () -> String) {
        let now = uv_hrtime()
        if now - windowStart >= Self.window, !summaryArmed {
            windowStart = now
            write(message())
            return
        }
        suppressed += 1
        guard !summaryArmed else { return }
        summaryArmed = true
        let wait = Self.window - min(Self.window, now - windowStart)
        loop.scheduleTimer(after: .nanoseconds(Int64(wait))) { [weak self] in self?.summarise() }
    }

    private func summarise() {
        summaryArmed = false
        guard suppressed > 0 else { return }
        write("… and \(suppressed) more \(what) in the last second")
        suppressed = 0
        windowStart = uv_hrtime()
    }
}
