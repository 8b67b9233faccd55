/// Something a loop runs on its own thread.
///
/// An enum rather than a closure so that the hot cases (an actor ready to run, a
/// Swift concurrency job) cost no allocation to hand over.
enum LoopWork: Sendable {
    case closure(@Sendable () -> Void)
    case runnable(any LoopRunnable)
    case serialJob(UnownedJob)
    case taskJob(UnownedJob)
}

/// An object a loop can run without a closure; actor cells are the main ones.
package protocol LoopRunnable: AnyObject, Sendable {
    /// Runs on the loop's thread.
    func run()
}
