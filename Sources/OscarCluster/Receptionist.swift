import CoreEngine
import OscarBase
import OscarCBOR
import OscarMembership
import OscarRemote
import OscarRuntime
import Synchronization

/// A typed name actors check in under: `ReceptionistKey<Work>("workers")`
/// lists actors that take `Work`.
public struct ReceptionistKey<M: Message>: Sendable, Hashable {
    public let id: String
    public init(_ id: String) { self.id = id }
}

/// The cluster-wide receptionist: actors check in under a key on any node,
/// and any node looks a key up or follows its listing.
///
/// Each node owns its own check-ins and sends all of them, with a version,
/// to every member whenever they change, and to a member as it comes up. A
/// node keeps the newest version it got from each node, so listings converge
/// after membership changes; a removed or downed node's check-ins leave
/// every listing, and a local actor that stops leaves its own. For a message
/// lost meanwhile (a connection cut), every second a node tells a few
/// members, in turn, only its version; one that holds an older one asks for
/// the check-ins. At rest that is a few small messages a node each second,
/// whatever the cluster's size (sending every listing to every member each
/// second grew with its square), and none from a node that checks nothing in.
public struct Receptionist: Sendable {
    package let ref: ActorRef
    let listings: ReceptionistListings

    /// Checks `actor` in under `key` (idempotent).
    public func register<M: Message>(_ actor: ActorRef, as key: ReceptionistKey<M>) {
        ref.tell(ReceptionistActor.Register(key: key.id, actor: actor))
    }

    /// Checks `actor` out of `key`.
    public func deregister<M: Message>(_ actor: ActorRef, from key: ReceptionistKey<M>) {
        ref.tell(ReceptionistActor.Deregister(key: key.id, actor: actor))
    }

    /// The actors checked in under `key` on any node, as this node knows them.
    public func lookup<M: Message>(_ key: ReceptionistKey<M>) -> Set<ActorRef> { listings.current(key.id) }

    /// The listing of `key`: now, then after every change.
    public func listing<M: Message>(_ key: ReceptionistKey<M>) -> AsyncStream<Set<ActorRef>> {
        listings.subscribe(key.id)
    }
}

/// Listings as the receptionist actor last computed them, readable from any
/// thread, and their subscribers.
final class ReceptionistListings: Sendable {
    private struct State {
        var listings: [String: Set<ActorRef>] = [:]
        var subscribers: [String: [Int: AsyncStream<Set<ActorRef>>.Continuation]] = [:]
        var next = 0
    }
    private let state = Mutex(State())

    package func current(_ key: String) -> Set<ActorRef> { state.withLock { $0.listings[key] ?? [] } }

    func subscribe(_ key: String) -> AsyncStream<Set<ActorRef>> {
        let (stream, continuation) = AsyncStream<Set<ActorRef>>.makeStream()
        let (id, now) = state.withLock { s -> (Int, Set<ActorRef>) in
            s.next &+= 1
            s.subscribers[key, default: [:]][s.next] = continuation
            return (s.next, s.listings[key] ?? [])
        }
        continuation.yield(now)
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers[key]?.removeValue(forKey: id) }
        }
        return stream
    }

    /// Publishes the listings that changed.
    func update(_ listings: [String: Set<ActorRef>]) {
        let changed = state.withLock { s -> [(Set<ActorRef>, [AsyncStream<Set<ActorRef>>.Continuation])] in
            var out: [(Set<ActorRef>, [AsyncStream<Set<ActorRef>>.Continuation])] = []
            for key in Set(s.listings.keys).union(listings.keys) where s.listings[key] != listings[key] {
                out.append((listings[key] ?? [], Array((s.subscribers[key] ?? [:]).values)))
            }
            s.listings = listings
            return out
        }
        for (listing, continuations) in changed { for c in continuations { c.yield(listing) } }
    }

    package func finish() {
        let all = state.withLock { s in s.subscribers.values.flatMap(\.values) }
        for c in all { c.finish() }
    }
}

/// The receptionist of one node, at `/system/receptionist`.
final class ReceptionistActor: Reactor {
    package static let path = "/system/receptionist"

    struct Register: Message {
        var key: String
        var actor: ActorRef
    }
    struct Deregister: Message {
        package var key: String
        package var actor: ActorRef
    }
    /// A node's own check-ins, by key, versioned by that node.
    struct Entries: Message {
        package var node: NodeAddress
        package var version: Int
        var entries: [String: [ActorRef]]
    }
    struct MemberChanged: Message {
        package var member: NodeAddress
        package var up: Bool
    }
    /// A node's check-in version, sent in turn to a few members a second.
    struct Version: Message {
        var node: NodeAddress
        var version: Int
    }
    /// Asks a node for its check-ins.
    struct Pull: Message {
        var node: NodeAddress
    }
    struct Tick: Message {}

    /// Members told this node's version on each tick.
    static let versionFanout = 3

    private let listings: ReceptionistListings
    private let interval: Duration
    private var context: ActorContext?
    private var timer: LoopTimer?
    private var mine: [String: Set<ActorRef>] = [:]
    private var version = 0
    /// Other nodes' check-ins, by uid.
    private var others: [UInt64: Entries] = [:]
    private var members: [UInt64: NodeAddress] = [:]
    /// Where the next tick's version messages start, in `members`' uid order.
    private var nextInTurn: UInt64 = 0
    /// Nodes whose check-ins came before they were members here.
    private var missed: Set<UInt64> = []
    static let missedLimit = 1024

    init(listings: ReceptionistListings, interval: Duration) {
        self.listings = listings
        self.interval = interval
    }

    package static func reactions(_ r: inout Reactions<ReceptionistActor>) {
        r.on(
            Register.self,
            do: { me, m in
                guard me.mine[m.key, default: []].insert(m.actor).inserted else { return }
                me.context?.watch(m.actor)
                me.changed()
            })
        r.on(
            Deregister.self,
            do: { me, m in
                guard me.mine[m.key]?.remove(m.actor) != nil else { return }
                me.changed()
            })
        r.on(
            Terminated.self,
            do: { me, m in
                var any = false
                for key in me.mine.keys where me.mine[key]?.remove(m.actor) != nil { any = true }
                if any { me.changed() }
            })
        r.on(
            Entries.self,
            do: { me, m in
                guard m.node.uid != me.context?.node.uid else { return }
                guard me.members[m.node.uid] != nil else {
                    // Before this node knew it a member: pulled again once it
                    // is (a bounded note; beyond it, the version told in turn
                    // repairs).
                    if me.missed.count < Self.missedLimit { me.missed.insert(m.node.uid) }
                    return
                }
                guard m.version > me.others[m.node.uid]?.version ?? -1 else { return }
                me.others[m.node.uid] = m
                me.publish()
            })
        r.on(
            MemberChanged.self,
            do: { me, m in
                guard m.member.uid != me.context?.node.uid else { return }
                if m.up {
                    me.members[m.member.uid] = m.member
                    // Nothing to send, nothing to dial: a cluster whose nodes
                    // check nothing in forms no full mesh for the receptionist.
                    if me.hasCheckIns { me.send(to: m.member) }
                    if me.missed.remove(m.member.uid) != nil, let node = me.context?.node {
                        me.tell(m.member, Pull(node: node))
                    }
                } else {
                    me.missed.remove(m.member.uid)
                    me.members.removeValue(forKey: m.member.uid)
                    if me.others.removeValue(forKey: m.member.uid) != nil { me.publish() }
                }
            })
        r.on(
            Version.self,
            do: { me, m in
                guard let from = me.members[m.node.uid], m.version > me.others[m.node.uid]?.version ?? 0,
                    let node = me.context?.node
                else { return }
                me.tell(from, Pull(node: node))
            })
        r.on(
            Pull.self,
            do: { me, m in
                guard let from = me.members[m.node.uid] else { return }
                me.send(to: from)
            })
        r.on(Tick.self, do: { me, _ in me.tellVersionInTurn() })
    }

    package func started(_ context: ActorContext) {
        self.context = context
        scheduleTick()
    }

    package func stopped() {
        if let timer, let loop = EventLoop.current { loop.cancelTimer(timer) }
        listings.finish()
    }

    private func scheduleTick() {
        guard let loop = EventLoop.current, let context else { return }
        let me = context.ref
        timer = loop.scheduleTimer(after: interval) { [weak self] in
            me.tell(Tick())
            self?.scheduleTick()
        }
    }

    /// Tells this node's version to the next `versionFanout` members in uid
    /// order, so each member hears it every members/fanout ticks.
    private func tellVersionInTurn() {
        // Version 0: nothing ever checked in, which every node assumes of a
        // node it has heard nothing from.
        guard version > 0, let node = context?.node, !members.isEmpty else { return }
        let order = members.keys.sorted()
        let start = order.firstIndex { $0 >= nextInTurn } ?? 0
        let count = min(Self.versionFanout, order.count)
        for i in 0..<count {
            let uid = order[(start + i) % order.count]
            if let member = members[uid] { tell(member, Version(node: node, version: version)) }
        }
        nextInTurn = order[(start + count) % order.count]
    }

    private func changed() {
        version &+= 1
        publish()
        pushAll()
    }

    private func pushAll() { for node in members.values { send(to: node) } }

    private var hasCheckIns: Bool { mine.values.contains { !$0.isEmpty } }

    /// Sends this node's check-ins to `node`'s receptionist.
    private func send(to node: NodeAddress) {
        guard let context else { return }
        tell(node, Entries(node: context.node, version: version, entries: mine.mapValues { Array($0) }))
    }

    /// Every use of the system is checked: when it is going away (it
    /// deinitialises without `shutdown()`) there is no one left to tell.
    private func tell<M: Message>(_ node: NodeAddress, _ message: M) {
        guard let system = context?.system else { return }
        system.ref(for: ActorAddress(node: node, path: Self.path)).tell(message)
    }

    private func publish() {
        var all = mine
        let system = context?.system
        for entries in others.values {
            for (key, refs) in entries.entries {
                // Refs decoded from another node resolve to remote refs here.
                all[key, default: []].formUnion(refs.map { system?.ref(for: $0.address) ?? $0 })
            }
        }
        listings.update(all.filter { !$0.value.isEmpty })
    }
}
