import OscarBase

/// What a frame filter decides for one outbound frame.
package enum FrameFate: Equatable, Sendable {
    case pass
    case drop
    /// Leaves at this `uv_hrtime` instant, after every frame held before it.
    case holdUntil(UInt64)
}

/// A hook on every frame to and from another node. Absent unless a test or
/// a chaos run installs one (the test kit's `FaultGate` is the one
/// implementation), so a production node's frames pass no fault code: the
/// send path tests one optional.
package protocol FrameFilter: AnyObject, Sendable {
    /// The fate of one outbound frame of `bytes` to `node`.
    func outboundFate(to node: NodeAddress, bytes: Int) -> FrameFate
    /// True if a frame from `node` must be dropped on arrival.
    func dropsInbound(from node: NodeAddress) -> Bool
}
