import CLibUV
import Dispatch
import OscarBase
import OscarCBOR
import OscarRuntime
import Synchronization

/// A node's network side: the listening socket, one association per remote
/// node, and delivery of arriving messages to local actors.
///
/// All connections live on one loop, the I/O loop (the group's first). A
/// connection belongs to one loop as DESIGN asks; putting them all on one
/// means inbound and outbound connections never need to move between loops,
/// and simultaneous connects are settled on one thread. Actors still spread
/// over every loop; sends between loops are batched through the inboxes.
package final class Transport: RemoteNetwork, @unchecked Sendable {
    package struct Settings: Sendable {
        /// The ceiling on `maxFrameSize` and `maxMessageSize` (2 GiB): the
        /// wire carries lengths in 32 bits, and four times the message size
        /// (the reassembly bound) must still be an Int.
        package static let sizeCeiling = 1 << 31
        package var maxFrameSize = 4 << 20
        /// The largest frame a peer may send before its handshake is done.
        /// Handshake frames are under 200 bytes.
        var maxHandshakeFrame = 4096
        package var outboundCapacity = 64 << 20
        /// The largest message sent or accepted; one larger than a chunk
        /// travels in chunks (see `LargeMessageLane`).
        package var maxMessageSize = 64 << 20
        /// Bytes of large messages that may wait to go to one node.
        package var largeOutboundCapacity = 128 << 20
        /// Bytes of large messages being reassembled from all peers at once.
        package var reassemblyCapacity = 256 << 20
        /// Inbound connections open at once; beyond it new ones are closed on
        /// arrival (see `ConnectionLimits`).
        package var maxInboundConnections = ConnectionLimits.defaultInbound
        /// Inbound connections still in their handshake at once.
        package var maxHandshakingConnections = ConnectionLimits.defaultHandshaking
        var handshakeTimeout: Duration = .seconds(5)
        package var reconnectBackoffMin: Duration = .milliseconds(100)
        /// How long the large lane keeps its small window after the last
        /// small frame to a node, in nanoseconds: a request and its reply
        /// are a few round trips apart, not milliseconds.
        package var smallTrafficLinger: UInt64 = 10_000_000
        package var reconnectBackoffMax: Duration = .seconds(5)
        /// TLS on every connection (see `TLSPolicy`); nil: none, as before.
        package var tls: TLSPolicy?
        /// Large messages beside small traffic go on the bulk lane, a second
        /// connection per node pair (see `BulkLane`); without it (the
        /// default), or with TLS, they go in chunks between the small frames
        /// (see `LargeMessageLane`), and bulk connections are refused.
        package var bulkLane = false
        /// The bulk lane's copiers (`BulkCopier`) run at `SCHED_IDLE`: they
        /// take only a core nothing else wants (and a node whose cores are
        /// all busy moves no large messages until one is free).
        package var bulkLaneAtIdlePriority = true
        /// A bulk read or write that makes no progress for this long fails
        /// its message.
        package var bulkTimeout: Duration = .seconds(10)
        /// A message on the bulk lane that makes no progress for this long
        /// starts again in chunks (see `Association.watchBulk`).
        package var bulkStallTimeout: Duration = .milliseconds(500)

        package init() {}
    }

    package let settings: Settings
    /// Whether large messages take the bulk lane (not with TLS).
    var usesBulkLane: Bool { settings.bulkLane && settings.tls == nil }
    /// Large messages that came on the bulk lane, waiting for their commits.
    let staged: StagedMessages
    /// The bulk connections other nodes dialled, one per incarnation: what
    /// shutdown ends.
    private let bulkReceivers = Mutex<[UInt64: BulkSocket]>([:])
    /// Messages the bulk lane started to write (tests watch a transfer
    /// begin with it).
    package let bulkSendsStarted = Atomic<Int>(0)
    /// Bytes of large messages being reassembled or staged, from any thread.
    private let reassembly: ReassemblyBudget
    package let secret: [UInt8]
    let localNode: NodeAddress
    package let ioLoop: EventLoop
    package unowned let system: ActorSystem
    /// The system's, held here so that reading it per frame does not
    /// retain the system (see `RegistryGeneration`).
    let registryGeneration: RegistryGeneration
    package let stats: NodeStats
    /// The filter on every frame, when a test or chaos run installed one.
    package let frameFilter: (any FrameFilter)?
    /// The credentials new TLS sessions are made from: `settings.tls`'s at
    /// first, then whatever `replaceTLSCredentials` last set. Read on the
    /// I/O loop when a connection starts TLS (dialled or accepted); a
    /// session keeps the context it was made with, so a swap never touches
    /// a live connection.
    private let tlsCredentials: Mutex<TLSCredentials?>
    /// One per peer endpoint, for the life of the transport.
    private let associations = Mutex<[Endpoint: Association]>([:])

    /// A peer's host and port: what an association is kept by. (A struct,
    /// not `"host:port"`, so that finding one builds no string.)
    private struct Endpoint: Hashable {
        var host: String
        var port: Int
    }
    private var listener: UnsafeMutablePointer<uv_tcp_t>?
    private var connections: [ObjectIdentifier: Connection] = [:]
    /// Open inbound connections, and those of them still in their handshake.
    private var inbound = 0
    private var handshaking = 0
    /// Log lines about what unauthenticated peers cause, at most about one
    /// a second each (see `ThrottledLog`).
    private(set) lazy var refusals = ThrottledLog(loop: ioLoop, what: "connections refused") {
        OscarLog.shared.warning($0)
    }
    private(set) lazy var handshakeFailures = ThrottledLog(loop: ioLoop, what: "failed handshakes") {
        OscarLog.shared.warning($0)
    }
    private(set) lazy var tlsRefusals = ThrottledLog(loop: ioLoop, what: "TLS refusals") {
        OscarLog.shared.warning($0)
    }
    private(set) lazy var droppedReplies = ThrottledLog(loop: ioLoop, what: "replies dropped") {
        OscarLog.shared.warning($0)
    }
    private(set) lazy var refusedMessages = ThrottledLog(loop: ioLoop, what: "messages over the maximum refused") {
        OscarLog.shared.warning($0)
    }

    package init(
        system: ActorSystem, secret: String, settings: Settings, stats: NodeStats = NodeStats(),
        frameFilter: (any FrameFilter)? = nil
    ) {
        // A peer closing mid-write must be an error on that connection, not
        // the end of this process.
        oscar_ignore_sigpipe()
        self.system = system
        self.registryGeneration = system.registryGeneration
        self.stats = stats
        self.secret = Array(secret.utf8)
        self.settings = settings
        self.tlsCredentials = Mutex(settings.tls?.credentials)
        self.frameFilter = frameFilter
        self.localNode = system.node
        self.ioLoop = system.loops.loops[0]
        let reassembly = ReassemblyBudget(capacity: settings.reassemblyCapacity)
        self.reassembly = reassembly
        self.staged = StagedMessages(release: reassembly.release)
    }

    /// The credentials the next TLS session will be made from; nil without TLS.
    package var currentTLSCredentials: TLSCredentials? { tlsCredentials.withLock { $0 } }

    /// Makes every connection started from now on (dialled or accepted) use
    /// `credentials`; those already running keep theirs. Ignored by a
    /// transport without TLS (it never starts a session). Any thread.
    package func replaceTLSCredentials(_ credentials: TLSCredentials) {
        guard settings.tls != nil else { return }
        tlsCredentials.withLock { $0 = credentials }
    }

    /// Starts accepting on an already bound socket; waits until the loop has it.
    package func listen(fd: Int32) throws(TransportError) {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Int32>(0)
        ioLoop.execute { [self] in
            let tcp = UVHandle.allocate(uv_tcp_t.self, on: ioLoop)
            uv_tcp_init(ioLoop.uvLoopPointer, tcp)
            UVHandle.retainOwner(self, in: tcp)
            var rc = uv_tcp_open(tcp, uv_os_sock_t(fd))
            if rc == 0 {
                rc = uv_listen(
                    UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_stream_t.self), 1024, onConnection)
            }
            if rc == 0 { listener = tcp } else { UVHandle.close(tcp) }
            result.withLock { $0 = rc }
            done.signal()
        }
        done.wait()
        let rc = result.withLock { $0 }
        guard rc == 0 else { throw .bindFailed("\(localNode)", String(cString: uv_strerror(rc))) }
    }

    fileprivate func accept(from server: UnsafeMutablePointer<uv_stream_t>) {
        if inbound >= settings.maxInboundConnections || handshaking >= settings.maxHandshakingConnections {
            refuse(from: server)
            return
        }
        let conn = Connection(transport: self, initiator: false)
        guard conn.accept(from: server), conn.state != .closed else { return }
        connections[ObjectIdentifier(conn)] = conn
        inbound += 1
        handshaking += 1
    }

    /// Accepts and at once closes a connection over a limit, so it neither
    /// waits in the kernel's backlog nor holds a descriptor; logged (see `refusals`)
    /// and counted. Counted before the close: the peer sees the close, and
    /// whoever it tells must find the refusal already counted.
    private func refuse(from server: UnsafeMutablePointer<uv_stream_t>) {
        stats.add(.connectionsRefused)
        let tcp = UVHandle.allocate(uv_tcp_t.self, on: ioLoop)
        uv_tcp_init(ioLoop.uvLoopPointer, tcp)
        _ = uv_accept(server, UnsafeMutableRawPointer(tcp).assumingMemoryBound(to: uv_stream_t.self))
        UVHandle.close(tcp)
        refusals.note(
            "refused a connection: \(inbound) inbound open (limit \(settings.maxInboundConnections)), \(handshaking) in their handshake (limit \(settings.maxHandshakingConnections))"
        )
    }

    // MARK: - Associations

    func association(for node: NodeAddress) -> Association {
        let key = Endpoint(host: node.host, port: node.port)
        return associations.withLock { a in
            if let existing = a[key] { return existing }
            let created = Association(node: node, transport: self)
            a[key] = created
            return created
        }
    }

    /// Dials `node` now if no connection to it is open or opening, instead
    /// of waiting out the reconnect backoff. Sends to it while the backoff
    /// lasts still fail at once: an application's asks to a downed member
    /// fail fast, as before, and only the dial is early. For the leader's
    /// probe of a downed member: after a kill, the backoff has grown to
    /// seconds by the time the member is downed, and the refusal that
    /// removes it at once waited for it. Called once a tick per downed
    /// member, so it cannot turn the backoff into a storm.
    package func redialNow(_ node: NodeAddress) {
        let association = association(for: node)
        if ioLoop.inEventLoop {
            association.redialNow()
        } else {
            _ = ioLoop.execute { association.redialNow() }
        }
    }

    /// A ref to an actor on another node.
    package func remoteRef(_ address: ActorAddress) -> ActorRef {
        ActorRef(
            address: address,
            target: RemoteTarget(address: address, association: association(for: address.node), transport: self))
    }

    /// The local actor (or pool) at `path`, for a message that arrived.
    func localTarget(path: UnsafeRawBufferPointer) -> (any MessageTarget)? {
        system.target(at: String(decoding: path, as: UTF8.self))
    }

    // MARK: - Connection events (I/O loop)

    func established(_ conn: Connection, peer: NodeAddress) {
        connections[ObjectIdentifier(conn)] = conn
        if !conn.isInitiator { handshaking -= 1 }
        if conn.isBulk { return bulkEstablished(conn, peer: peer) }
        association(for: peer).adopt(conn, peer: peer)
    }

    func handshakeFailed(_ conn: Connection, reason: String) {
        conn.association?.lost(conn, reason: reason, rejected: true)
        conn.association = nil  // told once; the close that follows is not news to it
    }

    package func closed(_ conn: Connection, reason: String) {
        releaseReassembly(conn.reassembly.abandon())
        if connections.removeValue(forKey: ObjectIdentifier(conn)) != nil, !conn.isInitiator {
            inbound -= 1
            if !conn.wasEstablished { handshaking -= 1 }
        }
        if let dialled = conn.bulkDialled {
            conn.bulkDialled = nil
            dialled(.failure(BulkSocket.Failure(description: reason)))
        }
        // A retired duplicate ending is expected, not a lost connection.
        if !conn.isRetired { conn.association?.lost(conn, reason: reason) }
        conn.association = nil
    }

    /// Takes room for a large message of `bytes` about to be reassembled.
    func reserveReassembly(_ bytes: Int) -> Bool { reassembly.reserve(bytes) }

    func releaseReassembly(_ bytes: Int) { reassembly.release(bytes) }
    /// Reassembly bytes held now, by messages arriving or staged.
    var reassemblyInUse: Int { reassembly.inUse }

    // MARK: - The bulk lane

    /// A bulk connection finished its handshake: it leaves the I/O loop
    /// (closed here as any connection, its socket kept). A dialled one goes
    /// to the association that dialled it, an accepted one to a receiving
    /// thread of its own (replacing any earlier one from the same
    /// incarnation).
    private func bulkEstablished(_ conn: Connection, peer: NodeAddress) {
        let dialled = conn.bulkDialled
        conn.bulkDialled = nil
        guard let fd = conn.detachSocket() else {
            dialled?(.failure(BulkSocket.Failure(description: "the bulk connection could not be detached")))
            return
        }
        let socket = BulkSocket(fd: fd, timeout: settings.bulkTimeout)
        if conn.isInitiator {
            dialled?(.success(socket))
            return
        }
        // One receiving thread per incarnation, and at most
        // `maxBulkReceivers`: beyond it the new one is refused (its sender
        // sends in chunks instead).
        let limit = min(settings.maxInboundConnections, Self.maxBulkReceivers)
        let admitted = bulkReceivers.withLock { receivers in
            guard receivers[peer.uid] != nil || receivers.count < limit else { return false }
            receivers.updateValue(socket, forKey: peer.uid)?.shutdown()
            return true
        }
        guard admitted else { return socket.shutdown() }
        let started = ProcessControl.startThread { [self] in BulkLane.receive(on: socket, from: peer, transport: self) }
        if !started {
            socket.shutdown()
            bulkReceiverEnded(socket, from: peer)
        }
    }

    /// Bulk connections received at once at most (a thread each).
    static let maxBulkReceivers = 256

    /// Ends the bulk connection incarnation `uid` dialled, if any: its main
    /// connection is gone, and a host that vanished without closing would
    /// otherwise leave the receiving thread waiting for ever.
    func endBulkReceiver(from uid: UInt64) {
        bulkReceivers.withLock { $0.removeValue(forKey: uid) }?.shutdown()
    }

    /// A receiving thread is done with `socket`.
    func bulkReceiverEnded(_ socket: BulkSocket, from peer: NodeAddress) {
        bulkReceivers.withLock { receivers in
            if receivers[peer.uid] === socket { receivers[peer.uid] = nil }
        }
    }

    /// Who hears that an incarnation is gone (`onIncarnationGone`).
    private let goneListeners = Mutex<[@Sendable (NodeAddress) -> Void]>([])

    /// Calls `body`, on the I/O loop, with an incarnation this node had
    /// connected with whose address now refuses connections: evidence that
    /// its process has stopped, which membership uses to remove it without
    /// waiting out the removal margin (docs/DOWNING.md). A partition or a
    /// frozen process never produces it: their dials time out.
    package func onIncarnationGone(_ body: @escaping @Sendable (NodeAddress) -> Void) {
        goneListeners.withLock { $0.append(body) }
    }

    func incarnationGone(_ node: NodeAddress) {
        for listen in goneListeners.withLock({ $0 }) { listen(node) }
    }

    /// Connections made outbound are tracked too, so shutdown closes them.
    func track(_ conn: Connection) { connections[ObjectIdentifier(conn)] = conn }

    // MARK: - Shutdown

    /// Fails every waiting ask, closes every connection and the listener.
    /// Runs on the I/O loop; the caller then shuts the loops down.
    package func shutdown() {
        let done = DispatchSemaphore(value: 0)
        let ran = ioLoop.execute { [self] in
            for association in associations.withLock({ Array($0.values) }) { association.shutdown() }
            for conn in connections.values { conn.close("shutting down") }
            connections.removeAll()
            inbound = 0
            handshaking = 0
            if let listener { UVHandle.close(listener) }
            listener = nil
            for socket in bulkReceivers.withLock({ $0.values }) { socket.shutdown() }
            done.signal()
        }
        if ran { done.wait() }
    }
}

private func onConnection(_ server: UnsafeMutablePointer<uv_stream_t>?, _ status: Int32) {
    guard status == 0, let server else { return }
    UVHandle.owner(of: server, as: Transport.self).accept(from: server)
}
