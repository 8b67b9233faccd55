/// The timers of one actor: which keys are active, and which of their
/// messages are still wanted. It does no I/O: every event returns what to do,
/// and the actor's cell arms and cancels the loop timers it is told to
/// (`TimerBook<TimerKey, any Message, LoopTimer>`). Tests drive it with plain
/// values.
///
/// Invariants:
/// - Each start of a timer gets a generation, never reused by this actor;
///   the timer's messages carry it. A message is delivered only while its key
///   still has that generation, so a message of a timer that was cancelled or
///   replaced is dropped, even one already in the mailbox.
/// - At most one message of a timer is armed, queued or being handled at a
///   time. A periodic timer arms its next message only when the reaction to
///   the previous one has ended (fixed delay), so a slow actor never finds
///   a pile of them in its mailbox.
/// - A key is active from its start until it is cancelled or replaced, or,
///   for a single timer, until its message is taken for handling.
struct TimerBook<Key: Hashable, Letter, Handle> {
    enum Mode: Equatable {
        /// One message, then the timer is done.
        case single
        /// A message, then another `delay` after each reaction to it ends.
        case fixedDelay(Duration)
    }

    /// What the owner of the loop timers does.
    enum Directive {
        /// Arms a loop timer that, after `delay`, reports `fired(key, generation:)`.
        case arm(Key, generation: UInt64, after: Duration, Letter)
        /// Cancels a loop timer that has not fired.
        case cancel(Handle)
    }

    /// What to do with a timer's message taken from the mailbox.
    enum Taken: Equatable {
        /// Its timer was cancelled or replaced: drop it, unseen.
        case drop
        /// Handle it; when `periodic`, report `handled(key, generation:)`
        /// once its reaction has ended.
        case deliver(periodic: Bool)
    }

    private struct Timer {
        var generation: UInt64
        var mode: Mode
        var payload: Letter
        /// The armed loop timer; nil while its message is queued or handled.
        var handle: Handle?
    }

    private var timers: [Key: Timer] = [:]
    private var lastGeneration: UInt64 = 0

    /// How many timers are active.
    var count: Int { timers.count }

    func isActive(_ key: Key) -> Bool { timers[key] != nil }

    /// Starts the timer `key`, replacing the one of that key if any.
    mutating func start(_ key: Key, mode: Mode, payload: Letter, initialDelay: Duration) -> [Directive] {
        var directives: [Directive] = []
        if let handle = timers[key]?.handle { directives.append(.cancel(handle)) }
        // 2^64 starts would take centuries of starting one per nanosecond.
        lastGeneration &+= 1
        timers[key] = Timer(generation: lastGeneration, mode: mode, payload: payload)
        directives.append(.arm(key, generation: lastGeneration, after: initialDelay, payload))
        return directives
    }

    /// The loop timer for an `.arm` directive exists; it is cancelled if its
    /// timer has changed since (returned as a directive).
    mutating func armed(_ key: Key, generation: UInt64, handle: Handle) -> Directive? {
        guard timers[key]?.generation == generation else { return .cancel(handle) }
        timers[key]?.handle = handle
        return nil
    }

    mutating func cancel(_ key: Key) -> Directive? {
        timers.removeValue(forKey: key)?.handle.map(Directive.cancel)
    }

    mutating func cancelAll() -> [Directive] {
        defer { timers.removeAll() }
        return timers.values.compactMap { $0.handle.map(Directive.cancel) }
    }

    /// A loop timer fired: true when its message is to go into the mailbox.
    mutating func fired(_ key: Key, generation: UInt64) -> Bool {
        guard timers[key]?.generation == generation else { return false }
        timers[key]?.handle = nil
        return true
    }

    /// A timer's message is taken from the mailbox.
    mutating func taken(_ key: Key, generation: UInt64) -> Taken {
        guard let timer = timers[key], timer.generation == generation else { return .drop }
        switch timer.mode {
        case .single:
            timers.removeValue(forKey: key)
            return .deliver(periodic: false)
        case .fixedDelay:
            return .deliver(periodic: true)
        }
    }

    /// The reaction to a periodic timer's message has ended: arms the next
    /// one, unless the reaction cancelled or replaced the timer.
    mutating func handled(_ key: Key, generation: UInt64) -> Directive? {
        guard let timer = timers[key], timer.generation == generation, timer.handle == nil,
            case .fixedDelay(let delay) = timer.mode
        else { return nil }
        return .arm(key, generation: generation, after: delay, timer.payload)
    }
}
