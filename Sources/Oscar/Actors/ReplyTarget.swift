/// Where a reply goes: a local pending ask now, a remote asker later.
///
/// Generic over the reply value so that a remote target can encode it without
/// any type registry.
protocol ReplyTarget: AnyObject, Sendable {
    /// Starts the timeout on the loop that will produce the reply. Called once
    /// the message is in the recipient's loop; later calls do nothing.
    func arm(on loop: EventLoop)
    func succeed<R: Codable & Sendable>(_ value: R)
    func fail(_ error: AskError)
}

/// Something messages can be delivered to: one actor, or a pool that routes.
protocol MessageTarget: AnyObject, Sendable {
    func deliver<M: Message>(_ message: M, reply: (any ReplyTarget)?)
}

/// A message waiting in a mailbox.
struct MailboxEntry {
    let message: any Message
    let reply: (any ReplyTarget)?
}
