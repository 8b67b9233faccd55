/// Every way an `ask` can end without a reply. An ask has exactly one outcome:
/// its reply, or one of these.
public enum AskError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No reply within the ask's timeout.
    case timeout(ActorAddress, Duration)
    /// No actor lives at that address.
    case actorNotFound(ActorAddress)
    /// The actor has no reaction for this message type.
    case unhandled(manifest: String, ActorAddress)
    /// The reaction threw; the text is the error's description. The actor keeps serving.
    case handlerFailed(String)
    /// The actor stopped (or its system shut down) before it replied.
    case stopped(ActorAddress)
    /// The actor's bounded mailbox was full, so the message was not accepted.
    case mailboxFull(ActorAddress)

    public var description: String {
        switch self {
        case .timeout(let a, let d): "no reply from \(a) within \(d)"
        case .actorNotFound(let a): "no actor at \(a)"
        case .unhandled(let m, let a): "\(a) has no reaction for message type \(m)"
        case .handlerFailed(let text): "the reaction failed: \(text)"
        case .stopped(let a): "\(a) stopped before replying"
        case .mailboxFull(let a): "the mailbox of \(a) is full; message not accepted"
        }
    }
}
