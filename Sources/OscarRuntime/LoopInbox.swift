import CLibUV
import OscarBase
import OscarCBOR
import Synchronization

/// The multi-producer, single-consumer queue through which other threads hand
/// work to a loop.
///
/// Why this shape: `uv_async_send` coalesces wake-ups, so the consumer always
/// drains everything; and a producer asks for a wake-up only when the inbox goes
/// from empty to non-empty, so a burst of sends costs one syscall.
///
/// A class rather than a `~Copyable` struct: Swift 6.3.1 crashes compiling a
/// `Mutex` over a private nested type inside a noncopyable struct.
final class LoopInbox: Sendable {
    package struct State {
        package var items: [LoopWork] = []
        package var closed = false
    }

    private let state = Mutex(State())

    /// Appends `work`; calls `wake` (under the lock, so the loop cannot close
    /// its wake-up handle meanwhile) when the inbox was empty. Returns false,
    /// dropping the work, once the inbox is closed.
    package func push(_ work: LoopWork, wake: () -> Void) -> Bool {
        state.withLock { s in
            if s.closed { return false }
            s.items.append(work)
            if s.items.count == 1 { wake() }
            return true
        }
    }

    /// Swaps the pending work into `batch` (which must be empty); keeps both
    /// arrays' capacity so a steady stream allocates nothing.
    package func drain(into batch: inout [LoopWork]) {
        state.withLock { s in swap(&s.items, &batch) }
    }

    /// Refuses all further pushes and returns what was still pending.
    package func close() -> [LoopWork] {
        state.withLock { s in
            s.closed = true
            defer { s.items = [] }
            return s.items
        }
    }
}
