import Glibc
import OscarBase
import OscarCBOR
import Synchronization

/// The loops of one node. Actors are spread across them round-robin unless
/// placed explicitly.
package final class EventLoopGroup: Sendable {
    public let loops: [EventLoop]
    private let nextIndex = Atomic<Int>(0)

    /// One loop per online core, the default.
    public static var defaultLoopCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// - Parameters:
    ///   - spinBeforeBlock: see `EventLoop`; zero (the default here) blocks
    ///     as soon as a loop is idle.
    ///   - cpus: loop `i` is kept on `cpus[i % cpus.count]`; empty, the
    ///     kernel places them.
    public init(
        loopCount: Int = EventLoopGroup.defaultLoopCount, spinBeforeBlock: Duration = .zero, cpus: [Int] = []
    ) {
        precondition(loopCount > 0, "an EventLoopGroup needs at least one loop")
        loops = (0..<loopCount).map {
            EventLoop(index: $0, spinBeforeBlock: spinBeforeBlock, cpu: cpus.isEmpty ? nil : cpus[$0 % cpus.count])
        }
    }

    /// The next loop, round-robin.
    public func next() -> EventLoop {
        let i = nextIndex.wrappingAdd(1, ordering: .relaxed).oldValue
        return loops[i % loops.count]
    }

    /// Shuts every loop down and joins its thread. Idempotent.
    public func shutdown() {
        for loop in loops { loop.shutdown() }
    }
}
