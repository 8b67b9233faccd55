import Dispatch
import Foundation
import Synchronization

/// Independent jobs on one thread per core. The simulator is one thread's
/// work; a search over seeds, or a report's kills and loss runs on copies
/// of one formed cluster, are many such pieces that share nothing, and a
/// two-core machine finishes them in half the time. The workers are
/// threads of their own, not Dispatch's or Swift concurrency's shared
/// ones, which a long run would hold for its whole length.
enum ParallelJobs {
    /// Runs `job(0..<count)` on up to `workers` threads (by default one per
    /// core) and returns the results in job order, whatever order they
    /// finished in. `finished` sees each result as it is known, one at a
    /// time.
    static func run<Result: Sendable>(
        _ count: Int, workers: Int = ProcessInfo.processInfo.activeProcessorCount,
        finished: @escaping @Sendable (Int, Result) -> Void = { _, _ in },
        _ job: @escaping @Sendable (Int) -> Result
    ) -> [Result] {
        let results = Mutex([Result?](repeating: nil, count: count))
        let next = Atomic(0)
        let workers = max(1, min(workers, count))
        let done = DispatchSemaphore(value: 0)
        @Sendable func work() {
            while true {
                let i = next.add(1, ordering: .relaxed).oldValue
                guard i < count else { break }
                let result = job(i)
                results.withLock { r in
                    r[i] = result
                    finished(i, result)
                }
            }
        }
        // The calling thread is one of the workers: what it allocates comes
        // from the heap its earlier work freed (a thread of its own gets
        // another malloc arena, and a 10,000-node run held half a gigabyte
        // more for it).
        for _ in 1..<workers {
            Thread {
                work()
                done.signal()
            }.start()
        }
        work()
        for _ in 1..<workers { done.wait() }
        return results.withLock { $0.compactMap { $0 } }
    }
}
