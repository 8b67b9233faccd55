import OscarBase
import OscarCBOR

/// Every way an `ask` can end without a reply. An ask has exactly one outcome:
/// its reply, or one of these.
public enum AskError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    /// No reply within the ask's timeout.
    case timeout(ActorAddress, Duration)
    /// No actor lives at that address.
    case actorNotFound(ActorAddress)
    /// The actor has no reaction for this message type.
    case unhandled(manifest: String, ActorAddress)
    /// The reaction threw; the text is the error's description. What the
    /// actor does next is its `SupervisionStrategy`'s choice (by default it
    /// keeps serving).
    case handlerFailed(String)
    /// The actor stopped (or its system shut down) before it replied.
    case stopped(ActorAddress)
    /// The actor's bounded mailbox was full, so the message was not accepted.
    case mailboxFull(ActorAddress)
    /// The node could not be reached, or the connection to it was lost (asks
    /// waiting on it fail at once, not at their timeout).
    case nodeUnreachable(NodeAddress, String)
    /// The message or its reply could not be decoded.
    case decodeFailed(String)
    /// The peer refused the connection: wrong cluster secret or protocol version.
    case rejected(String)
    /// The encoded message or reply (with its envelope, a few dozen bytes
    /// more than the value) is larger than the sender's or the receiver's
    /// maximum message size (`ClusterNode.Settings.maxMessageSize`).
    case messageTooLarge(bytes: Int, limit: Int)
    /// The queue of bytes waiting to go to that node is full (it is not
    /// reading fast enough); the message was not accepted.
    case outboundFull(NodeAddress)

    public var description: String {
        switch self {
        case .timeout(let a, let d): "no reply from \(a) within \(d)"
        case .actorNotFound(let a): "no actor at \(a)"
        case .unhandled(let m, let a): "\(a) has no reaction for message type \(m)"
        case .handlerFailed(let text): "the reaction failed: \(text)"
        case .stopped(let a): "\(a) stopped before replying"
        case .mailboxFull(let a): "the mailbox of \(a) is full; message not accepted"
        case .nodeUnreachable(let n, let why): "node \(n) is unreachable: \(why)"
        case .decodeFailed(let why): "could not decode: \(why)"
        case .rejected(let why): "the connection was rejected: \(why)"
        case .messageTooLarge(let n, let limit): "message of \(n) bytes exceeds the maximum message size of \(limit)"
        case .outboundFull(let n): "the outbound queue to \(n) is full; message not accepted"
        }
    }
}

extension AskError {
    /// What an ask's continuation threw: a pending ask resumes it only with
    /// an `AskError` (see `PendingAsk.Continuation`), so the second case is
    /// a guard, not a path.
    @usableFromInline static func thrown(_ error: any Error) -> AskError {
        (error as? AskError) ?? .handlerFailed("\(error)")
    }
}
