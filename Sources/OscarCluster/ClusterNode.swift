import CoreEngine
import Glibc
import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// An actor system that is also a node on the network: it listens, and its
/// refs reach actors on other nodes with the same `tell` and `ask`.
///
/// ```swift
/// let node = try ClusterNode(settings: .init(port: 7001, secret: "a-long-cluster-secret")) { actors in
///     actors.nodeSingleton("echo") { EchoActor() }
/// }
/// let remote = node.system.ref("oscar://127.0.0.1:7002/user/echo")!
/// let reply = try await remote.ask(Echo(text: "hi"))
/// node.shutdown()
/// ```
/// A management route a layer above adds: the request in, the response
/// out. The node has checked the signature of a request that is not a GET.
package typealias ManagementRoute = @Sendable (ManagementRoutes.Request) async -> ManagementRoutes.Response

/// A node of a cluster: one process's `ActorSystem` (its `system`), the
/// transport that connects it to the other nodes, its membership, the
/// receptionist, the cluster pools and singletons declared in it, and the
/// optional management endpoint. A `ClusterSystem` (distributed actors) runs
/// over one.
///
/// Two process-wide effects, both on the first node a process starts: the
/// process ignores SIGPIPE (a peer closing mid-write must be an error on
/// that connection, not the end of the process), and its soft limit of open
/// descriptors is raised to the hard limit (connection limits derive from
/// it, `ConnectionLimits`).
public final class ClusterNode: Sendable {
    public struct Settings: Sendable {
        /// Address to listen on (an IPv4 literal; 0.0.0.0 for every
        /// interface, which then needs `advertisedHost`).
        public var host: String
        /// The host other nodes dial to reach this one, and part of its
        /// identity: a container's service name or a machine's DNS name or
        /// address. Nil: the same as `host`.
        public var advertisedHost: String?
        /// Port to listen on; 0 picks a free one (see `address`).
        public var port: Int
        /// The cluster secret: nodes connect only when theirs match. Never
        /// sent. At least `minimumSecretBytes` bytes (see there).
        public var secret: String
        /// Event loops; default one per core.
        public var loopCount: Int
        /// Waiting messages per actor before new ones are refused.
        public var mailboxCapacity: Int
        /// Largest frame sent or accepted, in bytes (default 4 MiB, at least
        /// 64 KiB, at most 2 GiB). A larger incoming frame closes that connection. Messages
        /// larger than 64 KiB travel in chunks, so this bounds only system
        /// messages (membership gossip) in one frame.
        public var maxFrameSize: Int
        /// Largest message sent or accepted, in bytes (default 64 MiB, at
        /// most 2 GiB: the wire carries 32-bit lengths; a larger setting
        /// counts as 2 GiB, a negative one as 0). A larger outgoing message (or reply) fails
        /// with `messageTooLarge`.
        /// Messages larger than 64 KiB travel in chunks between the small
        /// ones; up to twice this waits to go to one node, and up to four
        /// times this is reassembled from all peers at once.
        public var maxMessageSize: Int
        /// Bytes that may wait to go to one node (default 64 MiB), replies
        /// included; a peer that asks and stops reading is cut off there.
        public var outboundCapacity: Int
        /// Inbound cluster connections open at once, and those of them still
        /// in their handshake; beyond either, new connections are closed on
        /// arrival and logged. Defaults derive from the descriptor limit
        /// (raised to its hard limit at start): three quarters of it less
        /// 64, and a quarter of that up to 256.
        public var maxInboundConnections: Int = ConnectionLimits.defaultInbound
        public var maxHandshakingConnections: Int = ConnectionLimits.defaultHandshaking
        /// The first wait before reconnecting to a node after a failed
        /// attempt (it doubles up to 5 s). For tests that need a long one.
        package var reconnectBackoffMin: Duration = .milliseconds(100)
        /// How long the large lane keeps its one-chunk window after an
        /// ordinary frame went to a node (see `LargeMessageLane`). For tests
        /// that must not depend on the machine's speed.
        package var smallTrafficLinger: Duration = .milliseconds(10)
        /// Opt in to the bulk lane (docs/PROTOCOL.md §6b): a large message
        /// sent while small ones go to the same node travels on a second
        /// connection, whose bytes a thread of its own copies at
        /// `SCHED_IDLE`, so that it leaves the cores to the small messages.
        /// Off by default: while the cores are all busy that thread may not
        /// run for a while (a message that stalls for half a second goes in
        /// chunks instead; docs/ARCHITECTURE.md, "Large messages", says
        /// what else is not known about it). Without TLS only. Both nodes of a pair opt
        /// in: a node without it refuses bulk connections, and its peers
        /// send in chunks.
        public var bulkLane = false
        /// The bulk lane's copiers at `SCHED_IDLE` (true) or at normal
        /// priority (tests, which check behaviour, not scheduling).
        package var bulkLaneAtIdlePriority = true
        /// See `Transport.Settings.bulkStallTimeout`; tests that check which
        /// lane a message took make it long.
        package var bulkStallTimeout: Duration = .milliseconds(500)
        public var name: String
        /// After work, how long a loop polls before blocking in the kernel.
        /// It trades a little CPU after each burst of messages for not waking
        /// a halted vCPU per message; see the README's W2 figures.
        public var spinBeforeBlock: Duration
        /// CPUs the loops are kept on (`ActorSystem.Settings.loopCPUs`);
        /// empty, the default: the kernel places them.
        public var loopCPUs: [Int] = []
        /// Nodes to join through (any one alive is enough). Empty: this node
        /// forms a cluster of its own, which others can join.
        public var seeds: [NodeAddress]
        /// Roles this member has (pools can place routees by role).
        public var roles: Set<String>
        /// Failure detection, downing and gossip settings.
        public var membership: MembershipSettings
        /// How often membership gossips, heartbeats and checks. Default 500 ms.
        public var membershipTick: Duration
        /// The management endpoint (GET /members, /health, /metrics): nil for
        /// none, 0 for any free port (see `managementPort`). Default nil.
        public var httpPort: Int?
        /// Where the management endpoint listens. Default loopback.
        public var httpHost: String
        /// The management endpoint's request timeout, connection limit and
        /// request size limits (defaults: 10 s, 64, 64 KiB head, 1 MiB body).
        public var httpLimits = ManagementLimits()
        /// A filter on every frame (the test kit's fault gate); nil, so no
        /// fault code on the path, unless a test or chaos run installs one.
        package var frameFilter: (any FrameFilter)?
        /// TLS on the cluster port (PROTOCOL.md §8): nil, the default, for
        /// none. With it, every connection runs mutually authenticated TLS
        /// 1.3 under the cluster secret's handshake.
        public var tls: TLS?
        /// Receives this node's counters as they change (`OscarMetrics`);
        /// nil, the default, pushes nothing.
        public var metrics: (any OscarMetrics.Handler)?
        /// Run once the node has started, before `init` returns: how a layer
        /// above adds its system actors and management routes.
        package var onStart: [@Sendable (ClusterNode) -> Void] = []

        /// The shortest secret a node accepts, in bytes. A peer the node
        /// dials sees one MAC made with the secret, and can try guesses
        /// against it offline at millions a second; 16 random bytes put that
        /// out of reach, a word or a default does not. `oscar secret` prints
        /// a good one.
        public static let minimumSecretBytes = 16

        /// The host in this node's identity.
        public var identityHost: String { advertisedHost ?? host }

        /// The PEM files of a node's TLS identity and the cluster CA (what
        /// `oscar certs` writes), read when the node starts and again by
        /// `ClusterNode.reloadTLS` (SIGUSR1 to a node runner).
        public struct TLS: Sendable {
            /// This node's certificate (its chain, leaf first). It must name,
            /// as SANs, every host peers reach this node at, the advertised
            /// host included.
            public var certificateFile: String
            /// The certificate's private key.
            public var privateKeyFile: String
            /// The cluster CA's certificate, which every peer's must chain to.
            public var caFile: String
            /// Also accept peers without TLS (authenticated by the secret
            /// alone): a switch for moving a running cluster to TLS one
            /// node at a time. Default false: they are refused.
            public var acceptsPlaintext: Bool
            /// Credentials already read from these files (by the node
            /// runner, which checks them with the configuration).
            package var loaded: TLSCredentials?

            public init(certificateFile: String, privateKeyFile: String, caFile: String, acceptsPlaintext: Bool = false)
            {
                self.certificateFile = certificateFile
                self.privateKeyFile = privateKeyFile
                self.caFile = caFile
                self.acceptsPlaintext = acceptsPlaintext
            }

            /// Reads the files (once per start), or says which and why not.
            package func load() throws(TransportError) -> TLSCredentials {
                if let loaded { return loaded }
                return try read()
            }

            /// Reads the files now, even when they were read before (a
            /// reload). Reads the disk: call it off the loop.
            package func read() throws(TransportError) -> TLSCredentials {
                do {
                    return try TLSCredentials(
                        files: .init(certificateChain: certificateFile, privateKey: privateKeyFile, trustedCA: caFile))
                } catch {
                    throw .tlsCredentials(
                        "\(error) (tls-cert \(certificateFile), tls-key \(privateKeyFile), tls-ca \(caFile))")
                }
            }
        }

        public init(
            host: String = "127.0.0.1", port: Int = 0, secret: String,
            loopCount: Int = ActorSystem.Settings.defaultLoopCount,
            mailboxCapacity: Int = 262_144, maxFrameSize: Int = 4 << 20, maxMessageSize: Int = 64 << 20,
            outboundCapacity: Int = 64 << 20,
            name: String = "oscar", spinBeforeBlock: Duration = .microseconds(100), seeds: [NodeAddress] = [],
            roles: Set<String> = [], membership: MembershipSettings = .init(),
            membershipTick: Duration = .milliseconds(500), httpPort: Int? = nil, httpHost: String = "127.0.0.1"
        ) {
            self.host = host
            self.port = port
            self.secret = secret
            self.loopCount = loopCount
            self.mailboxCapacity = mailboxCapacity
            self.maxFrameSize = maxFrameSize
            self.maxMessageSize = maxMessageSize
            self.outboundCapacity = outboundCapacity
            self.name = name
            self.spinBeforeBlock = spinBeforeBlock
            self.seeds = seeds
            self.roles = roles
            self.membership = membership
            self.membershipTick = membershipTick
            self.httpPort = httpPort
            self.httpHost = httpHost
        }
    }

    public let system: ActorSystem
    private let hub = ClusterEventHub()
    /// What `retain` keeps until shutdown.
    let retained = Mutex<[any AnyObject & Sendable]>([])
    /// The filter on this node's frames, when a test or chaos run installed
    /// one (`Settings.frameFilter`).
    package let frameFilter: (any FrameFilter)?
    /// Management routes a layer above added (the test kit's `POST /faults`).
    private let extraRoutes = Mutex<[String: ManagementRoute]>([:])
    private let replayGuard = Mutex(ReplayGuard())
    private let managementAccess: ManagementAccess
    private let receptionistListings = ReceptionistListings()

    /// The cluster-wide receptionist (see `Receptionist`).
    public var receptionist: Receptionist {
        Receptionist(
            ref: system.ref(for: ActorAddress(node: address, path: ReceptionistActor.path)),
            listings: receptionistListings)
    }
    /// The node's counters (the benchmarks read which lane carried what).
    package let stats: NodeStats
    private let http = Mutex<HTTPServer?>(nil)
    /// The network side; `reloadTLS` swaps its credentials.
    let transport: Transport
    /// Where this node's TLS identity is read from; nil without TLS.
    let tlsFiles: Settings.TLS?

    /// The management endpoint's port, when it was asked for.
    public var managementPort: Int? { http.withLock { $0?.port } }

    /// This node: the host and the port it actually listens on, and its uid.
    public var address: NodeAddress { system.node }

    public init(
        settings: Settings, services: ServiceLocator = ServiceLocator(),
        _ build: (inout ActorSystemBuilder) -> Void = { _ in }
    ) throws(TransportError) {
        // Before anything is opened: bad files leave nothing to close.
        let tls = try settings.tls.map { (t) throws(TransportError) in
            TLSPolicy(credentials: try t.load(), acceptsPlaintext: t.acceptsPlaintext)
        }
        stats = NodeStats(handler: settings.metrics)
        let (fd, port) = try SocketAddress.listen(host: settings.host, port: settings.port)
        var systemSettings = ActorSystem.Settings(
            name: settings.name, loopCount: settings.loopCount, mailboxCapacity: settings.mailboxCapacity,
            node: .local(host: settings.identityHost, port: port), spinBeforeBlock: settings.spinBeforeBlock)
        systemSettings.loopCPUs = settings.loopCPUs
        system = ActorSystem(settings: systemSettings, services: services, build)
        guard settings.secret.utf8.count >= Settings.minimumSecretBytes else {
            throw .secretTooShort(settings.secret.utf8.count, minimum: Settings.minimumSecretBytes)
        }
        var transportSettings = Transport.Settings()
        transportSettings.maxInboundConnections = settings.maxInboundConnections
        transportSettings.maxHandshakingConnections = settings.maxHandshakingConnections
        let ceiling = Transport.Settings.sizeCeiling
        transportSettings.maxFrameSize = min(max(settings.maxFrameSize, 64 << 10), ceiling)
        let maxMessageSize = max(0, min(settings.maxMessageSize, ceiling))
        transportSettings.maxMessageSize = maxMessageSize
        transportSettings.largeOutboundCapacity = 2 * maxMessageSize
        transportSettings.reassemblyCapacity = 4 * maxMessageSize
        transportSettings.outboundCapacity = settings.outboundCapacity
        transportSettings.reconnectBackoffMin = settings.reconnectBackoffMin
        transportSettings.smallTrafficLinger = UInt64(settings.smallTrafficLinger.nanoseconds)
        transportSettings.bulkLane = settings.bulkLane
        transportSettings.bulkLaneAtIdlePriority = settings.bulkLaneAtIdlePriority
        transportSettings.bulkStallTimeout = settings.bulkStallTimeout
        transportSettings.reconnectBackoffMax = max(transportSettings.reconnectBackoffMax, settings.reconnectBackoffMin)
        transportSettings.tls = tls
        let transport = Transport(
            system: system, secret: settings.secret, settings: transportSettings, stats: stats,
            frameFilter: settings.frameFilter)
        frameFilter = settings.frameFilter
        self.transport = transport
        tlsFiles = settings.tls
        managementAccess = ManagementAccess(host: settings.httpHost)
        system.attach(transport)
        try transport.listen(fd: fd)
        let (me, hub, stats) = (system.node, self.hub, self.stats)
        let (roles, seeds, membership, tick) = (
            settings.roles, settings.seeds, settings.membership, settings.membershipTick
        )
        for pool in system.clusterPools { hub.listen { pool.apply($0) } }
        for singleton in system.clusterSingletons {
            singleton.joinCluster()
            hub.listenView { singleton.apply(view: $0) }
        }
        let listings = receptionistListings
        if let receptionist = try? system.spawn(
            path: ReceptionistActor.path, on: transport.ioLoop,
            {
                ReceptionistActor(listings: listings, interval: .seconds(1))
            })
        {
            hub.listen { event in
                switch event {
                case .memberUp(let m): receptionist.tell(ReceptionistActor.MemberChanged(member: m.node, up: true))
                case .memberRemoved(let m), .memberDowned(let m):
                    receptionist.tell(ReceptionistActor.MemberChanged(member: m.node, up: false))
                default: break
                }
            }
        }
        _ = try? system.spawn(path: DeathWatch.path, on: transport.ioLoop) { DeathWatch() }
        // A fresh system: the path is free.
        if let membershipShell = try? system.spawn(
            path: MembershipShell.path, on: transport.ioLoop,
            {
                MembershipShell(
                    me: me, roles: roles, seeds: seeds, settings: membership, tickInterval: tick, events: hub,
                    stats: stats, redialNow: { [transport] in transport.redialNow($0) })
            })
        {
            transport.onIncarnationGone { membershipShell.tell(MembershipShell.Gone(uid: $0.uid)) }
        }
        if let httpPort = settings.httpPort {
            let secret = transport.secret
            let transport = self.transport
            let current: @Sendable () -> TLSCredentials? = { transport.currentTLSCredentials }
            let server = try HTTPServer(
                host: settings.httpHost, port: httpPort, limits: settings.httpLimits,
                tlsCredentials: transport.settings.tls == nil ? nil : current, loop: transport.ioLoop
            ) {
                [weak self] request in
                await self?.management(request, secret: secret)
                    ?? ManagementRoutes.Response(status: 503, contentType: "text/plain", body: "shutting down\n")
            }
            http.withLock { $0 = server }
        }
        for start in settings.onStart { start(self) }
    }

    /// Calls `body` with a cluster singleton's name whenever this node's
    /// instance of it starts (true) or is stopped (false).
    package func observeSingletons(_ body: @escaping @Sendable (_ name: String, _ started: Bool) -> Void) {
        for singleton in system.clusterSingletons { singleton.observe(body) }
    }

    /// Serves `path` on the management endpoint with `route`; a request
    /// other than GET reaches it only signed, fresh and not replayed
    /// (`SignedRequest`).
    package func addManagementRoute(_ path: String, _ route: @escaping ManagementRoute) {
        extraRoutes.withLock { $0[path] = route }
    }

    private func management(_ request: ManagementRoutes.Request, secret: [UInt8]) async -> ManagementRoutes.Response {
        // Every request that may change something (and off loopback, every
        // read but /health) comes with a client certificate or is signed.
        let decision = managementAccess.decide(
            method: request.method, path: request.path, hasClientCertificate: request.clientCertificate != nil)
        if case .signatureNeeded(let why) = decision,
            var refusal = replayGuard.withLock({ $0.admit(request, secret: secret, now: Int64(time(nil))) })
        {
            refusal.response.body = "\(why): " + refusal.response.body
            return refusal.response
        }
        if let route = extraRoutes.withLock({ $0[request.path] }) { return await route(request) }
        let empty = MembershipSnapshot(members: [], unreachable: [], leader: nil, observer: address)
        let membership = (try? await self.membership(timeout: .seconds(2))) ?? empty
        let snapshot = ManagementRoutes.Snapshot(
            membership: membership, deadLetters: system.deadLetters, framesIn: stats.value(.framesIn),
            framesOut: stats.value(.framesOut), asksPending: stats.value(.asksPending),
            gossipRounds: stats.value(.gossipRounds), authenticationFailures: stats.value(.authenticationFailures),
            connectionsRefused: stats.value(.connectionsRefused), peersCutOff: stats.value(.peersCutOff),
            tlsRefusals: stats.value(.tlsRefusals), chunksOut: stats.value(.chunksOut),
            chunksIn: stats.value(.chunksIn), bulkMessagesOut: stats.value(.bulkMessagesOut),
            bulkMessagesIn: stats.value(.bulkMessagesIn), bulkFallbacks: stats.value(.bulkFallbacks))
        return ManagementRoutes.respond(request, snapshot)
    }

    /// Calls `body` with every membership event, in order, on the
    /// membership loop, before any `events` subscriber sees it.
    package func listen(_ body: @escaping @Sendable (ClusterEvent) -> Void) { hub.listen(body) }

    /// Calls `body` with the members that are up and reachable in this
    /// node's view, now and after every change, in order.
    package func listenPlaceable(_ body: @escaping @Sendable ([Member]) -> Void) { hub.listenPlaceable(body) }

    /// Membership changes as this node sees them, from now on.
    public var events: AsyncStream<ClusterEvent> { hub.subscribe() }

    /// Waits until this node is up and sees at least `members` members up
    /// and reachable (itself included), as swift-distributed-actors'
    /// `cluster.up(within:)` does; `AskError.timeout` when that takes longer
    /// than `timeout`. Returns the view that satisfied it.
    @discardableResult
    public func waitUntilUp(members: Int = 1, within timeout: Duration) async throws(AskError) -> MembershipSnapshot {
        let me = address
        let satisfied: @Sendable (MembershipSnapshot) -> Bool = { view in
            let up = view.members.filter { $0.status == .up && !view.unreachable.contains($0.uid) }
            return up.contains { $0.uid == me.uid } && up.count >= members
        }
        let changes = events  // subscribed before the first look, so no change is missed
        let deadline = ContinuousClock.now + timeout
        let result = await withTaskGroup(of: Result<MembershipSnapshot, AskError>?.self) { group in
            group.addTask {
                do throws(AskError) {
                    var view = try await self.membership(timeout: timeout)
                    if satisfied(view) { return .success(view) }
                    for await _ in changes {
                        view = try await self.membership(timeout: max(deadline - .now, .milliseconds(1)))
                        if satisfied(view) { return .success(view) }
                    }
                    return nil
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(until: deadline)  // the bound
                return .failure(.timeout(ActorAddress(node: me, path: MembershipShell.path), timeout))
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        switch result {
        case .success(let view): return view
        case .failure(let error): throw error
        case nil: throw .stopped(ActorAddress(node: me, path: MembershipShell.path))
        }
    }

    /// The members as `node` (this one by default) sees them.
    public func membership(
        of node: NodeAddress? = nil, timeout: Duration = .seconds(5)
    ) async throws(AskError)
        -> MembershipSnapshot
    {
        let ref = membershipRef(of: node ?? address)
        return try await ref.ask(MembershipShell.GetMembers(), timeout: timeout)
    }

    /// Leaves the cluster gracefully: leaving, exiting, removed, with no
    /// unreachable phase. `onRemoved` is called when it is done.
    public func leave() { membershipRef(of: address).tell(MembershipShell.Leave()) }

    /// The membership actor of a node (whichever incarnation is there).
    private func membershipRef(of node: NodeAddress) -> ActorRef {
        system.ref(for: MembershipShell.address(of: node))
    }

    /// Asks another node to leave the cluster gracefully.
    public func requestLeave(of node: NodeAddress, timeout: Duration = .seconds(5)) async throws(AskError) {
        let ref = membershipRef(of: node)
        ref.tell(MembershipShell.Leave())
        _ = try await ref.ask(Identify(), timeout: timeout)  // FIFO: the leave has arrived
    }

    /// Downs the member at `member` (host and port) as `node` (this one by
    /// default) sees it: it is removed without a leave, and stops itself when
    /// it learns. For operators, and with `Downing.manual`. Returns false if
    /// there was no such member.
    public func down(
        _ member: NodeAddress, via node: NodeAddress? = nil, timeout: Duration = .seconds(5)
    )
        async throws(AskError) -> Bool
    {
        try await membershipRef(of: node ?? address).ask(
            MembershipShell.Down(host: member.host, port: member.port), timeout: timeout)
    }

    /// Called once when membership says this node must stop: it left, or it
    /// was downed (keep-majority downing on the minority side, or an operator).
    public func onRemoved(_ body: @escaping @Sendable (String) -> Void) { hub.onShutdown(body) }

    /// A node dropped without `shutdown()` (an error escaped first) shuts
    /// down here, in order, while its system is still alive: its loops stop
    /// before anything they run could find the system gone.
    deinit {
        if EventLoop.current == nil { shutdown() }
    }

    /// Closes every connection (waiting asks fail with `nodeUnreachable`),
    /// stops every actor and loop.
    public func shutdown() {
        http.withLock { $0?.close() }
        system.shutdown()
        retained.withLock { $0.removeAll() }
    }
}
