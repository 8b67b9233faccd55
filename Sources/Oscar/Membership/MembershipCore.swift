import CoreEngine

/// Cluster membership as a pure reducer (a CoreEngine `Core`): join requests,
/// gossip, heartbeats and clock ticks go in; the new state comes out with the
/// directives the shell must perform (send gossip or heartbeats, publish
/// events, shut this node down) in its `outbox`.
///
/// Nothing here reads a clock, a socket or a global random generator: time
/// arrives with `.tick`, randomness from a seed in the state. The simulator
/// and the tests drive N of these with virtual time and a virtual network.
public struct MembershipCore: Core {
    public struct Settings: Sendable, Hashable {
        /// How a partition is resolved. Default `.keepMajority`.
        public enum Downing: Sendable, Hashable {
            /// After `stableAfter`, the side with the majority of members
            /// downs the others; a minority side downs itself. A tie goes to
            /// the side holding the lowest address.
            case keepMajority
            /// Members are downed only by an operator (`.down`).
            case manual
        }

        public var failureDetector = PhiAccrualDetector.Settings()
        /// Unreachable this long (without change) before downing acts.
        /// Default 5 s.
        public var stableAfter: Double = 5
        public var downing = Downing.keepMajority
        /// Members gossiped to per tick. Default 1.
        public var gossipFanout = 1
        /// How long the first seed tries the other seeds before it forms a
        /// new cluster (so a restarted first seed rejoins instead of
        /// splitting). Default 3 s.
        public var firstSeedTimeout: Double = 3

        public init() {}
    }

    public enum Directive: Sendable, Hashable {
        case sendJoin(to: NodeAddress, Member)
        case sendGossip(to: NodeAddress, Gossip)
        /// Ask a watched member for a heartbeat; it answers `sendHeartbeat`.
        case sendHeartbeatRequest(to: NodeAddress)
        case sendHeartbeat(to: NodeAddress)
        case publish(ClusterEvent)
        /// This node is down or removed: stop it.
        case shutDown(reason: String)
    }

    public enum Action: Sendable {
        /// Start: join the cluster through these seeds (empty for the first node).
        case join(seeds: [NodeAddress])
        /// Another node asks to join.
        case joinRequest(Member)
        /// Gossip received, and who sent it (to answer a sender that lacks
        /// the merged result).
        case gossip(Gossip, from: NodeAddress)
        /// A watcher asks for a heartbeat.
        case heartbeatRequest(from: NodeAddress)
        case heartbeat(from: UInt64)
        /// Time passes: now, in seconds on the caller's monotonic clock.
        case tick(now: Double)
        /// This node leaves gracefully.
        case leave
        /// An operator downs a member.
        case down(UInt64)
    }

    public struct State: Sendable {
        public var me: Member
        public var gossip = Gossip()
        public var now: Double = 0
        /// Directives produced by the last actions, for the shell to perform.
        public var outbox: [Directive] = []
        var seeds: [NodeAddress] = []
        var detectors: [UInt64: PhiAccrualDetector] = [:]
        /// When the set of unreachable members last changed (downing waits
        /// for it to be stable).
        var unreachableChangedAt: Double = 0
        var lastUnreachable: Set<UInt64> = []
        var random: SplitMix64
        var stopped = false
        /// False while this node waits for a seed to let it in. Until then it
        /// must not act as a leader of its one-member view: promoting itself
        /// to up would start a second cluster.
        var admitted = false
        /// Set when this node is the first of its seeds: it forms the cluster
        /// if no other seed answers by then.
        var formClusterAt: Double?
        /// A leave asked for while this node was still joining: carried out
        /// once it is up (joining → leaving is not a transition).
        var leaveWhenUp = false

        public init(me: NodeAddress, roles: Set<String> = [], seed: UInt64) {
            self.me = Member(node: me, roles: roles)
            self.random = SplitMix64(seed: seed)
        }

        /// This node's status in its own view.
        public var myStatus: MemberStatus { gossip.members[me.uid]?.status ?? me.status }
    }

    public let settings: Settings

    public init(settings: Settings = Settings()) { self.settings = settings }

    /// Up → leaving, gossiped at once to more members than a round does.
    private func startLeaving(_ s: inout State) {
        guard var me = s.gossip.members[s.me.uid], me.status.canMove(to: .leaving), me.status != .leaving else {
            return
        }
        s.leaveWhenUp = false
        me.status = .leaving
        s.gossip.update(me, by: s.me.uid)
        gossip(&s, count: settings.gossipFanout + 1)
    }

    public func reduce(state: State, action: Action) -> State {
        var s = state
        s.outbox = []
        guard !s.stopped else { return s }
        // Heartbeats are most of the traffic and never change the gossip:
        // handle them without diffing the state.
        switch action {
        case .heartbeatRequest(let watcher):
            s.outbox.append(.sendHeartbeat(to: watcher))
            return s
        case .heartbeat(let uid):
            // Only from members this node watches (the tick starts watching).
            s.detectors[uid]?.heartbeat(at: s.now)
            return s
        default: break
        }
        let before = s.gossip
        switch action {
        case .join(let seeds):
            let isMe = { (n: NodeAddress) in n.hasEndpoint(of: s.me.node) }
            s.seeds = seeds.filter { !isMe($0) }
            s.gossip.update(s.me, by: s.me.uid)
            if let first = seeds.first, isMe(first), !s.seeds.isEmpty {
                s.formClusterAt = s.now + settings.firstSeedTimeout
            }
            if s.seeds.isEmpty {
                // The first node forms the cluster on its own.
                s.admitted = true
                var me = s.me
                me.status = .up
                me.upNumber = 1
                s.gossip.update(me, by: me.uid)
            } else {
                s.outbox += s.seeds.map { .sendJoin(to: $0, s.me) }
            }
        case .joinRequest(let member):
            if s.gossip.members[member.uid] == nil {
                s.gossip.update(member, by: s.me.uid)
                s.outbox.append(.sendGossip(to: member.node, s.gossip))
            }
        case .gossip(let received, let sender):
            s.gossip = s.gossip.merged(with: received)
            s.gossip.markSeen(by: s.me.uid)
            // Answer a sender that lacks the merged state, or does not know
            // this node has seen it: that is how "seen" flows back to the
            // leader without waiting for a random gossip to reach it. One
            // exchange settles it (the second merge changes nothing).
            if s.gossip.version != received.version || !received.hasSeen(s.me.uid) {
                s.outbox.append(.sendGossip(to: sender, s.gossip))
            }
            if received.members.keys.contains(where: { $0 != s.me.uid }) { s.admitted = true }
        case .heartbeatRequest, .heartbeat: break  // handled above
        case .tick(let now):
            s.now = now
            tick(&s)
        case .leave:
            if s.myStatus == .joining { s.leaveWhenUp = true }
            startLeaving(&s)
        case .down(let uid):
            if var m = s.gossip.members[uid], m.status.canMove(to: .down), m.status != .down {
                m.status = .down
                s.gossip.update(m, by: s.me.uid)
            }
        }
        if s.leaveWhenUp, s.myStatus == .up { startLeaving(&s) }
        s.outbox += ClusterEvent.diff(from: before, to: s.gossip).map { .publish($0) }
        // Down or removed: out. Exiting: the leader removes this node without
        // waiting for it, so a graceful leave ends here.
        if s.myStatus == .removed || s.myStatus == .down || s.myStatus == .exiting {
            s.stopped = true
            s.outbox.append(.shutDown(reason: "this node is \(s.myStatus) in the cluster's view"))
        }
        return s
    }

    // MARK: - Each tick

    /// How many members watch each member: the ones just before it in
    /// address order. One watcher's observation spreads by gossip, so
    /// heartbeats cost O(N·k), not O(N²).
    public static let monitorsPerMember = 5

    /// The members `me` watches: the next `monitorsPerMember` after it, in
    /// address order, wrapping around, skipping exiting members (they are on
    /// their way out on purpose). Walks indices: copying member records was
    /// the cost at 1,000 nodes.
    static func monitored(by me: UInt64, in members: [Member]) -> [Member] {
        guard let mine = members.firstIndex(where: { $0.uid == me }) else { return [] }
        var out: [Member] = []
        var i = (mine + 1) % members.count
        while i != mine, out.count < monitorsPerMember {
            if members[i].status != .exiting { out.append(members[i]) }
            i = (i + 1) % members.count
        }
        return out
    }

    private func tick(_ s: inout State) {
        let others = Self.monitored(by: s.me.uid, in: s.gossip.current)
        // Request/response: whoever this node watches answers it, whatever
        // its own view of who watches whom (views differ while nodes join).
        s.outbox += others.map { .sendHeartbeatRequest(to: $0.node) }
        // Still joining and nobody answered: ask the seeds again, or, as the
        // first seed after its timeout, form the cluster.
        if !s.admitted, let at = s.formClusterAt, s.now >= at, s.gossip.current.count == 1 {
            s.admitted = true
            var me = s.me
            me.status = .up
            me.upNumber = 1
            s.gossip.update(me, by: me.uid)
        } else if s.myStatus == .joining, s.gossip.current.count == 1 {
            s.outbox += s.seeds.map { .sendJoin(to: $0, s.me) }
        }
        detect(&s, others)
        gossip(&s, count: settings.gossipFanout)
        if s.admitted, s.gossip.leader?.uid == s.me.uid { leaderActions(&s) }
        downing(&s)
    }

    private func detect(_ s: inout State, _ others: [Member]) {
        for member in others {
            let d =
                s.detectors[member.uid]
                ?? {
                    // Start watching with a heartbeat "now", so a member is not
                    // suspected before its first heartbeat could have arrived.
                    var fresh = PhiAccrualDetector(settings: settings.failureDetector)
                    fresh.heartbeat(at: s.now)
                    return fresh
                }()
            s.detectors[member.uid] = d
            let mine = s.gossip.reachability.observers[s.me.uid]?.unreachable.contains(member.uid) ?? false
            let available = d.isAvailable(at: s.now)
            if available == mine { s.gossip.observe(s.me.uid, reaches: member.uid, available) }
        }
        // No longer watched (the ring moved as members came and went): drop
        // the detector, whose last heartbeat would be stale if this node
        // watched the member again, and withdraw this node's verdict, which
        // it can no longer revise. The member's new watchers judge it.
        for uid in s.detectors.keys where !others.contains(where: { $0.uid == uid }) {
            s.detectors[uid] = nil
            if s.gossip.reachability.observers[s.me.uid]?.unreachable.contains(uid) ?? false {
                s.gossip.observe(s.me.uid, reaches: uid, true)
            }
        }
        let unreachable = s.gossip.unreachable
        if unreachable != s.lastUnreachable {
            s.lastUnreachable = unreachable
            s.unreachableChangedAt = s.now
        }
    }

    /// Gossips to `count` members, preferring ones that have not seen this
    /// state. Members that cannot take part (down, exiting, unreachable) are
    /// never chosen: preferring one that will never see the state would
    /// starve everyone else of gossip, and "seen" would never flow back.
    private func gossip(_ s: inout State, count: Int) {
        let g = s.gossip
        let me = s.me.uid
        func eligible(_ i: Int) -> Bool {
            let status = g.current[i].status
            return status != .down && status != .exiting && !g.unreachableFlags[i] && g.current[i].uid != me
        }
        // Two passes over indices, no arrays of members: count, then pick.
        var eligibleCount = 0
        var unseenCount = 0
        for i in g.current.indices where eligible(i) {
            eligibleCount += 1
            if !g.seenFlags[i] { unseenCount += 1 }
        }
        guard eligibleCount > 0 else { return }
        let onlyUnseen = unseenCount > 0
        let poolSize = onlyUnseen ? unseenCount : eligibleCount
        for _ in 0..<min(count, poolSize) {
            var pick = Int(nextRandom(&s) % UInt64(poolSize))
            for i in g.current.indices where eligible(i) && !(onlyUnseen && g.seenFlags[i]) {
                if pick == 0 {
                    s.outbox.append(.sendGossip(to: g.current[i].node, g))
                    break
                }
                pick -= 1
            }
        }
    }

    /// The leader moves members on once everyone reachable has seen the state.
    private func leaderActions(_ s: inout State) {
        guard s.gossip.isConverged else { return }
        var nextUp = (s.gossip.members.values.map(\.upNumber).max() ?? 0) + 1
        var changed = false
        for member in s.gossip.current {
            var m = member
            switch m.status {
            case .joining where s.gossip.isReachable(m.uid):
                m.status = .up
                m.upNumber = nextUp
                nextUp += 1
            case .leaving: m.status = .exiting
            case .exiting, .down: m.status = .removed
            default: continue
            }
            changed = s.gossip.update(m, by: s.me.uid) || changed
        }
        if changed { gossip(&s, count: settings.gossipFanout + 1) }
        // Gossip no longer goes to exiting members, so tell them directly:
        // seeing itself exiting is what lets a leaving node stop.
        for m in s.gossip.current where m.status == .exiting && m.uid != s.me.uid {
            s.outbox.append(.sendGossip(to: m.node, s.gossip))
        }
    }

    /// Keep-majority: once the unreachable set has been stable for
    /// `stableAfter`, the majority side's leader downs the unreachable; a
    /// minority side downs itself, so there are never two clusters.
    private func downing(_ s: inout State) {
        guard settings.downing == .keepMajority, !s.lastUnreachable.isEmpty,
            s.now - s.unreachableChangedAt >= settings.stableAfter
        else { return }
        let members = s.gossip.current.filter { $0.status != .down }
        let reachable = members.filter { !s.lastUnreachable.contains($0.uid) }
        let unreachable = members.filter { s.lastUnreachable.contains($0.uid) }
        let lowest = members.first  // address order
        let majority =
            reachable.count * 2 > members.count
            || (reachable.count * 2 == members.count && reachable.contains { $0.uid == lowest?.uid })
        if majority {
            guard s.gossip.leader?.uid == s.me.uid else { return }
            for var m in unreachable where m.status.canMove(to: .down) {
                m.status = .down
                s.gossip.update(m, by: s.me.uid)
            }
        } else if var me = s.gossip.members[s.me.uid], me.status.canMove(to: .down) {
            me.status = .down
            s.gossip.update(me, by: s.me.uid)
        }
    }

    private func nextRandom(_ s: inout State) -> UInt64 { s.random.next() }
}
