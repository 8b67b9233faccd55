import OscarBase
import OscarCBOR
import Synchronization

/// The runtime half of one actor: its mailbox, its place on a loop, and the
/// rule that it handles one message at a time.
///
/// Invariants:
/// - Everything but `remote`, `queued` and `active` is touched only on `loop`.
/// - FIFO per sender: a sender on this loop appends to `local` (or, when the
///   actor is idle with an empty mailbox, hands the message over directly); a
///   sender elsewhere appends to `remote`, drained into `local` in order.
/// - At most `capacity` messages wait; beyond that a message is refused
///   (a tell becomes a dead letter, an ask fails with `mailboxFull`), never
///   accepted and then dropped.
/// - A reaction that throws is supervised by `supervisor` once it has ended:
///   the actor resumes, restarts (status `restarting` while it backs off; the
///   mailbox keeps filling and nothing is handled), or stops. The failed
///   message itself is never handled again.
/// - Timers and the stash (ActorTimers.swift, ActorStash.swift) end with the
///   instance: a stop or restart cancels every timer and drops their queued
///   messages. Stashed messages go back to the front of the mailbox on a
///   restart, and are refused like the mailbox's own on a stop.
@usableFromInline
package final class ActorCell: Watchable, LoopRunnable, @unchecked Sendable {
    enum Status { case idle, running, suspended, restarting, stopped }

    struct RemoteQueue {
        package var items: [MailboxEntry] = []
        var wakePending = false
        package var closed = false
    }

    package let address: ActorAddress
    package let loop: EventLoop
    package let capacity: Int
    package weak var system: ActorSystem?

    // MARK: Loop-confined
    // Fields read on every message skip the runtime's exclusivity checks
    // (a quarter of a local tell's cost on W4): they are loop-confined, and
    // every access is a short read or write that spans no call back into
    // the cell (a nested send appends to `local` after `popFirst` returned).
    private var factory: (@Sendable () -> AnyReactorBox)?
    @exclusivity(unchecked) private var box: AnyReactorBox?
    @exclusivity(unchecked) private var status = Status.idle
    @exclusivity(unchecked) private var local = RingBuffer<MailboxEntry>()
    @exclusivity(unchecked) private var stopRequested = false
    @exclusivity(unchecked) private var scheduled = false
    private var watchers: [ActorRef] = []
    private var supervisor: Supervisor
    private var restartTimer: LoopTimer?

    // MARK: Loop-confined: timers and stash
    /// This actor's timers (ActorTimers.swift).
    var timerBook = TimerBook<TimerKey, any Message, LoopTimer>()
    /// The periodic timer whose message is being handled: its next message
    /// is armed when the reaction ends.
    @exclusivity(unchecked) var tickInFlight: TickInFlight?
    /// Messages set aside by `stash()`; its capacity is the reactor type's.
    var stash = StashBuffer<MailboxEntry>(capacity: 0)
    /// Set by `stash()` in a reaction: the reaction's message goes to the
    /// stash when the reaction returns, and is not answered. Read by every
    /// reaction (inlined into the application's module), so a plain field.
    @exclusivity(unchecked) @usableFromInline var stashRequested = false
    /// True while `started(_:)` runs, when no message is being handled.
    private var startingInstance = false

    // MARK: Cross-thread
    private let remote = Mutex(RemoteQueue())
    /// Messages accepted and not yet taken for processing; bounds the mailbox.
    private let queued = Atomic<Int>(0)
    /// True while a reaction runs or is suspended, or the actor restarts.
    private let active = Atomic<Bool>(false)
    /// Set once the actor has stopped and its name is free again; pools
    /// replace or skip such a routee.
    private let stoppedForGood = Atomic<Bool>(false)

    /// Most reactions nested through direct hand-off on one loop; past it,
    /// messages are queued, so a long chain of idle actors cannot exhaust the stack.
    static let maxHandOffDepth = 32
    /// Messages handled per turn before the actor yields its loop to others.
    package static let throughput = 256

    package init(
        address: ActorAddress, loop: EventLoop, capacity: Int, system: ActorSystem?,
        supervision: SupervisionStrategy = .default, factory: @escaping @Sendable () -> AnyReactorBox
    ) {
        self.address = address
        self.loop = loop
        self.capacity = capacity
        self.system = system
        self.factory = factory
        self.supervisor = Supervisor(supervision)
        self.decoder = system?.decoder ?? CBORDecoder()
    }

    /// How busy the actor is, readable from any thread: queued messages, plus
    /// one while a reaction is running. Pools route by it.
    package var load: Int { queued.load(ordering: .relaxed) + (active.load(ordering: .relaxed) ? 1 : 0) }

    package var ref: ActorRef { ActorRef(address: address, target: self) }

    /// A finished reaction's reply, when it was asked for. The actor is
    /// marked free first: the asker may act on the reply (ask again) before
    /// this reaction's bookkeeping ends, and a pool routing that next ask
    /// must already see this actor free, or asks made one after another
    /// would grow the pool.
    @inlinable package func answer<R: Encodable & Sendable>(_ reply: (any ReplyTarget)?, with value: R) {
        guard let reply else { return }
        freeBeforeReply()
        reply.succeed(value)
    }

    /// Only the `load` hint changes: `beginReaction` sets it again for the
    /// next message, and queued messages count in `load` on their own.
    @usableFromInline package func freeBeforeReply() {
        if loop.inEventLoop, local.isEmpty, !stopRequested { active.store(false, ordering: .relaxed) }
    }

    /// True once the actor has stopped for good (readable from any thread).
    package var isTerminated: Bool { stoppedForGood.load(ordering: .acquiring) }

    // MARK: - Delivery

    /// Inlinable, so that a sender's module specializes the hand-off for its
    /// message type (`ActorRef.deliver`); what does not depend on the type
    /// stays out of line.
    @inlinable package func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        if let box = beginHandOff(reply: reply) {
            // Direct hand-off: the actor is idle and nothing waits before this
            // message, so handling it now is exactly what the mailbox would do next.
            let outcome = ErasedMessage.lend(message) { box.receive($0, reply: reply, cell: self) }
            endHandOff(outcome, manifest: { M.manifest }, reply: reply)
        } else {
            enqueue(message, reply: reply)
        }
    }

    /// Starts handling a message at once, when the actor can take it now:
    /// returns its instance's box (and one hand-off level entered), or nil.
    @usableFromInline func beginHandOff(reply: (any ReplyTarget)?) -> AnyReactorBox? {
        enterHandOff(reply: reply) ? beginReaction() : nil
    }

    /// True (one hand-off level entered, the reply armed) when a message
    /// may be handled at once on this thread: the actor is idle and nothing
    /// waits before it. The caller must then `exitHandOff`.
    private func enterHandOff(reply: (any ReplyTarget)?) -> Bool {
        guard loop.inEventLoop, status == .idle, local.isEmpty, loop.enterHandOff(limit: Self.maxHandOffDepth)
        else { return false }
        reply?.arm(on: loop)
        return true
    }

    /// Ends what `beginHandOff` began.
    @usableFromInline func endHandOff(
        _ outcome: ReactionOutcome?, manifest: () -> String, reply: (any ReplyTarget)?
    ) {
        endReaction(outcome, manifest: manifest(), reply: reply)
        loop.exitHandOff()
    }

    /// The mailbox path, out of line.
    @usableFromInline func enqueue<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        enqueue(.message(message, reply: reply))
    }

    /// Delivers a message that arrived from another node, still encoded. The
    /// bytes are only borrowed: they are decoded in place when the actor can
    /// take the message now, and copied into the mailbox otherwise.
    @usableFromInline package func deliverEncoded(manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?) {
        if enterHandOff(reply: reply) {
            handleEncoded(manifest: manifest, payload: payload, reply: reply)
            loop.exitHandOff()
        } else {
            enqueue(.encoded(manifest: manifest.copiedBytes, payload: payload.copiedBytes, reply: reply))
        }
    }

    private func enqueue(_ entry: MailboxEntry) {
        if loop.inEventLoop {
            if status == .stopped {
                refuse(entry, .stopped(address))
                return
            }
            guard admit() else {
                refuse(entry, .mailboxFull(address))
                return
            }
            entry.reply?.arm(on: loop)
            local.append(entry)
            if status == .idle { scheduleSelf() }
            return
        }
        guard admit() else {
            refuse(entry, .mailboxFull(address))
            return
        }
        let (accepted, wake) = remote.withLock { q -> (Bool, Bool) in
            if q.closed { return (false, false) }
            q.items.append(entry)
            if q.wakePending { return (true, false) }
            q.wakePending = true
            return (true, true)
        }
        if !accepted {
            queued.wrappingSubtract(1, ordering: .relaxed)
            refuse(entry, .stopped(address))
        } else if wake, !loop.submit(.runnable(self)) {
            // The loop has shut down: nothing will ever drain this mailbox.
            for waiting in closeRemote() { refuse(waiting, .stopped(address)) }
        }
    }

    /// Reserves a place in the mailbox, or returns false when it is full.
    @inline(__always)
    private func admit() -> Bool {
        if queued.wrappingAdd(1, ordering: .relaxed).newValue <= capacity { return true }
        queued.wrappingSubtract(1, ordering: .relaxed)
        return false
    }

    /// Fails a message that was not (or can no longer be) handled: an ask gets
    /// `error`, a tell becomes a dead letter.
    private func refuse(_ entry: MailboxEntry, _ error: AskError) {
        refuse(manifest: entry.manifest, reply: entry.reply, error)
    }

    private func refuse(manifest: @autoclosure () -> String, reply: (any ReplyTarget)?, _ error: AskError) {
        refuseMessage(reply, manifest: manifest(), to: address, error, in: system)
    }

    // MARK: - Running

    package func run() {
        scheduled = false
        drainRemote()
        switch status {
        case .stopped: failWaiting()
        case .running, .suspended, .restarting: break  // resumes when the reaction or restart ends
        case .idle: processMailbox()
        }
    }

    private func scheduleSelf() {
        guard !scheduled else { return }
        scheduled = true
        loop.schedule(self)
    }

    private func drainRemote() {
        let items = remote.withLock { q -> [MailboxEntry] in
            q.wakePending = false
            defer { q.items.removeAll(keepingCapacity: true) }
            return q.items
        }
        for entry in items {
            entry.reply?.arm(on: loop)
            local.append(entry)
        }
    }

    private func processMailbox() {
        var budget = Self.throughput
        while status == .idle, budget > 0, let entry = local.popFirst() {
            queued.wrappingSubtract(1, ordering: .relaxed)
            budget -= 1
            switch entry {
            case .message(let message, let reply):
                handle(opening: message, reply: reply)
            case .encoded(let manifest, let payload, let reply):
                handleEncoded(manifest: manifest.span.bytes, payload: payload.span.bytes, reply: reply)
            case .tick(let message, let key, let generation):
                switch timerBook.taken(key, generation: generation) {
                case .drop: continue
                case .deliver(let periodic):
                    if periodic { tickInFlight = TickInFlight(key: key, generation: generation) }
                    handle(opening: message, reply: nil)
                }
            }
        }
        if status == .idle, !local.isEmpty { scheduleSelf() }
    }

    private func handle(opening message: some Message, reply: (any ReplyTarget)?) {
        handle(message, reply: reply)
    }

    /// Runs one message's reaction. Status is idle on entry.
    @inline(__always)
    private func handle<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        let box = beginReaction()
        let outcome = ErasedMessage.lend(message) { box.receive($0, reply: reply, cell: self) }
        endReaction(outcome, manifest: M.manifest, reply: reply)
    }

    private func handleEncoded(manifest: RawSpan, payload: RawSpan, reply: (any ReplyTarget)?) {
        let box = beginReaction()
        let outcome = box.receive(manifest: manifest, payload: payload, reply: reply, cell: self)
        endReaction(outcome, manifest: manifest.utf8Text, reply: reply)
    }

    @inline(__always)
    private func beginReaction() -> AnyReactorBox {
        status = .running
        active.store(true, ordering: .relaxed)
        return box ?? start()
    }

    @inline(__always)
    private func endReaction(
        _ outcome: ReactionOutcome?, manifest: @autoclosure () -> String, reply: (any ReplyTarget)?
    ) {
        switch outcome {
        case .finished: reactionEnded()
        case .failed: reactionEnded(failed: true)
        case .suspended: status = .suspended
        case nil:
            if manifest() == Identify.manifest {
                reply?.succeed(address)
            } else {
                refuse(manifest: manifest(), reply: reply, .unhandled(manifest: manifest(), address))
            }
            reactionEnded()
        }
    }

    private func reactionEnded(failed: Bool = false) {
        status = .idle
        if stopRequested {
            finishStop()
            return
        }
        if failed {
            switch supervisor.onFailure(at: .nanoseconds(Int64(clamping: MonotonicTime.now()))) {
            case .resume: break
            case .stop:
                OscarLog.shared.warning(
                    supervisor.strategy == .stop
                        ? "\(address): stopping after a failed reaction (supervision: stop)"
                        : "\(address): stopping after a failed reaction: its restart limit is spent (supervision: \(supervisor.strategy))"
                )
                finishStop()
                return
            case .restart(let delay):
                beginRestart(after: delay)
                return
            }
        }
        if let tick = tickInFlight {
            tickInFlight = nil
            timerHandled(tick.key, generation: tick.generation)
        }
        if local.isEmpty {
            active.store(false, ordering: .relaxed)
        } else {
            scheduleSelf()
        }
    }

    /// Called by a future reaction's task when it ends; `failed` when it threw.
    func futureFinished(failed: Bool = false) {
        if loop.inEventLoop || AfterShutdown.isCurrent {
            // After shutdown the loop is gone and this runs on the one serial
            // after-shutdown queue: nothing else touches the cell.
            reactionEnded(failed: failed)
        } else if !loop.execute({ self.futureFinished(failed: failed) }) {
            AfterShutdown.queue.async { self.reactionEnded(failed: failed) }
        }
    }

    /// Makes an instance and starts it. After a stop there is no factory, and
    /// an empty box (no reactions) stands in: nothing is ever handled by it.
    private func start() -> AnyReactorBox {
        let box = factory?() ?? AnyReactorBox()
        // A restartable actor keeps its factory for the next fresh instance.
        if !supervisor.strategy.restarts { factory = nil }
        self.box = box
        stash.capacity = box.stashCapacity
        if let system {
            startingInstance = true
            box.start(ActorContext(cell: self, system: system))
            startingInstance = false
        }
        return box
    }

    /// Creates the instance now if it was not yet (used for eager start).
    package func startIfNeeded() {
        loop.preconditionInEventLoop()
        if box == nil, status != .stopped, status != .restarting { _ = start() }
    }

    // MARK: - Restarting

    /// Retires the failed instance at once and makes a fresh one after
    /// `delay`. Messages keep arriving in the mailbox meanwhile; none is lost
    /// or handled twice, because none is taken while `restarting`.
    private func beginRestart(after delay: Duration) {
        status = .restarting
        box?.stop()
        box = nil
        stopTimers()
        putBack(stash.takeAll())
        guard loop.inEventLoop else {
            // After shutdown there is no loop to restart on.
            finishStop()
            return
        }
        OscarLog.shared.warning("\(address): restarting in \(delay) after a failed reaction (supervision: restart)")
        restartTimer = loop.scheduleTimer(after: delay) { [weak self] in self?.finishRestart() }
    }

    private func finishRestart() {
        restartTimer = nil
        guard status == .restarting else { return }
        status = .idle
        if stopRequested {
            finishStop()
            return
        }
        _ = start()
        if local.isEmpty { active.store(false, ordering: .relaxed) }
        // Drains what other threads sent during the backoff, then handles it.
        scheduleSelf()
    }

    // MARK: - Timers and stash: the mailbox side

    /// True on the thread that may touch the cell: its loop, or after
    /// shutdown the one after-shutdown queue.
    var onOwnThread: Bool { loop.inEventLoop || AfterShutdown.isCurrent }

    /// True while a reaction runs (or is suspended): `stash()` has a message.
    var isHandlingMessage: Bool { (status == .running || status == .suspended) && !startingInstance }

    /// True until the instance is retired (stopping, restarting): its
    /// timers may run.
    var acceptsTimers: Bool { status != .stopped && status != .restarting && !stopRequested }

    /// Queues a message the actor sends itself (a timer's): last in the
    /// mailbox, always accepted (at most one per timer is queued).
    func enqueueOwn(_ entry: MailboxEntry) {
        queued.wrappingAdd(1, ordering: .relaxed)
        local.append(entry)
        if status == .idle { scheduleSelf() }
    }

    /// Puts messages back at the front of the mailbox, in their order, before
    /// everything queued now. They were accepted once, so they are not
    /// refused now, even beyond the mailbox's capacity.
    func putBack(_ entries: [MailboxEntry]) {
        guard !entries.isEmpty else { return }
        queued.wrappingAdd(entries.count, ordering: .relaxed)
        local.prepend(contentsOf: entries)
        if status == .idle { scheduleSelf() }
    }

    // MARK: - Failures

    /// The decoder for messages that arrive encoded: refs inside them resolve
    /// against this actor's system. Kept here, not fetched through the weak
    /// `system` per message.
    @usableFromInline package let decoder: CBORDecoder
    /// Reused for every message this actor decodes (loop-confined; a cell
    /// decodes one message at a time).
    @usableFromInline lazy var decoding = CBORDecoding(reusableWith: decoder.userInfo)

    /// Inlinable, as the codec's entry point is: a reaction's decode is
    /// specialized for its message where the reaction is declared.
    @inlinable
    package func decode<M: Message>(_ type: M.Type, from payload: RawSpan) throws(CBORError) -> M {
        try decoder.decode(type, from: payload, using: decoding)
    }

    @usableFromInline
    package func decodeFailed(_ error: any Error, manifest: String, reply: (any ReplyTarget)?) {
        refuse(manifest: manifest, reply: reply, .decodeFailed("\(manifest): \(error)"))
    }

    /// Fails the ask (or logs the tell) whose reaction threw; the reaction
    /// then reports `.failed`, and supervision decides what follows.
    @usableFromInline
    func reactionFailed(_ error: any Error, manifest: String, reply: (any ReplyTarget)?) {
        if let reply {
            reply.fail(.handlerFailed(String(describing: error)))
        } else {
            OscarLog.shared.warning("\(address): reaction to \(manifest) threw \(error)")
        }
    }

    // MARK: - Stopping and death watch

    /// Stops the actor after its current message, from any thread. Messages
    /// still waiting become dead letters, waiting asks fail with `stopped`,
    /// and watchers get `Terminated`.
    package func stop() {
        guard loop.inEventLoop else {
            if !loop.execute({ self.stop() }) { failWaiting() }
            return
        }
        switch status {
        case .idle: finishStop()
        case .restarting:
            if let restartTimer { loop.cancelTimer(restartTimer) }
            restartTimer = nil
            finishStop()
        case .running, .suspended: stopRequested = true
        case .stopped: break
        }
    }

    private func finishStop() {
        status = .stopped
        stopRequested = false
        stopTimers()
        failWaiting()
        box?.stop()
        box = nil
        factory = nil
        active.store(false, ordering: .relaxed)
        let terminated = Terminated(actor: ActorRef(address: address, target: self))
        for watcher in watchers { watcher.tell(terminated) }
        watchers.removeAll()
        system?.unregister(self)
        // After unregistering: a pool that sees this may reuse the name.
        stoppedForGood.store(true, ordering: .releasing)
    }

    /// Refuses what waits, stashed messages first (they arrived first).
    private func failWaiting() {
        let waiting = local.removeAll() + closeRemote()
        queued.wrappingSubtract(waiting.count, ordering: .relaxed)
        for entry in stash.takeAll() + waiting { fail(entry) }
    }

    /// A timer's message is dropped: the actor sent it to itself, so it is
    /// no dead letter.
    private func fail(_ entry: MailboxEntry) {
        if case .tick = entry { return }
        refuse(entry, .stopped(address))
    }

    private func closeRemote() -> [MailboxEntry] {
        remote.withLock { q in
            q.closed = true
            defer { q.items.removeAll() }
            return q.items
        }
    }

    /// Registers `watcher` to receive `Terminated` when this actor stops; if it
    /// already has, the watcher is told at once.
    package func addWatcher(_ watcher: ActorRef) {
        guard loop.inEventLoop else {
            if !loop.execute({ self.addWatcher(watcher) }) {
                watcher.tell(Terminated(actor: ActorRef(address: address, target: self)))
            }
            return
        }
        if status == .stopped {
            watcher.tell(Terminated(actor: ActorRef(address: address, target: self)))
        } else if !watchers.contains(watcher) {
            watchers.append(watcher)
        }
    }

    package func removeWatcher(_ watcher: ActorRef) {
        guard loop.inEventLoop else {
            loop.execute { self.removeWatcher(watcher) }
            return
        }
        watchers.removeAll { $0 == watcher }
    }
}
