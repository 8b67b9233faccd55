import OscarBase
import OscarCBOR
import Synchronization

/// A reply target that completes its asker's target on the loop that target
/// was first armed on, whichever loop the outcome comes from.
///
/// Why: a local `PendingAsk` is touched only on the loop it was armed on
/// (its timeout lives in that loop's timer heap). A message that waits
/// before it reaches its actor (held by a cluster singleton during a
/// hand-over) or that is sent again to another actor (a pool's retry) may be
/// answered on another loop; this hops the outcome back.
package final class PinnedReply: ReplyTarget, @unchecked Sendable {
    private let original: any ReplyTarget
    private let loop = Mutex<EventLoop?>(nil)

    package init(_ original: any ReplyTarget) { self.original = original }

    /// `reply` itself when it is already pinned.
    package static func pinning(_ reply: any ReplyTarget) -> PinnedReply { reply as? PinnedReply ?? PinnedReply(reply) }

    package func arm(on loop: EventLoop) {
        let first = self.loop.withLock { armed -> Bool in
            guard armed == nil else { return false }
            armed = loop
            return true
        }
        if first { original.arm(on: loop) }
    }

    package func succeed<R: Encodable & Sendable>(_ value: R) { onArmedLoop { $0.succeed(value) } }

    package func fail(_ error: AskError) { onArmedLoop { $0.fail(error) } }

    package func complete(_ kind: EncodedOutcome, payload: RawSpan, decoder: CBORDecoder) {
        guard let armed = loop.withLock({ $0 }), !armed.inEventLoop else {
            original.complete(kind, payload: payload, decoder: decoder)
            return
        }
        // Borrowed bytes: copy them before hopping.
        let bytes = payload.copiedBytes
        let target = UncheckedSendable(original)
        let decoderBox = UncheckedSendable(decoder.detached)
        _ = armed.execute {
            target.value.complete(kind, payload: bytes.span.bytes, decoder: decoderBox.value)
        }
    }

    package func waitOn(_ table: any PendingAskTable, correlation: UInt64) {
        original.waitOn(table, correlation: correlation)
    }

    private func onArmedLoop(_ body: @escaping @Sendable (any ReplyTarget) -> Void) {
        let target = UncheckedSendable(original)
        guard let armed = loop.withLock({ $0 }), !armed.inEventLoop else {
            body(target.value)
            return
        }
        _ = armed.execute { body(target.value) }
    }
}
