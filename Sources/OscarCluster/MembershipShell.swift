import CoreEngine
import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// The I/O half of membership: an actor at `/system/membership` on every node.
/// It runs the `MembershipCore` in a CoreEngine `Engine`, feeds it ticks, and
/// performs the directives each action returns by telling the membership
/// actors of other nodes, through the same transport as every other message.
/// It decides nothing itself.
///
/// It drives the engine with `send`, on its own loop: directives are
/// performed right there, in order, with no hop to another executor per
/// tick or heartbeat.
final class MembershipShell: Reactor {
    package static let path = "/system/membership"

    /// The membership actor of the node at that host and port, whichever
    /// incarnation is there (uid 0).
    package static func address(of node: NodeAddress) -> ActorAddress {
        ActorAddress(node: NodeAddress(host: node.host, port: node.port), path: path)
    }

    /// Everything nodes say to each other about membership: one message type,
    /// so one manifest, with the kind inside.
    ///
    /// Coded by hand as an array, `[tag, fields...]`, not by the synthesized
    /// coding of an enum with payloads (a map in a map, and a key search for
    /// every field): at rest a node codes about forty heartbeat messages a
    /// second, and at 64 idle nodes their synthesized coding alone was a
    /// sixth of all the nodes' CPU; with gossip's (flat too, `Gossip`'s
    /// coding), two fifths.
    struct Wire: Message {
        package enum Kind: Sendable {
            case join(Member)
            case gossip(Gossip, from: NodeAddress)
            case heartbeatRequest(NodeAddress)
            case heartbeat(UInt64)
        }
        package var kind: Kind
        package static var manifest: String { "oscar.membership" }

        init(kind: Kind) { self.kind = kind }

        package init(from decoder: any Decoder) throws {
            var fields = try decoder.unkeyedContainer()
            switch try fields.decode(UInt8.self) {
            case 0: kind = .join(try fields.decode(Member.self))
            case 1: kind = .gossip(try fields.decode(Gossip.self), from: try NodeAddress(fields: &fields))
            case 2: kind = .heartbeatRequest(try NodeAddress(fields: &fields))
            case 3: kind = .heartbeat(try fields.decode(UInt64.self))
            case let tag:
                throw DecodingError.dataCorruptedError(
                    in: fields, debugDescription: "unknown membership message kind \(tag)")
            }
            guard fields.isAtEnd else {
                throw DecodingError.dataCorruptedError(in: fields, debugDescription: "items after the message's fields")
            }
        }

        package func encode(to encoder: any Encoder) throws {
            var fields = encoder.unkeyedContainer()
            switch kind {
            case .join(let member):
                try fields.encode(0 as UInt8)
                try fields.encode(member)
            case .gossip(let gossip, let from):
                try fields.encode(1 as UInt8)
                try fields.encode(gossip)
                try from.encodeFields(to: &fields)
            case .heartbeatRequest(let from):
                try fields.encode(2 as UInt8)
                try from.encodeFields(to: &fields)
            case .heartbeat(let uid):
                try fields.encode(3 as UInt8)
                try fields.encode(uid)
            }
        }
    }

    struct Tick: Message {}
    /// From the transport: the process of this incarnation is gone
    /// (`Transport.onIncarnationGone`).
    struct Gone: Message {
        var uid: UInt64
    }
    struct Leave: Message {}
    /// An operator downs the member at this address (whichever incarnation
    /// is current); replies whether there was such a member.
    struct Down: Message {
        package typealias Reply = Bool
        package var host: String
        package var port: Int
        package static var manifest: String { "oscar.down" }
    }

    /// The members as this node sees them, for `oscar members` and /members.
    struct GetMembers: Message {
        package typealias Reply = Snapshot
        package static var manifest: String { "oscar.members" }
    }

    typealias Snapshot = MembershipSnapshot

    private let engine: Engine<MembershipCore>
    private let seeds: [NodeAddress]
    private let tickInterval: Duration
    private let events: ClusterEventHub
    private let stats: NodeStats
    /// Lets the next message to a node dial it at once (`Transport.redialNow`).
    private let redialNow: @Sendable (NodeAddress) -> Void
    private var context: ActorContext?
    private let clock = ContinuousClock()
    private let start: ContinuousClock.Instant
    private var timer: LoopTimer?

    init(
        me: NodeAddress, roles: Set<String>, seeds: [NodeAddress], settings: MembershipCore.Settings,
        tickInterval: Duration, events: ClusterEventHub, stats: NodeStats,
        redialNow: @escaping @Sendable (NodeAddress) -> Void = { _ in }
    ) {
        self.redialNow = redialNow
        engine = Engine(
            MembershipCore(settings: settings), state: MembershipCore.State(me: me, roles: roles, seed: me.uid))
        self.seeds = seeds
        self.tickInterval = tickInterval
        self.events = events
        self.stats = stats
        start = clock.now
    }

    package static func reactions(_ r: inout Reactions<MembershipShell>) {
        r.on(
            Wire.self,
            do: { me, m in
                switch m.kind {
                case .join(let member): me.apply(.joinRequest(member))
                case .gossip(let gossip, let from): me.apply(.gossip(gossip, from: from))
                case .heartbeatRequest(let from): me.apply(.heartbeatRequest(from: from))
                case .heartbeat(let uid): me.apply(.heartbeat(from: uid))
                }
            })
        r.on(
            Tick.self,
            do: { me, _ in
                me.stats.add(.gossipRounds)
                me.apply(.tick(now: me.now))
            })
        r.on(Leave.self, do: { me, _ in me.apply(.leave) })
        r.on(Gone.self, do: { me, m in me.apply(.incarnationGone(m.uid)) })
        r.on(
            Down.self,
            result: { me, m in
                let endpoint = NodeAddress(host: m.host, port: m.port)
                guard
                    let member = me.engine.withState({ s in
                        s.gossip.current.first(where: { $0.node.hasEndpoint(of: endpoint) })
                    })
                else { return false }
                me.apply(.down(member.uid))
                return true
            })
        r.on(
            GetMembers.self,
            result: { me, _ in
                me.engine.withState { s in
                    MembershipSnapshot(
                        members: s.gossip.current, unreachable: s.gossip.unreachable,
                        leader: s.gossip.leader?.node, observer: s.me.node)
                }
            })
    }

    package func started(_ context: ActorContext) {
        self.context = context
        apply(.join(seeds: seeds))
        scheduleTick()
    }

    package func stopped() {
        if let timer, let loop = EventLoop.current { loop.cancelTimer(timer) }
        events.finish()
    }

    private var now: Double { (clock.now - start).inSeconds }

    private func scheduleTick() {
        guard let loop = EventLoop.current, let context else { return }
        let me = context.ref
        timer = loop.scheduleTimer(after: tickInterval) { [weak self] in
            me.tell(Tick())
            self?.scheduleTick()
        }
    }

    /// The members last published as placeable (up and reachable).
    private var placeable: [UInt64] = []
    /// The view last published: current members, every status.
    private var view: [Member] = []

    private func apply(_ action: MembershipCore.Action) {
        let directives = engine.send(action)
        let (nowPlaceable, me, nowView) = engine.withState { s in
            let gossip = s.gossip
            return (
                gossip.current.filter { $0.status == .up && !gossip.unreachable.contains($0.uid) }, s.me, gossip.current
            )
        }
        if nowPlaceable.map(\.uid) != placeable {
            placeable = nowPlaceable.map(\.uid)
            events.publishPlaceable(nowPlaceable)
        }
        guard let context else { return }
        for directive in directives {
            switch directive {
            case .sendJoin(let to, let member): send(.join(member), to: to, context)
            case .sendGossip(let to, let gossip): send(.gossip(gossip, from: me.node), to: to, context)
            case .sendHeartbeatRequest(let to): send(.heartbeatRequest(me.node), to: to, context)
            case .probe(let to):
                redialNow(to)
                send(.heartbeatRequest(me.node), to: to, context)
            case .sendHeartbeat(let to): send(.heartbeat(me.uid), to: to, context)
            case .publish(let event):
                OscarLog.shared.info("cluster: \(event)")
                switch event {
                case .memberRemoved(let m), .memberDowned(let m): context.system?.nodeRemoved(m.node)
                default: break
                }
                events.publish(event)
            case .shutDown(let reason):
                OscarLog.shared.warning("cluster: \(reason); this node stops")
                events.publish(.leaderChanged(nil))
                events.requestShutdown(reason)
            }
        }
        if nowView != view {
            view = nowView
            events.publishView(nowView)
        }
    }

    private func send(_ kind: Wire.Kind, to node: NodeAddress, _ context: ActorContext) {
        context.system?.ref(for: Self.address(of: node)).tell(Wire(kind: kind))
    }
}

/// Hands cluster events to subscribers as AsyncStreams, and tells the node
/// when membership says it must stop.
final class ClusterEventHub: Sendable {
    private struct State {
        var subscribers: [Int: AsyncStream<ClusterEvent>.Continuation] = [:]
        var next = 0
        var onShutdown: (@Sendable (String) -> Void)?
        var listeners: [@Sendable (ClusterEvent) -> Void] = []
        var finished = false
        var placeable: [Member] = []
        var placeableListeners: [@Sendable ([Member]) -> Void] = []
        var viewListeners: [@Sendable ([Member]) -> Void] = []
    }
    private let state = Mutex(State())

    func subscribe() -> AsyncStream<ClusterEvent> {
        let (stream, continuation) = AsyncStream<ClusterEvent>.makeStream()
        let finished = state.withLock { s -> Bool in
            if s.finished { return true }
            s.next += 1
            s.subscribers[s.next] = continuation
            return false
        }
        if finished { continuation.finish() }
        return stream
    }

    package func publish(_ event: ClusterEvent) {
        let (subscribers, listeners) = state.withLock { (Array($0.subscribers.values), $0.listeners) }
        for listen in listeners { listen(event) }
        for c in subscribers { c.yield(event) }
    }

    /// The members that are up and reachable in this node's view, after
    /// every change: the listeners are called under the hub's lock, so they
    /// see the sets in order (a listener must not call back into the hub).
    func publishPlaceable(_ members: [Member]) {
        state.withLock { s in
            s.placeable = members
            for listen in s.placeableListeners { listen(members) }
        }
    }

    /// Calls `body` with the up and reachable members now, then after every change.
    package func listenPlaceable(_ body: @escaping @Sendable ([Member]) -> Void) {
        state.withLock { s in
            s.placeableListeners.append(body)
            body(s.placeable)
        }
    }

    /// After every change, the whole view: current members, every status.
    func publishView(_ members: [Member]) {
        for listen in state.withLock({ $0.viewListeners }) { listen(members) }
    }

    /// Calls `body` with this node's whole view after every change, on the
    /// membership's loop, after that change's events: for parts that decide
    /// from the view as a whole (a cluster singleton), not from events one
    /// at a time.
    package func listenView(_ body: @escaping @Sendable ([Member]) -> Void) {
        state.withLock { $0.viewListeners.append(body) }
    }

    /// Calls `body` with every event, in order, on the membership's loop,
    /// before subscribers see it: for parts of the node (cluster pools) that
    /// must follow membership without a task of their own.
    package func listen(_ body: @escaping @Sendable (ClusterEvent) -> Void) {
        state.withLock { $0.listeners.append(body) }
    }

    package func finish() {
        let all = state.withLock { s -> [AsyncStream<ClusterEvent>.Continuation] in
            s.finished = true
            defer { s.subscribers.removeAll() }
            return Array(s.subscribers.values)
        }
        for c in all { c.finish() }
    }

    func onShutdown(_ body: @escaping @Sendable (String) -> Void) { state.withLock { $0.onShutdown = body } }

    func requestShutdown(_ reason: String) {
        state.withLock { $0.onShutdown }?(reason)
    }
}

/// The cluster's members as one node sees them.
public struct MembershipSnapshot: Codable, Sendable {
    /// Current members (not removed), in address order.
    public var members: [Member]
    /// Uids of members some member observes as unreachable.
    public var unreachable: Set<UInt64>
    public var leader: NodeAddress?
    /// The node whose view this is.
    public var observer: NodeAddress
}
