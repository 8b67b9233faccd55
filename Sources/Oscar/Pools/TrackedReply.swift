import Synchronization

/// The reply target a cluster pool puts between an asker and a routee: it
/// counts the ask as in flight to that routee until an outcome arrives (the
/// routee's busyness for `leastBusy`), lets the pool fail it at once when the
/// routee's node is lost, and retries an idempotent message once elsewhere.
///
/// The asker's own target (a local `PendingAsk`, or a `RemoteReply` to
/// another node) is completed on the loop it was first armed on, whichever
/// routee answers: a retry may be answered on another loop.
final class TrackedReply: ReplyTarget, @unchecked Sendable {
    let routee: ActorAddress
    private let original: any ReplyTarget
    private let pool: ClusterPoolRouter
    /// Sends the message again to another routee; nil when the message may
    /// not be repeated (not idempotent, or already retried).
    private let retry: (@Sendable (ActorAddress, EventLoop?) -> Void)?
    /// Where the asker's target was armed, shared by a retry's wrapper.
    let armedLoop: Mutex<EventLoop?>
    private let completed = Atomic<Bool>(false)

    init(
        routee: ActorAddress, original: any ReplyTarget, pool: ClusterPoolRouter, armedLoop: EventLoop?,
        retry: (@Sendable (ActorAddress, EventLoop?) -> Void)?
    ) {
        self.routee = routee
        self.original = original
        self.pool = pool
        self.retry = retry
        self.armedLoop = Mutex(armedLoop)
    }

    func arm(on loop: EventLoop) {
        let first = armedLoop.withLock { armed -> Bool in
            if armed == nil {
                armed = loop
                return true
            }
            return false
        }
        if first { original.arm(on: loop) }
    }

    func succeed<R: Codable & Sendable>(_ value: R) {
        guard finish() else { return }
        onArmedLoop { $0.succeed(value) }
    }

    func fail(_ error: AskError) {
        guard finish() else { return }
        if case .nodeUnreachable = error, let retry {
            retry(routee, armedLoop.withLock { $0 })
            return
        }
        onArmedLoop { $0.fail(error) }
    }

    func complete(wire kind: WireKind, payload: UnsafeRawBufferPointer, decoder: CBORDecoder) {
        guard finish() else { return }
        let loop = armedLoop.withLock { $0 }
        if loop == nil || loop!.inEventLoop {
            original.complete(wire: kind, payload: payload, decoder: decoder)
            return
        }
        // Borrowed bytes: copy them before hopping.
        let bytes = Array(payload)
        let target = UncheckedSendable(original)
        let decoderBox = UncheckedSendable(decoder)
        _ = loop!.execute {
            bytes.withUnsafeBytes { target.value.complete(wire: kind, payload: $0, decoder: decoderBox.value) }
        }
    }

    func waitOn(_ table: any PendingAskTable, correlation: UInt64) {
        original.waitOn(table, correlation: correlation)
    }

    /// The routee's node left the pool: retry or fail now, not at timeout.
    func routeeLost(_ node: NodeAddress) {
        fail(.nodeUnreachable(node, "the pool lost that node's routees"))
    }

    /// True for the first outcome only; it ends the ask's count.
    private func finish() -> Bool {
        guard !completed.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        pool.finished(self)
        return true
    }

    private func onArmedLoop(_ body: @escaping @Sendable (any ReplyTarget) -> Void) {
        let target = UncheckedSendable(original)
        guard let loop = armedLoop.withLock({ $0 }), !loop.inEventLoop else {
            body(target.value)
            return
        }
        _ = loop.execute { body(target.value) }
    }
}
