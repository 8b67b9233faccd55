import CLibUV
import Glibc
import OscarBase
import OscarCBOR
import OscarRuntime

/// Everything this node has to do with one other node: the connection (at
/// most one), frames waiting to go out, and asks waiting for replies. Lives
/// on the transport's I/O loop; other threads reach it through `execute`.
///
/// Invariants:
/// - FIFO per sender: frames are appended to `outbound` in send order and
///   written in that order, all frames of one loop turn in one write.
/// - Every ask in `pending` ends: by its reply, its timeout, or — at once —
///   `nodeUnreachable` when the connection is lost or cannot be made.
/// - `outbound` never grows past `outboundCapacity` bytes: beyond it a tell
///   becomes a dead letter and an ask fails with `outboundFull`. Replies
///   count too: a peer that asks and stops reading is cut off when its
///   replies reach the bound (its asks to us fail on its side).
/// - Control lane: frames to `/system/` actors (membership, heartbeats,
///   death watch, the receptionist) go in `control`, are written ahead of
///   the user frames still waiting, and are never refused because user
///   traffic filled `outbound`. They wait at most for the frame being
///   written and `handOverBytes` already handed to libuv.
/// - Replies go back on the connection their ask came on, and replies are
///   accepted only from the incarnation the asks went to.
/// - Large lane: a message (or reply) larger than a chunk waits in `large`,
///   bounded on its own (`largeOutboundCapacity`), and leaves in chunks only
///   when the ordinary lane has handed everything to the socket, a window at
///   a time (see `LargeMessageLane`). Frames to a recipient with a large
///   message waiting follow it through that lane, in order.
final class Association: LoopRunnable, PendingAskTable, @unchecked Sendable {
    /// host:port of the node; the uid is learned from the handshake.
    package let node: NodeAddress
    /// The transport owns its associations and outlives them: unchecked.
    private unowned(unsafe) let transport: Transport
    /// The transport's loop, kept here: read through the unowned transport,
    /// each use retained and released it (1 % of node A's time in W3).
    private let loop: EventLoop

    @exclusivity(unchecked) package private(set) var connection: Connection?
    private var connecting: Connection?
    private(set) var peerUID: UInt64 = 0
    /// Loop-confined; not checked for exclusivity at run time, which cost a
    /// fifth of the send path (every access is on the I/O loop, in sequence).
    @exclusivity(unchecked) private var outbound: [UInt8] = []
    /// How much of `outbound` the socket has taken. Mid-turn, what the
    /// socket does not take stays here rather than in libuv's queue (see
    /// `flush(to:endOfTurn:)`).
    @exclusivity(unchecked) private var outboundHead = 0
    /// A frame boundary in `outbound` at or before the first frame not yet
    /// wholly written (see `advanceBoundary`): control frames may be written
    /// only between two frames.
    @exclusivity(unchecked) private var boundary = 0
    /// The end of `outbound` when a mid-turn write last found the socket
    /// full (took less than it was given). The next mid-turn write waits
    /// until another `eagerStep` bytes are queued past it: retried on every
    /// send, a full socket cost a refused system call per message (W1 made
    /// 85,000 to 250,000 writes a run instead of 21,700).
    @exclusivity(unchecked) private var eagerRefusedAt = 0
    /// How many more bytes the next mid-turn write waits for: the first
    /// write of a turn goes at `eagerFlushBytes`, so the peer starts early;
    /// each one after it waits for twice as many, up to `eagerFlushMax`, so
    /// a long burst (W1's million tells in one turn) goes out in large
    /// writes, not thousands of small ones. Reset when the turn ends.
    @exclusivity(unchecked) private var eagerStep = Association.eagerFlushBytes
    /// Messages too large for one frame, and frames keeping their order
    /// behind them (see the invariants).
    private var large = LargeMessageLane()
    /// The connection the large lane's chunks went to: on another one, the
    /// message being chunked starts again.
    private weak var largeConnection: Connection?
    /// The bulk lane to this node (see `BulkLane`): its socket once dialled,
    /// the dial under way, the id of the message on it, and the next id.
    private var bulkSender: BulkSender?
    private var bulkDial: Connection?
    private var bulkInFlight: UInt64?
    private var nextBulkID: UInt64 = 1
    /// Until this `uv_hrtime` instant, large messages go in chunks: the
    /// bulk lane stalled (its threads found no free core, see `watchBulk`).
    private var bulkStalledUntil: UInt64 = 0
    /// The main connection whose peer took no bulk connection (a client
    /// that does not listen, say): while it lasts, large messages go to
    /// it in chunks.
    private weak var bulkRefusedOn: Connection?
    /// An ordinary frame (not a chunk, not a control frame) was queued since
    /// `lastSmallFrame` was last set: a flag per frame, so the send path
    /// pays no clock read for it. The end of the turn (`run`) and the large
    /// lane turn it into a time.
    @exclusivity(unchecked) private var smallFrameQueued = false
    /// When a small frame was last queued, to within a loop turn
    /// (`uv_hrtime`): the large lane keeps its small window until
    /// `Transport.Settings.smallTrafficLinger` after it.
    private var lastSmallFrame: UInt64 = 0
    /// Control-lane frames waiting to be written (see the invariants).
    private var control: [UInt8] = []
    /// The control frames being handed to the socket, swapped with
    /// `control` so that neither buffer is reallocated.
    private var controlInFlight: [UInt8] = []
    private var flushScheduled = false
    /// Encodes messages sent from this loop, reused (loop-confined).
    package let encoding = CBOREncoding()
    /// Decodes replies read on this loop with one reused decoding object
    /// (loop-confined; `PinnedReply` detaches it before hopping loops).
    private lazy var replyDecoder = transport.system.decoder.reusingOneDecoding()
    @exclusivity(unchecked) private var pending = PendingTable<any ReplyTarget>()
    private var nextCorrelation: UInt64 = 1
    /// Until this `uv_hrtime` instant, sends fail at once instead of
    /// reconnecting (after a failed attempt, with exponential backoff).
    private var gatedUntil: UInt64 = 0
    private var gateReason = ""
    private var backoff: Duration
    /// The last recipient looked up, by path bytes: consecutive messages
    /// usually go to the same actor. Valid while the registry is unchanged.
    private var lastPath: [UInt8] = []
    private var lastTarget: (any MessageTarget)?
    private var lastGeneration = -1

    /// Write mid-turn once this many bytes are batched, so the peer starts
    /// on the first part of a burst while this side is still producing the
    /// rest: on two cores the two nodes then work in parallel instead of in
    /// turns. Bytes, not frames: a write costs mostly per call, and frames
    /// differ (a distributed call is about three small messages). On the
    /// 2-core machine, W3 (64 asks of about 75 bytes in flight) did 393k
    /// req/s at 1.5 KiB, 409k at 2.5 KiB, 355k at 3 KiB and 235k at 4 KiB;
    /// distributed calls did best there too (109k). A count of 32 frames did
    /// 400k and 90k.
    static let eagerFlushBytes = 2560
    /// The largest mid-turn step (see `eagerStep`): W1 went from 21,700
    /// writes a run to about 900.
    static let eagerFlushMax = 64 * 1024
    /// Written bytes are moved out of the batch past this much (mid-turn,
    /// while the socket takes only part of it).
    static let compactAfter = 256 * 1024
    /// At most this much of `outbound` sits in libuv's queue at a time; the
    /// rest stays here, so a control frame never waits behind more.
    static let handOverBytes = 1 << 20
    /// What the control lane may hold, with what libuv still holds for the
    /// connection (at most `handOverBytes` and one frame of user traffic):
    /// far more than membership ever sends, so reaching it means the peer
    /// stopped reading.
    static let controlCapacity = 16 << 20
    /// Replies may go this far past the outbound bound while the peer still
    /// reads: it is not the asker's fault that our own tells filled the queue.
    static let replyAllowance = 8 << 20
    /// A peer whose connection has taken no bytes for this long while
    /// replies wait past the bound is cut off: it stopped reading.
    static let stallTimeout: UInt64 = 5_000_000_000

    /// Frames to system actors take the control lane.
    static func isControl(_ recipient: String) -> Bool { recipient.utf8.starts(with: systemPrefix) }
    /// Compared as one 8-byte word: it runs on every frame that arrives.
    static func isControl(_ recipient: UnsafeRawBufferPointer) -> Bool {
        recipient.count >= 8 && recipient.loadUnaligned(as: UInt64.self) == systemPrefixWord
    }
    private static let systemPrefix = Array("/system/".utf8)
    private static let systemPrefixWord = systemPrefix.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }

    init(node: NodeAddress, transport: Transport) {
        self.node = NodeAddress(host: node.host, port: node.port)
        self.transport = transport
        self.loop = transport.ioLoop
        self.backoff = transport.settings.reconnectBackoffMin
    }

    // MARK: - Sending (I/O loop)

    /// Queues a tell or ask; `payload` appends the message's CBOR to the
    /// outbound batch (and may fail: then nothing is queued). With
    /// `splicing`, a payload encoded with `encoding` leaves a large `Data`
    /// out of the batch, for the large lane to copy from its own storage.
    package func send(
        kind: WireKind, recipient: String, manifest: String, uid: UInt64, reply: (any ReplyTarget)?,
        splicing: Bool = false, payload: (inout [UInt8]) throws(CBORError) -> Void
    ) {
        enqueue(kind: kind, recipient: recipient, manifest: manifest, uid: uid, reply: reply, splicing: splicing) {
            out, correlation throws(CBORError) in
            try WireEnvelope.append(
                to: &out, kind: kind, correlation: correlation, recipient: recipient, manifest: manifest,
                payload: payload)
        }
    }

    /// Queues a tell or ask whose whole frame was encoded off this loop, with
    /// correlation 0 (the loop assigns it). A message larger than a chunk
    /// goes to the large lane in the buffer it came in (`sendLarge(frame:)`).
    /// A small one is appended: the batch keeps the capacity it grew to (a
    /// large frame to a system actor that finds the batch empty becomes it).
    package func send(
        frame: consuming [UInt8], splices: [CBORSplice] = [], kind: WireKind, recipient: String, manifest: String,
        uid: UInt64, reply: (any ReplyTarget)?
    ) {
        var frame = frame
        let size = frame.count - 4 + CBORSplice.byteCount(splices)
        if size > LargeMessageLane.chunkBytes, !Self.isControl(recipient) {
            // Consumed: with a second reference alive, setting its
            // correlation would copy the whole message.
            return sendLarge(
                frame: consume frame, size: size, splices: splices, kind: kind, recipient: recipient,
                manifest: manifest, uid: uid, reply: reply)
        }
        // The control lane holds plain bytes (`RemoteTarget` splices nothing
        // for a system actor; this is the fallback).
        if !splices.isEmpty { frame = CBORSplice.materialize(frame, splices) }
        enqueue(kind: kind, recipient: recipient, manifest: manifest, uid: uid, reply: reply) { out, correlation in
            let start = out.count
            if out.isEmpty, frame.count > LargeMessageLane.chunkBytes {
                swap(&out, &frame)
            } else {
                out.append(contentsOf: frame)
            }
            WireEnvelope.setCorrelation(correlation, kind: kind, in: &out, frameAt: start)
        }
    }

    /// What both kinds of send share: the checks before a frame is queued,
    /// `write` appending it to its lane's batch with its correlation, and
    /// the size limit, the large lane and the fault filter after.
    private func enqueue(
        kind: WireKind, recipient: String, manifest: String, uid: UInt64, reply: (any ReplyTarget)?,
        splicing: Bool = false, write: (inout [UInt8], UInt64) throws(CBORError) -> Void
    ) {
        let lane: Lane = Self.isControl(recipient) ? .control : .ordinary
        guard admits(manifest, reply, uid: uid, lane: lane) else { return }
        let correlation = reply == nil ? 0 : nextCorrelation
        let start = count(lane)
        // Only the ordinary lane's large messages can carry splices.
        let splicing = splicing && lane == .ordinary
        if splicing { encoding.splices = [] }
        defer { if splicing { encoding.splices = nil } }
        do {
            switch lane {
            case .ordinary: try write(&outbound, correlation)
            case .control: try write(&control, correlation)
            }
        } catch {
            refuse(manifest, reply, .handlerFailed("\(manifest) could not be encoded: \(error)"))
            return
        }
        // A frame with splices is larger than a chunk, so it goes to the
        // large lane, which drops its length prefix (that does not count them).
        let splices = splicing ? encoding.splices ?? [] : []
        let size = count(lane) - start - 4 + CBORSplice.byteCount(splices)
        let limit = lane == .ordinary ? transport.settings.maxMessageSize : transport.settings.maxFrameSize
        if size > limit {
            removeFrames(lane, from: start)
            refuse(manifest, reply, .messageTooLarge(bytes: size, limit: limit))
            return
        }
        if lane == .ordinary, size > LargeMessageLane.chunkBytes || large.holds(recipient: recipient) {
            return sendLarge(
                from: start, size: size, splices: splices, recipient: recipient, manifest: manifest, reply: reply,
                correlation: correlation)
        }
        if let reply { awaitReply(reply, correlation: correlation) }
        // Injected faults: a dropped frame never leaves (an ask waits as it
        // would for a frame lost on the network); a held one leaves later.
        guard admitted(lane, from: start) else { return }
        transport.stats.add(.framesOut)
        if lane == .ordinary { smallFrameQueued = true }
        outboundChanged()
    }

    /// Whether a message to incarnation `uid` may be queued on `lane` now;
    /// if not, it is refused (a tell becomes a dead letter, an ask fails).
    private func admits(_ manifest: String, _ reply: (any ReplyTarget)?, uid: UInt64, lane: Lane) -> Bool {
        loop.preconditionInEventLoop()
        if uid != 0, peerUID != 0, uid != peerUID {
            refuse(manifest, reply, .nodeUnreachable(node, "incarnation \(uid) of \(node) is gone (now \(peerUID))"))
            return false
        }
        if connection == nil, uv_hrtime() < gatedUntil {
            refuse(manifest, reply, .nodeUnreachable(node, gateReason))
            return false
        }
        guard hasRoom(in: lane) else {
            refuse(manifest, reply, .outboundFull(node))
            return false
        }
        return true
    }

    /// Queues a frame larger than a chunk, encoded off this loop, on the
    /// large lane in the buffer it came in, whatever the ordinary lane holds.
    /// Appended to a batch that held small frames, a 16 MiB message was
    /// copied on this loop (milliseconds, with fresh pages), and every small
    /// frame waited for it. The frames already batched still go first: the
    /// lane writes only once the batch is handed over.
    private func sendLarge(
        frame: consuming [UInt8], size: Int, splices: [CBORSplice], kind: WireKind, recipient: String,
        manifest: String, uid: UInt64, reply: (any ReplyTarget)?
    ) {
        guard admits(manifest, reply, uid: uid, lane: .ordinary) else { return }
        let limit = transport.settings.maxMessageSize
        guard size <= limit else { return refuse(manifest, reply, .messageTooLarge(bytes: size, limit: limit)) }
        guard largeLaneHasRoom(for: size) else { return refuse(manifest, reply, .outboundFull(node)) }
        let correlation = reply == nil ? 0 : nextCorrelation
        WireEnvelope.setCorrelation(correlation, kind: kind, in: &frame, frameAt: 0)
        queueLarge(
            frame, bodyStart: 4, splices: splices, size: size, recipient: recipient, reply: reply,
            correlation: correlation)
    }

    /// Takes the frame of `size` bytes just appended to `outbound` at
    /// `start` out of it, and returns a buffer holding its body from
    /// `bodyStart` on, for the large lane; nil when the large lane's bound
    /// is reached (the frame is gone either way).
    ///
    /// Why hand over the buffer: copying a 16 MiB body out of `outbound`
    /// held this loop for milliseconds, and every small frame with it. When
    /// the frames before it take less than a chunk and less than the
    /// message, they are what is copied, into a new `outbound`, and the
    /// message leaves in the buffer it was encoded into (with at most a
    /// chunk of other frames ahead of its body).
    private func takeForLargeLane(from start: Int, size: Int) -> (buffer: [UInt8], bodyStart: Int)? {
        defer { removeFrames(.ordinary, from: start) }  // after the swap below, a no-op but for its bookkeeping
        guard largeLaneHasRoom(for: size) else { return nil }
        guard start < LargeMessageLane.chunkBytes, start < size else { return (Array(outbound[(start + 4)...]), 0) }
        var taken = Array(outbound[..<start])
        swap(&taken, &outbound)
        return (taken, start + 4)
    }

    /// Whether the large lane may take a message of `size` bytes: an empty
    /// lane takes any (up to the maximum message size), else its bound holds.
    private func largeLaneHasRoom(for size: Int) -> Bool {
        large.isEmpty || large.queuedBytes + size <= transport.settings.largeOutboundCapacity
    }

    /// Moves the message just appended to `outbound` at `start` to the large
    /// lane (chunked if larger than a chunk).
    private func sendLarge(
        from start: Int, size: Int, splices: [CBORSplice], recipient: String, manifest: String,
        reply: (any ReplyTarget)?, correlation: UInt64
    ) {
        guard let taken = takeForLargeLane(from: start, size: size) else {
            return refuse(manifest, reply, .outboundFull(node))
        }
        // The splices' offsets are in `outbound`; a body copied out of it
        // starts at 0 in its own buffer.
        var splices = splices
        if taken.bodyStart == 0 {
            for i in splices.indices { splices[i].offset -= start + 4 }
        }
        queueLarge(
            taken.buffer, bodyStart: taken.bodyStart, splices: splices, size: size, recipient: recipient, reply: reply,
            correlation: correlation)
    }

    /// Queues the message that `buffer` holds from `bodyStart` on (`size`
    /// bytes, chunked if larger than a chunk) on the large lane.
    private func queueLarge(
        _ buffer: [UInt8], bodyStart: Int, splices: [CBORSplice] = [], size: Int, recipient: String,
        reply: (any ReplyTarget)?, correlation: UInt64
    ) {
        if let reply { awaitReply(reply, correlation: correlation) }
        // An injected drop loses the whole message; delays do not apply here.
        if let filter = transport.frameFilter, case .drop = filter.outboundFate(to: node, bytes: size) { return }
        large.enqueue(
            buffer, bodyStart: bodyStart, splices: splices, recipient: recipient,
            whole: size <= LargeMessageLane.chunkBytes)
        transport.stats.add(.framesOut)
        outboundChanged()
    }

    /// Keeps `reply` until the outcome for `correlation` arrives (or its
    /// timeout, or the connection's loss).
    private func awaitReply(_ reply: any ReplyTarget, correlation: UInt64) {
        nextCorrelation &+= 1
        pending.insert(reply, for: correlation)
        transport.stats.add(.asksPending)
        reply.waitOn(self, correlation: correlation)
        reply.arm(on: loop)
    }

    /// The two lanes of outbound frames (see the invariants).
    enum Lane { case ordinary, control }

    private func count(_ lane: Lane) -> Int { lane == .ordinary ? outbound.count : control.count }

    private func removeFrames(_ lane: Lane, from start: Int) {
        switch lane {
        case .ordinary:
            outbound.removeSubrange(start...)
            eagerRefusedAt = min(eagerRefusedAt, start)
        case .control: control.removeSubrange(start...)
        }
    }

    /// Whether one more frame may be queued. Bytes already handed to libuv
    /// and not yet on the wire count too: otherwise the bound would only hold
    /// until the next flush.
    private func hasRoom(in lane: Lane) -> Bool {
        switch lane {
        case .ordinary:
            outbound.count - outboundHead + (connection?.unsentBytes ?? 0) < transport.settings.outboundCapacity
        case .control:
            control.count + (connection?.unsentBytes ?? 0) < Self.controlCapacity
        }
    }

    /// Sends the outcome of an ask that came from this node on `conn`, back
    /// on that connection; `payload` appends its CBOR. An outcome too large
    /// for a frame becomes a `messageTooLarge` failure. An outcome that finds
    /// the outbound bound reached cuts the peer off: it asks and does not
    /// read, and its asks fail on its side.
    func sendOutcome(
        _ kind: WireKind, correlation: UInt64, on conn: Connection, lane: Lane,
        payload: (inout [UInt8]) throws(CBORError) -> Void
    ) throws(CBORError) {
        // A reaction may answer after this node shut down, when the
        // transport is gone: check that before touching it.
        guard !shuttingDown else { return }
        loop.preconditionInEventLoop()
        guard conn.state == .established else { return }  // the asker's side fails its ask itself
        guard conn === connection else {
            // A retired or superseded connection: its asker is still there.
            var frame: [UInt8] = []
            try appendOutcome(
                kind, correlation: correlation, to: &frame, limit: transport.settings.maxFrameSize, payload: payload)
            guard conn.unsentBytes < transport.settings.outboundCapacity else {
                return cutOff(conn, waiting: conn.unsentBytes)
            }
            conn.write(frame)
            transport.stats.add(.framesOut)
            return
        }
        if !hasRoom(in: lane) {
            let waiting = count(lane) - (lane == .ordinary ? outboundHead : 0) + conn.unsentBytes
            // Past the bound: a peer that still reads gets its reply (up to an
            // allowance); one that stopped reading is cut off.
            if waiting > 0, uv_hrtime() - conn.lastWriteProgress > Self.stallTimeout {
                return cutOff(conn, waiting: waiting)
            }
            let bound = lane == .ordinary ? transport.settings.outboundCapacity : Self.controlCapacity
            guard waiting < bound + Self.replyAllowance else {
                // Dropped: the asker's timeout answers it, as for a lost frame.
                transport.droppedReplies.note("dropped a reply to \(node): \(waiting) bytes are waiting for it")
                return
            }
        }
        let start = count(lane)
        switch lane {
        case .ordinary:
            try appendOutcome(
                kind, correlation: correlation, to: &outbound, limit: transport.settings.maxMessageSize,
                payload: payload)
            let size = outbound.count - start - 4
            if size > LargeMessageLane.chunkBytes {
                guard let taken = takeForLargeLane(from: start, size: size) else {
                    // Dropped: the asker's timeout answers it, as for a lost frame.
                    transport.droppedReplies.note("dropped a reply of \(size) bytes to \(node): its large lane is full")
                    return
                }
                large.enqueue(taken.buffer, bodyStart: taken.bodyStart, recipient: nil, whole: false)
                transport.stats.add(.framesOut)
                return outboundChanged()
            }
        case .control:
            try appendOutcome(
                kind, correlation: correlation, to: &control, limit: transport.settings.maxFrameSize, payload: payload)
        }
        guard admitted(lane, from: start) else { return }
        transport.stats.add(.framesOut)
        if lane == .ordinary { smallFrameQueued = true }
        outboundChanged()
    }

    /// Appends an outcome frame to `out`; one larger than `limit` becomes a
    /// `messageTooLarge` failure, so the asker learns why.
    private func appendOutcome(
        _ kind: WireKind, correlation: UInt64, to out: inout [UInt8], limit: Int,
        payload: (inout [UInt8]) throws(CBORError) -> Void
    ) throws(CBORError) {
        let start = out.count
        try WireEnvelope.append(to: &out, kind: kind, correlation: correlation, payload: payload)
        guard out.count - start - 4 > limit else { return }
        let failure = Self.encoded(AskError.messageTooLarge(bytes: out.count - start - 4, limit: limit))
        out.removeSubrange(start...)
        WireEnvelope.append(to: &out, kind: .failure, correlation: correlation) { $0.append(contentsOf: failure) }
    }

    package static func encoded(_ error: AskError) -> [UInt8] { (try? CBOREncoder().encode(error)) ?? [] }

    /// Closes a connection whose peer stopped reading: what it has not read
    /// reached the outbound bound, and holding more would grow this node
    /// without limit.
    private func cutOff(_ conn: Connection, waiting: Int) {
        transport.stats.add(.peersCutOff)
        OscarLog.shared.warning(
            "cutting off \(node): it stopped reading (\(waiting) bytes waiting, the bound is \(transport.settings.outboundCapacity))"
        )
        conn.close("the peer stopped reading (\(waiting) bytes waiting)")
    }

    // MARK: - Injected faults

    /// Frames held back by an injected delay or bandwidth limit, in release
    /// order (from `heldHead` on).
    @exclusivity(unchecked) private var held: [(release: UInt64, lane: Lane, frame: [UInt8])] = []
    @exclusivity(unchecked) private var heldHead = 0
    private var releaseTimer: LoopTimer?

    /// Passes the frame appended to `lane` at `start` through the installed
    /// frame filter: true if it stays queued, false if it was dropped or
    /// held back. Without a filter (production) it tests one optional.
    private func admitted(_ lane: Lane, from start: Int) -> Bool {
        guard let filter = transport.frameFilter else { return true }
        var fate = filter.outboundFate(to: node, bytes: count(lane) - start)
        if fate == .pass, heldHead < held.count {
            fate = .holdUntil(held[held.count - 1].release)  // behind the frames already held
        }
        switch fate {
        case .pass:
            return true
        case .drop:
            removeFrames(lane, from: start)
            return false
        case .holdUntil(let release):
            held.append((release, lane, Array(lane == .ordinary ? outbound[start...] : control[start...])))
            removeFrames(lane, from: start)
            if releaseTimer == nil { armRelease() }
            return false
        }
    }

    /// Held frames were on the wire, as far as anyone can tell: a lost
    /// connection loses them.
    private func dropHeld() {
        held.removeAll()
        heldHead = 0
        if let releaseTimer { loop.cancelTimer(releaseTimer) }
        releaseTimer = nil
    }

    private func armRelease() {
        guard heldHead < held.count else { return }
        let now = uv_hrtime()
        let wait = held[heldHead].release > now ? held[heldHead].release - now : 0
        releaseTimer = loop.scheduleTimer(after: .nanoseconds(Int64(wait))) { [weak self] in self?.releaseDue() }
    }

    /// Moves the frames whose time has come to the outbound batch.
    private func releaseDue() {
        releaseTimer = nil
        let now = uv_hrtime()
        var released = 0
        while heldHead < held.count, held[heldHead].release <= now {
            switch held[heldHead].lane {
            case .ordinary: outbound.append(contentsOf: held[heldHead].frame)
            case .control: control.append(contentsOf: held[heldHead].frame)
            }
            held[heldHead].frame = []
            heldHead += 1
            released += 1
        }
        if heldHead == held.count {
            held.removeAll(keepingCapacity: true)
            heldHead = 0
        }
        if released > 0 {
            transport.stats.add(.framesOut, released)
            outboundChanged()
        }
        armRelease()
    }

    private func outboundChanged() {
        if let connection {
            if outbound.count - max(outboundHead, eagerRefusedAt) >= eagerStep {
                eagerStep = min(eagerStep * 2, Self.eagerFlushMax)
                flush(to: connection, endOfTurn: false)
                if outboundHead < outbound.count { eagerRefusedAt = outbound.count }
            }
            // A grown step is reset at the end of the turn (`run`), even when
            // the mid-turn writes left nothing to flush.
            if outboundHead < outbound.count || !control.isEmpty || !large.isEmpty
                || eagerStep != Self.eagerFlushBytes
            {
                scheduleFlush()
            }
        } else if connecting == nil {
            connect()
        }
    }

    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.schedule(self)
    }

    private func refuse(_ manifest: String, _ reply: (any ReplyTarget)?, _ error: AskError) {
        refuseMessage(reply, manifest: manifest, to: ActorAddress(node: node, path: "?"), error, in: transport.system)
    }

    /// Flushes once per loop turn: every frame queued this turn in one write.
    package func run() {
        flushScheduled = false
        eagerStep = Self.eagerFlushBytes
        notePassingSmallFrames()
        if let connection { flush(to: connection, endOfTurn: true) }
    }

    /// Writes what the socket takes now, control frames first. Mid-turn,
    /// the rest stays in `outbound`: a sender in a long loop (W1's million
    /// tells in one turn) tries again at its next flush, so the peer keeps
    /// receiving while the loop runs. Handed to libuv instead, the rest
    /// would wait in libuv's queue, and everything after it too, until the
    /// turn ended, and the peer would sit idle meanwhile. At the end of the
    /// turn, libuv gets up to `handOverBytes` and writes it as the socket
    /// drains; `drained` hands it the next part.
    private func flush(to connection: Connection, endOfTurn: Bool, everything: Bool = false) {
        if endOfTurn || !control.isEmpty {
            // A turn ends, and control frames go in, between two frames only:
            // finish the frame being written first. So whichever connection
            // comes next starts at a frame boundary.
            guard finishFrame(on: connection, endOfTurn: endOfTurn) else { return }
            if !control.isEmpty, outboundHead == boundary {
                swap(&control, &controlInFlight)  // no copy, no allocation
                connection.write(controlInFlight)
                controlInFlight.removeAll(keepingCapacity: true)
                guard self.connection === connection else { return }
            }
        }
        while outboundHead < outbound.count {
            let capped = endOfTurn && !everything
            let room = capped ? Self.handOverBytes - connection.unsentBytes : outbound.count - outboundHead
            guard room > 0 else { break }  // `drained` goes on
            // A hand-over ends at a frame boundary (past `room` by less than a frame).
            let end = endOfTurn ? frameEnd(atOrAfter: min(outbound.count, outboundHead + room)) : outbound.count
            let taken = write(to: connection, upTo: end, endOfTurn: endOfTurn)
            guard self.connection === connection else { return }
            outboundHead += taken
            if !endOfTurn { break }
        }
        if outboundHead == outbound.count {
            outbound.removeAll(keepingCapacity: true)
            outboundHead = 0
            boundary = 0
            eagerRefusedAt = 0
            if endOfTurn, control.isEmpty, !large.isEmpty { sendLargeChunks(to: connection) }
        } else if outboundHead >= Self.compactAfter, outboundHead * 2 >= outbound.count {
            advanceBoundary()
            outbound.removeSubrange(..<outboundHead)  // keep moving memory small
            boundary -= outboundHead
            eagerRefusedAt = max(0, eagerRefusedAt - outboundHead)
            outboundHead = 0
        }
    }

    /// Writes the large lane's next frames while its window has room. Only
    /// at a frame boundary with the ordinary lane handed over (small frames
    /// go first), and only while libuv holds less than a window, so a small
    /// frame queued next waits behind at most that much.
    ///
    /// Which lane a large message takes is chosen when it starts: the bulk
    /// lane while small frames go to the same node (its threads yield the
    /// cores to them), chunks on this connection while the large lane has
    /// it to itself (four chunks a window: no handing over between loops
    /// and threads, and W5 at 1 MiB stays at 3.4 GB/s where the bulk lane,
    /// one message at a time, did 1.9). A message on the bulk lane holds
    /// the lane until its commit.
    private func sendLargeChunks(to connection: Connection) {
        guard bulkInFlight == nil else { return }
        if largeConnection !== connection {
            large.restart()
            largeConnection = connection
        }
        // Small frames to this node: chunks leave one at a time (see
        // `LargeMessageLane.windowBesideSmallFrames`), or on the bulk lane.
        notePassingSmallFrames()
        let now = uv_hrtime()
        let besideSmallFrames = now &- lastSmallFrame < transport.settings.smallTrafficLinger
        let window = besideSmallFrames ? LargeMessageLane.windowBesideSmallFrames : LargeMessageLane.window
        let bulk =
            besideSmallFrames && transport.usesBulkLane && bulkRefusedOn !== connection && now >= bulkStalledUntil
        // A write per chunk: the receiver starts on the first while the
        // next is written (one write for the window's chunks did half).
        while !(bulk && large.headIsUnstartedMessage), connection.unsentBytes < window,
            let frame = large.nextFrame(window: window)
        {
            frame.withBuffers { connection.write(gathering: $0) }
            if frame.isChunk { transport.stats.add(.chunksOut) }
            guard self.connection === connection else { return }
        }
        if bulk { sendOnBulkLane() }
    }

    /// Hands the large message at the head to the bulk lane, dialling it
    /// first if need be.
    private func sendOnBulkLane() {
        guard let (body, count) = large.handHeadToBulkLane() else { return }
        let message = BulkLane.Message(id: nextBulkID, body: body, bodyCount: count)
        nextBulkID += 1
        bulkInFlight = message.id
        watchBulk(message.id, progress: -1)
        if let bulkSender { return bulkSender.send(message) }
        let dial = Connection(transport: transport, initiator: true, bulk: true)
        bulkDial = dial
        dial.bulkDialled = { [self] result in
            guard bulkDial === dial else {
                if case .success(let socket) = result { socket.shutdown() }
                return
            }
            bulkDial = nil
            switch result {
            case .success(let socket):
                let (loop, transport) = (self.loop, self.transport)
                guard
                    let sender = BulkSender(
                        socket: socket, idle: transport.settings.bulkLaneAtIdlePriority,
                        starting: { transport.bulkSendsStarted.add(1, ordering: .relaxed) },
                        done: { [self] id, failure in _ = loop.execute { self.bulkSent(id, failure: failure) } })
                else {
                    socket.shutdown()
                    return bulkDialFailed(message.id, BulkSocket.Failure(description: "no thread for the bulk lane"))
                }
                bulkSender = sender
                sender.send(message)
            case .failure(let failure):
                bulkDialFailed(message.id, failure)
            }
        }
        transport.track(dial)
        dial.connect(host: node.host, port: node.port)
    }

    /// Checks every `bulkStallTimeout` (500 ms) that message `id` still moves on
    /// the bulk lane. Its copiers run at `SCHED_IDLE`: on a node (or a
    /// receiver) whose cores are all busy they may not run for seconds.
    /// A message that made no progress for a whole interval starts again in
    /// chunks on the main connection, as every large message does for the
    /// next ten seconds; the bulk connection is closed (what its receiver
    /// staged of it is never committed).
    private func watchBulk(_ id: UInt64, progress: Int) {
        _ = loop.scheduleTimer(after: transport.settings.bulkStallTimeout) { [self] in
            guard bulkInFlight == id, connection != nil else { return }
            // Dialling: the handshake's own timeout watches it.
            guard let sender = bulkSender else { return watchBulk(id, progress: progress) }
            let now = sender.socket.written.load(ordering: .relaxed)
            guard now == progress else { return watchBulk(id, progress: now) }
            OscarLog.shared.info("the bulk lane to \(node) made no progress; large messages go in chunks for a while")
            fallBackToChunks()
        }
    }

    /// Closes the bulk lane and sends the message that was on it, and every
    /// large message for the next 10 s, in chunks on the main connection.
    private func fallBackToChunks() {
        transport.stats.add(.bulkFallbacks)
        dropBulkLane()
        bulkStalledUntil = uv_hrtime() &+ 10_000_000_000
        large.restart()
        largeConnection = connection
        scheduleFlush()
    }

    /// The bulk lane is done with message `id`: staged by the receiver, so
    /// its commit goes on the main connection now, and the frames behind it
    /// after; or the bulk connection failed, and the message starts again
    /// in chunks.
    private func bulkSent(_ id: UInt64, failure: BulkSocket.Failure?) {
        guard bulkInFlight == id else { return }  // dropped with the main connection meanwhile
        if let failure {
            // Only this side writes the commit, so nothing of the message
            // can be delivered from the bulk lane now.
            OscarLog.shared.info(
                "the bulk lane to \(node) failed (\(failure)); large messages go in chunks for a while")
            return fallBackToChunks()
        }
        bulkInFlight = nil
        transport.stats.add(.bulkMessagesOut)
        let start = outbound.count
        outbound.append(contentsOf: BulkLane.commitFrame(id))
        if admitted(.ordinary, from: start) { transport.stats.add(.framesOut) }
        large.finishHanded()
        outboundChanged()
        scheduleFlush()
    }

    /// No bulk connection to this node: message `id` starts again in
    /// chunks on the main connection, as every large message to it does
    /// while that connection lasts.
    private func bulkDialFailed(_ id: UInt64, _ failure: BulkSocket.Failure) {
        guard bulkInFlight == id, let connection else { return }
        bulkRefusedOn = connection
        OscarLog.shared.info("\(node) took no bulk connection (\(failure)); large messages to it go in chunks")
        fallBackToChunks()
    }

    /// Ends the bulk lane: its connection (or the dial under way) closes,
    /// and the message on it is forgotten here (gone with the main
    /// connection, or sent again in chunks by `fallBackToChunks`).
    private func dropBulkLane() {
        bulkSender?.stop()
        bulkSender = nil
        bulkInFlight = nil
        if let dial = bulkDial {
            bulkDial = nil
            dial.close("the bulk lane is no longer wanted")
        }
    }

    /// Turns `smallFrameQueued` into `lastSmallFrame`.
    private func notePassingSmallFrames() {
        guard smallFrameQueued else { return }
        smallFrameQueued = false
        lastSmallFrame = uv_hrtime()
    }

    /// The first frame boundary in `outbound` at or after `offset`.
    private func frameEnd(atOrAfter offset: Int) -> Int {
        advanceBoundary()
        return min(nextBoundary(from: boundary, atOrAfter: offset), outbound.count)
    }

    /// Walks the length prefixes from the boundary `start` to the first
    /// boundary at or after `offset` (or the end of the frames there are).
    private func nextBoundary(from start: Int, atOrAfter offset: Int) -> Int {
        var end = start
        while end < offset, end + 4 <= outbound.count {
            let length =
                Int(outbound[end]) << 24 | Int(outbound[end + 1]) << 16 | Int(outbound[end + 2]) << 8
                | Int(outbound[end + 3])
            end += 4 + length
        }
        return end
    }

    /// Writes `outbound[outboundHead..<end]`: all of it at the end of a turn
    /// (libuv queues what the socket does not take), else what the socket
    /// takes now. Returns how many bytes it took.
    private func write(to connection: Connection, upTo end: Int, endOfTurn: Bool) -> Int {
        let head = outboundHead
        // A failed write closes the connection, and losing it empties
        // `outbound` from inside this call: write from a reference of our
        // own, so the bytes stay alive, and let `lost` have the last word.
        return { (batch: [UInt8]) in
            batch.withUnsafeBytes { all in
                let unsent = UnsafeRawBufferPointer(rebasing: all[head..<end])
                return endOfTurn ? connection.write(unsent) : connection.tryWrite(unsent)
            }
        }(outbound)
    }

    /// Moves `boundary` to the first frame boundary at or after
    /// `outboundHead`, reading the length prefixes of the frames between.
    private func advanceBoundary() { boundary = nextBoundary(from: boundary, atOrAfter: outboundHead) }

    /// libuv wrote everything it was given: hand it the next part.
    func drained(_ conn: Connection) {
        guard conn === connection, outboundHead < outbound.count || !control.isEmpty || !large.isEmpty else { return }
        flush(to: conn, endOfTurn: true)
    }

    func forget(_ correlation: UInt64) { _ = removePending(correlation) }

    /// Removes a waiting ask, keeping the pending-asks gauge exact.
    private func removePending(_ correlation: UInt64) -> (any ReplyTarget)? {
        guard let reply = pending.remove(correlation) else { return nil }
        transport.stats.add(.asksPending, -1)
        return reply
    }

    // MARK: - Connections

    private func connect(withoutTLS: Bool = false) {
        let conn = Connection(transport: transport, initiator: true, withoutTLS: withoutTLS)
        conn.association = self
        connecting = conn
        transport.track(conn)
        conn.connect(host: node.host, port: node.port)
    }

    /// A TLS dial found the peer runs without TLS, and this node accepts
    /// that (`tls-plaintext=accept`): the same attempt goes on without TLS,
    /// the asks waiting on it kept. Every later attempt tries TLS first.
    func redialWithoutTLS(_ conn: Connection, _ reason: String) {
        guard conn === connecting else { return }
        connecting = nil
        conn.association = nil  // not lost: replaced
        conn.close(reason)
        OscarLog.shared.info("\(node): \(reason); dialling it without TLS (tls-plaintext=accept)")
        connect(withoutTLS: true)
    }

    /// A connection to this node finished its handshake.
    func adopt(_ conn: Connection, peer: NodeAddress) {
        if peerUID != 0, peer.uid != peerUID {
            // A new incarnation (or a second process advertising the same
            // address): the newest connection wins. The old one retires: it
            // still delivers what is in flight and carries the replies to
            // asks that came on it, then closes.
            OscarLog.shared.info("\(node) restarted: incarnation \(peerUID) replaced by \(peer.uid)")
            failPending("\(node) restarted")
            transport.endBulkReceiver(from: peerUID)
            if let old = connection {
                // What was queued while the old incarnation was connected was
                // for it: it goes on the old connection (replies to its asks
                // included), not to the new one. (What was queued after its
                // connection was lost goes to whoever is there now.)
                flush(to: old, endOfTurn: true, everything: true)
                old.retire()
                dropQueued()
            }
            connection = nil
        } else if let current = connection, current !== conn {
            // Simultaneous connects: both nodes keep the connection opened by
            // the node with the smaller uid, so they agree without talking.
            // The other one retires: nothing more is sent on it, but what is
            // already in flight on it is still read and delivered.
            let localUID = transport.localNode.uid
            func initiatorUID(_ c: Connection) -> UInt64 { c.isInitiator ? localUID : peer.uid }
            if initiatorUID(current) <= initiatorUID(conn) {
                if connecting === conn { connecting = nil }
                conn.association = self
                conn.retire()
                return
            }
            // The switch happens between two frames.
            _ = finishFrame(on: current, endOfTurn: true)
            current.retire()
        }
        if connecting === conn { connecting = nil }
        conn.association = self
        connection = conn
        peerUID = peer.uid
        gatedUntil = 0
        backoff = transport.settings.reconnectBackoffMin
        OscarLog.shared.info("connected to \(peer) (uid \(peer.uid))")
        flush(to: conn, endOfTurn: true)
    }

    /// Writes the rest of the frame being written to `conn` (mid-turn, what
    /// the socket takes of it), so that control frames and the next
    /// connection start at a frame boundary. False if the write lost `conn`.
    private func finishFrame(on conn: Connection, endOfTurn: Bool) -> Bool {
        advanceBoundary()
        guard boundary > outboundHead else { return true }
        let taken = write(to: conn, upTo: boundary, endOfTurn: endOfTurn)
        guard connection === conn else { return false }
        outboundHead += taken
        return true
    }

    /// A connection of this association closed (or never opened). With
    /// `rejected`, the peer refused us (secret or version): waiting asks fail
    /// with `rejected` rather than `nodeUnreachable`.
    package func lost(_ conn: Connection, reason: String, rejected: Bool = false) {
        if conn === connecting { connecting = nil }
        guard conn === connection || connection == nil else { return }
        // This address was reached before, by incarnation `peerUID`, no
        // connection to it is open, and now nothing listens on it: a node
        // listens on its address from before its first connection until it
        // stops, so that process is gone.
        if conn.refusedByPeer, peerUID != 0, connection == nil {
            transport.incarnationGone(NodeAddress(host: node.host, port: node.port, uid: peerUID))
        }
        let wasEstablished = conn === connection
        connection = nil
        if wasEstablished {
            transport.endBulkReceiver(from: peerUID)
            if shuttingDown {
                OscarLog.shared.debug("closed the connection to \(node)")
            } else if pending.isEmpty && outboundHead == outbound.count {
                // Nothing lost (a one-shot client such as `oscar ask` that
                // is done): news, not a problem. Membership reports members
                // that fail.
                OscarLog.shared.info("connection to \(node) closed: \(reason)")
            } else {
                OscarLog.shared.warning(
                    "lost the connection to \(node) with \(pending.count) asks pending: \(reason)")
            }
        }
        dropQueued()
        failPending(reason, as: rejected ? .rejected(reason) : nil)
        gate(reason)
    }

    /// Forgets every frame waiting to go: both lanes and the held ones.
    private func dropQueued() {
        outbound.removeAll()
        outboundHead = 0
        boundary = 0
        eagerRefusedAt = 0
        control.removeAll()
        large.removeAll()
        dropBulkLane()
        dropHeld()
    }

    /// See `Transport.redialNow`. Dials without opening the gate: other
    /// sends still fail at once while it lasts, as they did before.
    func redialNow() {
        guard connection == nil, connecting == nil else { return }
        connect()
    }

    private func gate(_ reason: String) {
        gateReason = reason
        gatedUntil = EventLoop.deadline(after: backoff)
        backoff = min(backoff * 2, transport.settings.reconnectBackoffMax)
    }

    private func failPending(_ reason: String, as error: AskError? = nil) {
        let waiting = pending.removeAll()
        transport.stats.add(.asksPending, -waiting.count)
        for reply in waiting { reply.fail(error ?? .nodeUnreachable(node, reason)) }
    }

    private var shuttingDown = false

    package func shutdown() {
        shuttingDown = true
        if let connection { flush(to: connection, endOfTurn: true, everything: true) }
        failPending("this node is shutting down")
        // The cached target may refer back to the transport (a cluster
        // pool's router holds refs to other nodes): let go of it.
        lastTarget = nil
        dropHeld()
        dropBulkLane()
        connection?.close("shutting down", flushFirst: true)
        connecting?.close("shutting down")
    }

    // MARK: - Receiving

    private func target(at path: UnsafeRawBufferPointer) -> (any MessageTarget)? {
        let generation = transport.registryGeneration.current
        if generation == lastGeneration, let lastTarget, lastPath.count == path.count,
            path.isEmpty || lastPath.withUnsafeBytes({ memcmp($0.baseAddress!, path.baseAddress!, path.count) == 0 })
        {
            return lastTarget
        }
        lastTarget = transport.localTarget(path: path)
        lastPath = Array(path)
        lastGeneration = generation
        return lastTarget
    }

    func receive(_ frame: UnsafeRawBufferPointer, on conn: Connection) throws(WireError) {
        if let filter = transport.frameFilter, filter.dropsInbound(from: node),
            frame.first != WireKind.chunkAck.rawValue
        {
            // An injected blackhole. A dropped chunk is still acknowledged, so
            // the sender's window moves on; its message is lost.
            if frame.first == WireKind.chunk.rawValue {
                transport.releaseReassembly(conn.reassembly.abandon(skippingItsRest: true))
                acknowledge(frame.count - 2, on: conn)
            }
            return
        }
        let envelope = try WireEnvelope.parse(frame)
        transport.stats.add(.framesIn)
        switch envelope.kind {
        case .tell, .ask:
            let path = UnsafeRawBufferPointer(rebasing: frame[envelope.recipient])
            let isControl = Self.isControl(path)
            if !isControl { loop.noteTraffic() }
            let reply: RemoteReply? =
                envelope.kind == .ask
                ? RemoteReply(
                    association: self, connection: conn, correlation: envelope.correlation,
                    lane: isControl ? .control : .ordinary) : nil
            guard let target = target(at: path) else {
                let address = ActorAddress(node: transport.localNode, path: String(decoding: path, as: UTF8.self))
                let manifest = String(
                    decoding: UnsafeRawBufferPointer(rebasing: frame[envelope.manifest]), as: UTF8.self)
                refuseMessage(reply, manifest: manifest, to: address, .actorNotFound(address), in: transport.system)
                return
            }
            // The frame is lent to the target as a span: bounds-checked, and
            // unable to outlive this call (the read buffer is reused after it).
            let bytes = RawSpan(_unsafeBytes: frame)
            target.deliverEncoded(
                manifest: bytes.extracting(envelope.manifest), payload: bytes.extracting(envelope.payload),
                reply: reply)
        case .reply, .failure:
            // Correlation ids are this incarnation's: an outcome from another
            // one (a retired connection of an old process) answers nothing here.
            guard conn.peer?.uid == peerUID, let waiting = removePending(envelope.correlation) else { return }
            loop.noteTraffic()
            waiting.complete(
                envelope.kind == .reply ? .reply : .failure,
                payload: RawSpan(_unsafeBytes: frame).extracting(envelope.payload), decoder: replyDecoder)
        case .chunk:
            try receiveChunk(frame, on: conn)
        case .commit:
            guard frame.count >= 10, let peer = conn.peer else {
                throw .malformedFrame("a commit without its message's id")
            }
            switch transport.staged.take(from: peer.uid, id: BulkLane.readUInt64(frame[2...])) {
            case .whole(let body):
                transport.releaseReassembly(body.count)
                try deliverWhole(body, on: conn)
            case .refused(let length, let head):
                refuseLarge(length: length, head: head, on: conn)
            case nil:
                return  // its message did not arrive whole, or was dropped
            }
        case .chunkAck:
            guard frame.count >= 6 else { throw .malformedFrame("a chunk acknowledgement without its count") }
            guard conn === connection, conn === largeConnection else { return }  // for chunks of an old connection
            large.acknowledged(LargeMessageLane.readUInt32(frame, at: 2))
            if !large.isEmpty { scheduleFlush() }
        default:
            throw .malformedFrame("\(envelope.kind) frame after the handshake")
        }
    }

    /// Adds a chunk to the message arriving on `conn`, and delivers that
    /// message once whole, as if it had come in one frame.
    private func receiveChunk(_ frame: UnsafeRawBufferPointer, on conn: Connection) throws(WireError) {
        transport.stats.add(.chunksIn)
        let first = frame[1] & LargeMessageLane.firstChunk != 0
        let data = UnsafeRawBufferPointer(rebasing: frame[2...])
        let outcome = try conn.reassembly.receive(
            data, first: first, maxMessageSize: transport.settings.maxMessageSize,
            reserve: transport.reserveReassembly)
        acknowledge(data.count - (first ? 4 : 0), on: conn)
        let whole: LendableBuffer
        switch outcome {
        case .partial: return
        case .whole(let body): whole = body
        case .refused(let length, let head): return refuseLarge(length: length, head: head, on: conn)
        }
        transport.releaseReassembly(whole.count)
        try deliverWhole(whole, on: conn)
    }

    /// Delivers a large message's frame body, reassembled or staged, as if
    /// it had come in one frame.
    private func deliverWhole(_ whole: LendableBuffer, on conn: Connection) throws(WireError) {
        guard let kind = whole.bytes.first.flatMap(WireKind.init(rawValue:)),
            kind == .tell || kind == .ask || kind == .reply || kind == .failure
        else {
            throw .malformedFrame("a large message that is not a message")
        }
        // Lent: a large `Data` in the message keeps the buffer, uncopied.
        try whole.lend { (bytes) throws(WireError) in try receive(bytes, on: conn) }
    }

    /// A message over this node's maximum size is skipped: an ask gets
    /// `messageTooLarge`, a tell is dropped; the connection stays.
    private func refuseLarge(length: Int, head: [UInt8], on conn: Connection) {
        let limit = transport.settings.maxMessageSize
        transport.refusedMessages.note(
            "refused a message of \(length) bytes from \(node): over this node's maximum of \(limit)")
        guard head.count >= 10, head[0] == WireKind.ask.rawValue else { return }
        let correlation = BulkLane.readUInt64(head[2..<10])
        let failure = Self.encoded(AskError.messageTooLarge(bytes: length, limit: limit))
        try? sendOutcome(.failure, correlation: correlation, on: conn, lane: .ordinary) {
            $0.append(contentsOf: failure)
        }
    }

    /// Tells the sender `count` more chunk bytes were taken: on the control
    /// lane, or straight on a retired connection (nothing else is written
    /// there, so it is between two frames).
    private func acknowledge(_ count: Int, on conn: Connection) {
        guard count > 0 else { return }
        let frame = LargeMessageLane.acknowledgement(count)
        guard conn === connection else { return conn.write(frame) }
        control.append(contentsOf: frame)
        scheduleFlush()
    }
}
