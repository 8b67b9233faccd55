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
final class ActorCell: MessageTarget, LoopRunnable, @unchecked Sendable {
    enum Status { case idle, running, suspended, stopped }

    struct RemoteQueue {
        var items: [MailboxEntry] = []
        var wakePending = false
        var closed = false
    }

    let address: ActorAddress
    let loop: EventLoop
    let capacity: Int
    weak var system: ActorSystem?

    // MARK: Loop-confined
    private var factory: (@Sendable () -> AnyReactorBox)?
    private var box: AnyReactorBox?
    private var status = Status.idle
    private var local = RingBuffer<MailboxEntry>()
    private var stopRequested = false
    private var scheduled = false
    private var watchers: [ActorRef] = []

    // MARK: Cross-thread
    private let remote = Mutex(RemoteQueue())
    /// Messages accepted and not yet taken for processing; bounds the mailbox.
    private let queued = Atomic<Int>(0)
    /// True while a reaction runs or is suspended.
    private let active = Atomic<Bool>(false)

    /// Most reactions nested through direct hand-off on one loop; past it,
    /// messages are queued, so a long chain of idle actors cannot exhaust the stack.
    static let maxHandOffDepth = 32
    /// Messages handled per turn before the actor yields its loop to others.
    static let throughput = 256

    init(
        address: ActorAddress, loop: EventLoop, capacity: Int, system: ActorSystem?,
        factory: @escaping @Sendable () -> AnyReactorBox
    ) {
        self.address = address
        self.loop = loop
        self.capacity = capacity
        self.system = system
        self.factory = factory
    }

    /// How busy the actor is, readable from any thread: queued messages, plus
    /// one while a reaction is running. Pools route by it.
    var load: Int { queued.load(ordering: .relaxed) + (active.load(ordering: .relaxed) ? 1 : 0) }

    var ref: ActorRef { ActorRef(address: address, target: self) }

    // MARK: - Delivery

    func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        if loop.inEventLoop {
            deliverOnLoop(message, reply: reply)
        } else {
            deliverFromElsewhere(message, reply: reply)
        }
    }

    @inline(__always)
    private func deliverOnLoop<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        // Direct hand-off: the actor is idle and nothing waits before this
        // message, so handling it now is exactly what the mailbox would do next.
        if status == .idle, local.isEmpty, loop.enterHandOff(limit: Self.maxHandOffDepth) {
            reply?.arm(on: loop)
            handle(message, reply: reply)
            loop.exitHandOff()
            return
        }
        if status == .stopped {
            refuse(message, reply: reply, .stopped(address))
            return
        }
        guard admit() else {
            refuse(message, reply: reply, .mailboxFull(address))
            return
        }
        reply?.arm(on: loop)
        local.append(MailboxEntry(message: message, reply: reply))
        if status == .idle { scheduleSelf() }
    }

    private func deliverFromElsewhere<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        guard admit() else {
            refuse(message, reply: reply, .mailboxFull(address))
            return
        }
        let (accepted, wake) = remote.withLock { q -> (Bool, Bool) in
            if q.closed { return (false, false) }
            q.items.append(MailboxEntry(message: message, reply: reply))
            if q.wakePending { return (true, false) }
            q.wakePending = true
            return (true, true)
        }
        if !accepted {
            queued.wrappingSubtract(1, ordering: .relaxed)
            refuse(message, reply: reply, .stopped(address))
        } else if wake, !loop.submit(.runnable(self)) {
            // The loop has shut down: nothing will ever drain this mailbox.
            for envelope in closeRemote() { refuse(envelope.message, reply: envelope.reply, .stopped(address)) }
        }
    }

    /// Reserves a place in the mailbox, or returns false when it is full.
    @inline(__always)
    private func admit() -> Bool {
        if queued.wrappingAdd(1, ordering: .relaxed).newValue <= capacity { return true }
        queued.wrappingSubtract(1, ordering: .relaxed)
        return false
    }

    private func refuse<M: Message>(_ message: M, reply: (any ReplyTarget)?, _ error: AskError) {
        if let reply {
            reply.fail(error)
        } else {
            system?.deadLetter(M.manifest, to: address, reason: error)
        }
    }

    // MARK: - Running

    func run() {
        scheduled = false
        drainRemote()
        switch status {
        case .stopped: failWaiting()
        case .running, .suspended: break  // resumes when the reaction ends
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
        for envelope in items {
            envelope.reply?.arm(on: loop)
            local.append(envelope)
        }
    }

    private func processMailbox() {
        var budget = Self.throughput
        while status == .idle, budget > 0, let envelope = local.popFirst() {
            queued.wrappingSubtract(1, ordering: .relaxed)
            budget -= 1
            handle(opening: envelope.message, reply: envelope.reply)
        }
        if status == .idle, !local.isEmpty { scheduleSelf() }
    }

    private func handle(opening message: some Message, reply: (any ReplyTarget)?) {
        handle(message, reply: reply)
    }

    /// Runs one message's reaction. Status is idle on entry.
    @inline(__always)
    private func handle<M: Message>(_ message: M, reply: (any ReplyTarget)?) {
        status = .running
        active.store(true, ordering: .relaxed)
        let box = self.box ?? start()
        let outcome = withUnsafePointer(to: message) { pointer in
            box.receive(pointer, type: ObjectIdentifier(M.self), reply: reply, cell: self)
        }
        switch outcome {
        case .finished: reactionEnded()
        case .suspended: status = .suspended
        case nil:
            refuse(message, reply: reply, .unhandled(manifest: M.manifest, address))
            reactionEnded()
        }
    }

    private func reactionEnded() {
        status = .idle
        if stopRequested {
            finishStop()
        } else if local.isEmpty {
            active.store(false, ordering: .relaxed)
        } else {
            scheduleSelf()
        }
    }

    /// Called by a future reaction's task when it ends.
    func futureFinished() {
        guard loop.inEventLoop else {
            loop.execute { self.futureFinished() }
            return
        }
        reactionEnded()
    }

    private func start() -> AnyReactorBox {
        let box = factory!()
        factory = nil
        self.box = box
        if let system { box.start(ActorContext(ref: ref, system: system)) }
        return box
    }

    /// Creates the instance now if it was not yet (used for eager start).
    func startIfNeeded() {
        loop.preconditionInEventLoop()
        if box == nil, status != .stopped { _ = start() }
    }

    // MARK: - Failures

    func reactionFailed(_ error: any Error, manifest: String, reply: (any ReplyTarget)?) {
        if let reply {
            reply.fail(.handlerFailed(String(describing: error)))
        } else {
            Log.shared.warning("\(address): reaction to \(manifest) threw \(error)")
        }
    }

    // MARK: - Stopping and death watch

    /// Stops the actor after its current message, from any thread. Messages
    /// still waiting become dead letters, waiting asks fail with `stopped`,
    /// and watchers get `Terminated`.
    func stop() {
        guard loop.inEventLoop else {
            if !loop.execute({ self.stop() }) { failWaiting() }
            return
        }
        switch status {
        case .idle: finishStop()
        case .running, .suspended: stopRequested = true
        case .stopped: break
        }
    }

    private func finishStop() {
        status = .stopped
        stopRequested = false
        failWaiting()
        box?.stop()
        box = nil
        factory = nil
        active.store(false, ordering: .relaxed)
        let terminated = Terminated(actor: ActorRef(address: address, target: self))
        for watcher in watchers { watcher.tell(terminated) }
        watchers.removeAll()
        system?.unregister(self)
    }

    private func failWaiting() {
        let waiting = local.removeAll() + closeRemote()
        queued.wrappingSubtract(waiting.count, ordering: .relaxed)
        for envelope in waiting { fail(envelope) }
    }

    private func fail(_ envelope: MailboxEntry) {
        refuseOpened(envelope.message, reply: envelope.reply)
    }

    private func refuseOpened(_ message: some Message, reply: (any ReplyTarget)?) {
        refuse(message, reply: reply, .stopped(address))
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
    func addWatcher(_ watcher: ActorRef) {
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

    func removeWatcher(_ watcher: ActorRef) {
        guard loop.inEventLoop else {
            loop.execute { self.removeWatcher(watcher) }
            return
        }
        watchers.removeAll { $0 == watcher }
    }
}
