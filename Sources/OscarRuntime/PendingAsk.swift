import OscarBase
import OscarCBOR
import Synchronization

/// One local ask waiting for its outcome: the reply, an error, or its timeout.
///
/// Invariant: it completes exactly once (an atomic flag decides races), and
/// once armed it is touched only on the loop it was armed on, where the reply
/// is produced and the timeout fires. Its timeout is an entry in that loop's
/// timer heap, not a task or a libuv handle of its own.
@usableFromInline
final class PendingAsk<R: Codable & Sendable>: ReplyTarget, TimerEntry, @unchecked Sendable {
    /// Unsafe rather than checked: `completed` already guarantees exactly one
    /// resume, and the checked kind allocates a canary object per ask.
    ///
    /// It throws `any Error` (always an `AskError`), not a `Result`: this
    /// class's methods run unspecialized, called through `ReplyTarget`, and
    /// there each `Result<R, AskError>` was a run-time metadata lookup, two
    /// per reply (1.5 % of W3's node A). `R` alone is at hand.
    @usableFromInline package typealias Continuation = UnsafeContinuation<R, any Error>

    @exclusivity(unchecked) package var timerDeadline: UInt64 = 0
    @exclusivity(unchecked) package var timerSlot = -1
    private let deadline: UInt64
    private let timeout: Duration
    private let recipient: ActorAddress
    private var continuation: Continuation?
    private var armedLoop: EventLoop?
    private let completed = Atomic<Bool>(false)
    /// Strong until the ask completes, then cleared: a waiting ask and its
    /// table refer to each other only while the ask waits.
    private var table: (any PendingAskTable)?
    private var correlation: UInt64 = 0

    @usableFromInline
    init(_ continuation: Continuation, timeout: Duration, recipient: ActorAddress) {
        self.continuation = continuation
        self.timeout = timeout
        self.recipient = recipient
        self.deadline = EventLoop.deadline(after: timeout)
    }

    @usableFromInline package func arm(on loop: EventLoop) {
        guard armedLoop == nil, !completed.load(ordering: .acquiring) else { return }
        armedLoop = loop
        loop.arm(self, deadline: deadline)
    }

    @usableFromInline package func succeed<V: Encodable & Sendable>(_ value: V) {
        if let reply = value as? R {
            finish(reply)
        } else if let reply = (value as? any ReplyConvertible)?.converted(to: R.self) as? R {
            finish(reply)
        } else {
            fail(.handlerFailed("reply of type \(V.self) where \(R.self) was expected"))
        }
    }

    @usableFromInline package func fail(_ error: AskError) { settle()?.resume(throwing: error) }

    @usableFromInline package func complete(_ kind: EncodedOutcome, payload: RawSpan, decoder: CBORDecoder) {
        let reply: R
        do {
            guard kind == .reply else {
                fail(try decoder.decode(AskError.self, from: payload))
                return
            }
            reply = try decoder.decode(R.self, from: payload)
        } catch {
            fail(.decodeFailed("reply from \(recipient): \(error)"))
            return
        }
        finish(reply)
    }

    @usableFromInline package func waitOn(_ table: any PendingAskTable, correlation: UInt64) {
        self.table = table
        self.correlation = correlation
    }

    package func timerFired() { fail(.timeout(recipient, timeout)) }

    package func timerCancelled() { fail(.stopped(recipient)) }

    private func finish(_ reply: R) { settle()?.resume(returning: reply) }

    /// The continuation, for the one outcome that wins; nil for every later one.
    private func settle() -> Continuation? {
        guard !completed.exchange(true, ordering: .acquiringAndReleasing) else { return nil }
        if let loop = armedLoop, timerSlot >= 0 { loop.disarm(self) }
        table?.forget(correlation)
        table = nil
        let c = continuation
        continuation = nil
        return c
    }
}
