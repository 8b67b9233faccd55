import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// The reply target a cluster pool puts between an asker and a routee: it
/// counts the ask as in flight to that routee until an outcome arrives (the
/// routee's busyness for `leastBusy`), lets the pool fail it at once when the
/// routee's node is lost, and retries an idempotent message once elsewhere.
///
/// The asker's target is pinned (`PinnedReply`): a retry may be answered on
/// another loop than the first routee's.
final class TrackedReply: ReplyTarget, @unchecked Sendable {
    let routee: ActorAddress
    private let reply: PinnedReply
    /// Weak: the router keeps its trackers while they are in flight.
    private weak var pool: ClusterPoolRouter?
    /// Sends the message again to another routee; nil when the message may
    /// not be repeated (not idempotent, or already retried).
    private let retry: (@Sendable (ActorAddress, PinnedReply) -> Void)?
    private let completed = Atomic<Bool>(false)

    init(
        routee: ActorAddress, reply: PinnedReply, pool: ClusterPoolRouter,
        retry: (@Sendable (ActorAddress, PinnedReply) -> Void)?
    ) {
        self.routee = routee
        self.reply = reply
        self.pool = pool
        self.retry = retry
    }

    package func arm(on loop: EventLoop) { reply.arm(on: loop) }

    package func succeed<R: Encodable & Sendable>(_ value: R) {
        if finish() { reply.succeed(value) }
    }

    package func fail(_ error: AskError) {
        guard finish() else { return }
        if case .nodeUnreachable = error, let retry {
            retry(routee, reply)
        } else {
            reply.fail(error)
        }
    }

    func complete(_ kind: EncodedOutcome, payload: RawSpan, decoder: CBORDecoder) {
        if finish() { reply.complete(kind, payload: payload, decoder: decoder) }
    }

    func waitOn(_ table: any PendingAskTable, correlation: UInt64) { reply.waitOn(table, correlation: correlation) }

    /// The routee's node left the pool: retry or fail now, not at timeout.
    func routeeLost(_ node: NodeAddress) {
        fail(.nodeUnreachable(node, "the pool lost that node's routees"))
    }

    /// True for the first outcome only; it ends the ask's count.
    private func finish() -> Bool {
        guard !completed.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        pool?.finished(self)
        return true
    }
}
