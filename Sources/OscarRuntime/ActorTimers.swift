extension ActorContext {
    /// This actor's timers: messages it sends itself later, once or repeatedly.
    public var timers: Timers { Timers(cell: cell) }

    /// Timers that send the actor a message of its own, by key, as Akka's
    /// `TimerScheduler` does.
    ///
    /// ```swift
    /// context.timers.startSingle("retry", sending: Retry(), after: .seconds(1))
    /// context.timers.startWithFixedDelay("report", sending: Report(), delay: .seconds(5))
    /// context.timers.cancel("retry")
    /// ```
    ///
    /// - **Keys.** Any `Hashable & Sendable` value (a string, an enum case),
    ///   compared as `AnyHashable`. Starting a timer with the key of an active
    ///   one replaces it.
    /// - **Cancelled means never handled.** A message of a timer that was
    ///   cancelled or replaced is never handled, even one already in the
    ///   mailbox: each start has a generation, and a message whose timer has
    ///   moved on is dropped when the actor takes it (no dead letter).
    /// - **Fixed delay.** A periodic timer sends its next message `delay`
    ///   after the reaction to the previous one has ended, so at most one of
    ///   its messages waits in the mailbox however slow the actor is. Its
    ///   period is the delay plus the reaction's time.
    /// - **Lifetime.** A timer is active from its start until it is cancelled
    ///   or replaced; a single timer also until its message is taken for
    ///   handling. Every timer ends when the actor stops or restarts.
    /// - **Its loop only.** The timers run on the actor's loop, as its
    ///   reactions do. Call these from its reactions and `started(_:)`;
    ///   calling them on another thread is a bug, and traps.
    ///
    /// A timer's message is a tell: nothing answers it. One that the actor
    /// stashes is an ordinary message from then on.
    public struct Timers: Sendable {
        let cell: ActorCell

        /// Sends `message` to the actor once, after `delay`.
        public func startSingle(_ key: some Hashable & Sendable, sending message: some Message, after delay: Duration) {
            cell.startTimer(TimerKey(key), message, mode: .single, initialDelay: delay)
        }

        /// Sends `message` to the actor after `initialDelay` (by default
        /// `delay`), then again `delay` after each reaction to it has ended.
        public func startWithFixedDelay(
            _ key: some Hashable & Sendable, sending message: some Message, delay: Duration,
            initialDelay: Duration? = nil
        ) {
            cell.startTimer(TimerKey(key), message, mode: .fixedDelay(delay), initialDelay: initialDelay ?? delay)
        }

        /// True while the timer `key` may still send a message.
        public func isActive(_ key: some Hashable & Sendable) -> Bool {
            cell.checkTimerThread()
            return cell.timerBook.isActive(TimerKey(key))
        }

        /// Cancels the timer `key`; its message will not be handled, even if
        /// it is already queued. Does nothing for a key that is not active.
        public func cancel(_ key: some Hashable & Sendable) {
            cell.checkTimerThread()
            cell.perform(cell.timerBook.cancel(TimerKey(key)))
        }

        /// Cancels every timer of the actor.
        public func cancelAll() {
            cell.checkTimerThread()
            cell.stopTimers()
        }
    }
}

/// A timer's key, as the user gave it. Unchecked because `AnyHashable` is
/// not `Sendable`: every key is made from a `Sendable` value, below.
struct TimerKey: Hashable, @unchecked Sendable {
    let value: AnyHashable
    init(_ key: some Hashable & Sendable) { value = AnyHashable(key) }
}

/// The periodic timer whose message is being handled. A class: every
/// reaction's end asks whether there is one, and an optional reference
/// answers with a pointer test, where an optional holding a `TimerKey`
/// (an `AnyHashable`, whose layout the standard library keeps opaque)
/// needs a call through its value witnesses on every message.
final class TickInFlight {
    let key: TimerKey
    let generation: UInt64
    init(key: TimerKey, generation: UInt64) {
        self.key = key
        self.generation = generation
    }
}

// MARK: - The cell's side

extension ActorCell {
    typealias TimerDirective = TimerBook<TimerKey, any Message, LoopTimer>.Directive

    /// Timers are loop-confined (`ActorContext.Timers` says so); a call from
    /// another thread is a bug in the actor, caught here.
    func checkTimerThread() {
        precondition(onOwnThread, "\(address): timers are used only on the actor's loop (in its reactions)")
    }

    func startTimer(
        _ key: TimerKey, _ message: any Message, mode: TimerBook<TimerKey, any Message, LoopTimer>.Mode,
        initialDelay: Duration
    ) {
        checkTimerThread()
        // A retired instance (stopped, restarting) starts nothing; after
        // shutdown there is no loop to run a timer.
        guard acceptsTimers, loop.inEventLoop else { return }
        for directive in timerBook.start(key, mode: mode, payload: message, initialDelay: initialDelay) {
            perform(directive)
        }
    }

    /// Cancels every timer; their queued messages will be dropped.
    func stopTimers() {
        tickInFlight = nil
        for directive in timerBook.cancelAll() { perform(directive) }
    }

    /// Called when the reaction to a periodic timer's message has ended.
    func timerHandled(_ key: TimerKey, generation: UInt64) {
        guard acceptsTimers, loop.inEventLoop else { return }
        perform(timerBook.handled(key, generation: generation))
    }

    func perform(_ directive: TimerDirective?) {
        switch directive {
        case nil: break
        case .cancel(let timer):
            // After shutdown the loop has cancelled its timers already.
            if loop.inEventLoop { loop.cancelTimer(timer) }
        case .arm(let key, let generation, let delay, let message):
            let timer = loop.scheduleTimer(after: delay) { [weak self] in
                self?.timerFired(key, generation: generation, message)
            }
            perform(timerBook.armed(key, generation: generation, handle: timer))
        }
    }

    private func timerFired(_ key: TimerKey, generation: UInt64, _ message: any Message) {
        guard acceptsTimers, timerBook.fired(key, generation: generation) else { return }
        enqueueOwn(.tick(message, key: key, generation: generation))
    }
}
