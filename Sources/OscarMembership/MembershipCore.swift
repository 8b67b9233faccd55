import CoreEngine
import OscarBase

/// Cluster membership as a pure reducer (a CoreEngine `Core`): join requests,
/// gossip, heartbeats and clock ticks go in; the state changes in place and
/// `reduce` returns the directives the shell must perform (send gossip or
/// heartbeats, publish events, shut this node down), in order. The cluster
/// node runs it in an `Engine` on the membership actor's loop.
///
/// Nothing here reads a clock, a socket or a global random generator: time
/// arrives with `.tick`, randomness from a seed in the state. The simulator
/// and the tests drive N of these with virtual time and a virtual network.
package struct MembershipCore: Core {
    package typealias Settings = MembershipSettings

    public enum Directive: Sendable, Hashable {
        case sendJoin(to: NodeAddress, Member)
        case sendGossip(to: NodeAddress, Gossip)
        /// Ask a watched member for a heartbeat; it answers `sendHeartbeat`.
        case sendHeartbeatRequest(to: NodeAddress)
        /// The leader's probe of a downed member: a heartbeat request that
        /// dials at once, past the transport's reconnect backoff, so that a
        /// refusal (the process is gone) is learnt within a tick of the down.
        case probe(to: NodeAddress)
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
        /// The process of incarnation `uid` is gone: this node had reached
        /// it at its address, and a dial there was refused (nothing
        /// listens). A partition or a frozen process never produces this.
        case incarnationGone(UInt64)
    }

    public struct State: Sendable {
        public var me: Member
        public var gossip = Gossip()
        public var now: Double = 0
        package var seeds: [NodeAddress] = []
        var detectors: [UInt64: PhiAccrualDetector] = [:]
        /// Watched members asked again this silence (see `retryPhi`).
        var retried: Set<UInt64> = []
        /// When the set of unreachable members last changed (downing waits
        /// for it to be stable).
        var unreachableChangedAt: Double = 0
        /// Members unreachable in this view that are neither down nor
        /// exiting: the ones downing must decide about.
        var lastUnreachable: Set<UInt64> = []
        /// When the current episode of unreachability began: since
        /// `lastUnreachable` was last non-empty after a state that everyone
        /// had seen with nobody unreachable. An episode does not end when the
        /// set empties in this view alone: a majority may already have
        /// downed this node on a stable view of the same episode, and this
        /// node must down itself within `stableAfter +
        /// decideWhenUnstableAfter` of that episode's start, before the
        /// majority's removal margin ends (docs/DOWNING.md). Restarting the
        /// clock at a heal that only this node had seen let a node cut off
        /// again at once outlive its removal (split-brain search, seed
        /// 1796279599).
        var unstableSince: Double?
        /// Since when each member of `lastUnreachable` has been in it.
        var unreachableSince: [UInt64: Double] = [:]
        /// When this node first saw each current member down: it is removed
        /// `removalMargin` later.
        var downSince: [UInt64: Double] = [:]
        /// Downed members whose process this node knows has stopped
        /// (`incarnationGone` after the down). One needs no removal margin: the
        /// margin is the time a downed member that still runs has to notice
        /// and down itself, and this one does not run.
        var gone: Set<UInt64> = []
        /// The member table of the last converged state with nobody
        /// unreachable: every member has seen the members it holds up
        /// (`isSettled`), so every side counts them as voters. See
        /// `KeepMajority`. The table itself, not a set of uids: a simulator
        /// running thousands of nodes shares it among every node that holds
        /// that state, where a set per node grew with N². (A real node keeps
        /// one table alive, which may be one state behind its own.)
        var settledView: [UInt64: Member] = [:]

        /// Whether every member is known to have seen `uid` up.
        package func isSettled(_ uid: UInt64) -> Bool { settledView[uid].map(Self.isSettledRecord) ?? false }

        /// How many members are settled.
        package var settledCount: Int { settledView.values.count(where: Self.isSettledRecord) }

        /// A record of the settling state that shows its member up (or on).
        private static func isSettledRecord(_ m: Member) -> Bool {
            m.upNumber > 0 && m.status != .joining && m.status != .removed
        }
        /// Exiting members that sent this node a state naming themselves
        /// exiting: a member stops the moment it sees that, so these are
        /// gone. They count as voters nowhere and are removed at once.
        var exited: Set<UInt64> = []
        /// The last state the leader told every member was converged.
        var announced: VersionVector?
        /// When this node last ticked: a long gap means it was frozen.
        var lastTickAt: Double?
        package var random: SplitMix64
        package var stopped = false
        /// False while this node waits for a seed to let it in. Until then it
        /// must not act as a leader of its one-member view: promoting itself
        /// to up would start a second cluster.
        package var admitted = false
        /// Set when this node is the first of its seeds: it forms the cluster
        /// if no other seed answers by then.
        var formClusterAt: Double?
        /// Seeds (by endpoint, `host:port`) that asked this first seed to let
        /// them in while it was not admitted either, so belong to no cluster,
        /// and when each last asked: one that stops asking (it joined a
        /// cluster after all) no longer counts. The first seed forms a
        /// cluster only when every other seed counts, so a first seed
        /// restarted while a cluster lives on elsewhere (behind a partition,
        /// or with a seed still in it) waits and joins it instead of
        /// starting a second one.
        var seedsWithoutCluster: [String: Double] = [:]
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

    /// A seed counts as in no cluster while it has asked to join this
    /// recently: joining seeds ask every tick, and one that joined a
    /// cluster stops asking.
    static let seedEvidenceWindow = 1.5

    public init(settings: Settings = Settings()) { self.settings = settings }

    /// Up → leaving, gossiped at once to more members than a round does.
    private func startLeaving(_ s: inout State, _ out: inout [Directive]) {
        guard var me = s.gossip.members[s.me.uid], me.status.canMove(to: .leaving), me.status != .leaving else {
            return
        }
        s.leaveWhenUp = false
        me.status = .leaving
        s.gossip.update(me, by: s.me.uid)
        gossip(&s, &out, count: settings.gossipFanout + 1)
    }

    /// Effects are `Directive`s; every action is taken (an action that makes
    /// no sense in this state changes nothing).
    public typealias Effect = Directive

    public func reduce(_ s: inout State, _ action: Action) -> [Directive] {
        var out: [Directive] = []
        guard !s.stopped else { return out }
        // Heartbeats are most of the traffic and never change the gossip:
        // handle them without diffing the state.
        switch action {
        case .heartbeatRequest(let watcher):
            out.append(.sendHeartbeat(to: watcher))
            // A member this view has downed or removed still asks: it was
            // frozen or cut off when the news went round, and nobody gossips
            // to it any more. Tell it, so it stops before its removal can
            // let a singleton start elsewhere.
            if let status = s.gossip.members[watcher.uid]?.status, status == .down || status == .removed {
                out.append(.sendGossip(to: watcher, s.gossip))
            }
            return out
        case .heartbeat(let uid):
            // Only from members this node watches (the tick starts watching).
            s.detectors[uid]?.heartbeat(at: s.now)
            return out
        default: break
        }
        let before = s.gossip
        switch action {
        case .join(let seeds):
            let myNode = s.me.node
            let isMe = { (n: NodeAddress) in n.hasEndpoint(of: myNode) }
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
                out += s.seeds.map { .sendJoin(to: $0, s.me) }
            }
        case .joinRequest(let member):
            // Only a member of a cluster lets others in: two nodes that are
            // both still joining would otherwise form a cluster of their own
            // beside the one their seeds belong to.
            if !s.admitted, s.formClusterAt != nil, s.seeds.contains(where: { $0.hasEndpoint(of: member.node) }) {
                // Wait a full timeout after the last seed showed up, long
                // enough for a cluster that lives on without its seeds to
                // invite them (`inviteSeeds`) first.
                if s.seedsWithoutCluster.updateValue(s.now, forKey: member.node.description) == nil {
                    s.formClusterAt = max(s.formClusterAt ?? 0, s.now + settings.firstSeedTimeout)
                }
            }
            if s.admitted, s.gossip.members[member.uid] == nil {
                // A new incarnation holds the endpoint, so the old process
                // is gone: down it now (Akka does the same), and it stops
                // counting as a voter at once (`KeepMajority`).
                for var old in s.gossip.current
                where old.uid != member.uid && old.node.hasEndpoint(of: member.node) && old.status != .down {
                    old.status = .down
                    s.gossip.update(old, by: s.me.uid)
                }
                s.gossip.update(member, by: s.me.uid)
                out.append(.sendGossip(to: member.node, s.gossip))
            }
        case .gossip(let received, let sender):
            // A member takes gossip only about its own cluster: a state that
            // does not name it comes from another cluster (the seeds'
            // invitation below, or a second cluster's leader) and is not
            // merged, so two clusters never blend into one view.
            guard !s.admitted || received.members[s.me.uid] != nil else { return out }
            if received.members[sender.uid]?.status == .exiting { s.exited.insert(sender.uid) }
            s.gossip = s.gossip.merged(with: received)
            s.gossip.markSeen(by: s.me.uid)
            // Answer a sender that lacks the merged state, or does not know
            // this node has seen it: that is how "seen" flows back to the
            // leader without waiting for a random gossip to reach it. One
            // exchange settles it (the second merge changes nothing).
            if s.gossip.version != received.version || !received.hasSeen(s.me.uid) {
                out.append(.sendGossip(to: sender, s.gossip))
            }
            if received.members.keys.contains(where: { $0 != s.me.uid }) { s.admitted = true }
            if noteSettled(&s) { noteDowned(&s) }
        case .heartbeatRequest, .heartbeat: break  // handled above
        case .tick(let now):
            s.now = now
            if let last = s.lastTickAt, now - last > settings.frozenLimit ?? settings.removalMargin,
                s.admitted, s.myStatus != .exiting
            {
                // Frozen (SIGSTOP, a stalled machine) for longer than the
                // removal margin: the others may have downed this node while
                // it could not notice, and would remove it (and start a
                // singleton elsewhere) before it could see the stable window
                // out and down itself. It cannot tell, so it goes now.
                downSelf(&s)
            } else {
                tick(&s, &out)
            }
            s.lastTickAt = now
        case .leave:
            if s.myStatus == .joining { s.leaveWhenUp = true }
            startLeaving(&s, &out)
        case .down(let uid):
            if var m = s.gossip.members[uid], m.status.canMove(to: .down), m.status != .down {
                m.status = .down
                s.gossip.update(m, by: s.me.uid)
            }
        case .incarnationGone(let uid):
            // Only about a member this view has down already: the refusal
            // then came after the down. One about a member that is up (a
            // passing firewall rule, a moved address) would otherwise stay
            // on record, and remove it at once if it were cut off and
            // downed later while it still ran.
            if settings.removesRefusingMembers, s.gossip.members[uid]?.status == .down { s.gone.insert(uid) }
            // The leader acts on it now, not at its next tick: the refusal
            // answers its own probe (`probeDowned`), sent at a tick.
            if s.admitted, s.gossip.leader?.uid == s.me.uid { removeGone(&s, &out) }
        }
        if s.leaveWhenUp, s.myStatus == .up { startLeaving(&s, &out) }
        announceConvergence(&s, &out)
        out += ClusterEvent.diff(from: before, to: s.gossip).map { .publish($0) }
        // Down or removed: out. Exiting: the leader removes this node without
        // waiting for it, so a graceful leave ends here.
        if s.myStatus == .removed || s.myStatus == .down || s.myStatus == .exiting {
            s.stopped = true
            if s.myStatus == .exiting {
                // A leaver's last word, to every member: "I am exiting", so
                // each knows it is gone (`State.exited`) and no longer counts
                // it as a voter, even if the leader that would remove it
                // fails next.
                gossipToEveryMember(s, &out)
            }
            out.append(.shutDown(reason: "this node is \(s.myStatus) in the cluster's view"))
        }
        return out
    }

    // MARK: - Each tick

    /// How many members watch each member: the ones just before it in
    /// address order. One watcher's observation spreads by gossip, so
    /// heartbeats cost O(N·k), not O(N²).
    public static let monitorsPerMember = 5

    /// The members `me` watches: the next `monitorsPerMember` after it, in
    /// address order, wrapping around, skipping exiting members (they are on
    /// their way out on purpose) and downed ones (judged already, and not
    /// running: counted, five downed members in a row left the member after
    /// them watched by nobody alive, so its crash went unseen and the
    /// cluster never converged again). Walks indices: copying member
    /// records was the cost at 1,000 nodes.
    static func monitored(by me: UInt64, in members: [Member]) -> [Member] {
        guard let mine = members.firstIndex(where: { $0.uid == me }) else { return [] }
        return monitored(from: mine, in: members)
    }

    /// The same, for the member at index `mine` of `members`.
    static func monitored(from mine: Int, in members: [Member]) -> [Member] {
        var out: [Member] = []
        var i = (mine + 1) % members.count
        while i != mine, out.count < monitorsPerMember {
            if members[i].status != .exiting, members[i].status != .down { out.append(members[i]) }
            i = (i + 1) % members.count
        }
        return out
    }

    private func tick(_ s: inout State, _ out: inout [Directive]) {
        let others = s.gossip.currentIndex(of: s.me.uid).map { Self.monitored(from: $0, in: s.gossip.current) } ?? []
        // Request/response: whoever this node watches answers it, whatever
        // its own view of who watches whom (views differ while nodes join).
        out += others.map { .sendHeartbeatRequest(to: $0.node) }
        // Still joining and nobody answered: ask the seeds again, or, as the
        // first seed after its timeout, form the cluster.
        if !s.admitted, let at = s.formClusterAt, s.now >= at, s.gossip.current.count == 1,
            s.seedsWithoutCluster.values.filter({ s.now - $0 <= Self.seedEvidenceWindow }).count
                >= Set(s.seeds.map(\.description)).count
        {
            s.admitted = true
            var me = s.me
            me.status = .up
            me.upNumber = 1
            s.gossip.update(me, by: me.uid)
        } else if s.myStatus == .joining, s.gossip.current.count == 1 {
            out += s.seeds.map { .sendJoin(to: $0, s.me) }
        }
        detect(&s, others, &out)
        gossip(&s, &out, count: settings.gossipFanout)
        if s.admitted, s.gossip.leader?.uid == s.me.uid {
            leaderActions(&s, &out)
            inviteSeeds(&s, &out)
        }
        downing(&s)
        // After downing, so a member the leader downs now is probed now,
        // not a tick later.
        if s.admitted, s.gossip.leader?.uid == s.me.uid { probeDowned(s, &out) }
    }

    /// Phi at and above which a watcher, before it may judge a member
    /// unreachable, asks it again at once (`heartbeatRetries` more
    /// requests). A lost heartbeat request or reply is then not enough for
    /// a false suspicion: all of them must be lost. 0.3 is low enough that the tick before the
    /// one where phi reaches the threshold always retries (with the 100 ms
    /// floor on the deviation, phi half a tick before crossing 8 is at least
    /// 0.38), so a crashed member is judged at the same tick as without
    /// retries; a member answering every 500 ms stays near 0.
    public static let retryPhi = 0.3

    private func detect(_ s: inout State, _ others: [Member], _ out: inout [Directive]) {
        for member in others {
            if s.detectors[member.uid] == nil {
                // Start watching with a heartbeat "now", so a member is not
                // suspected before its first heartbeat could have arrived.
                var fresh = PhiAccrualDetector(settings: settings.failureDetector)
                fresh.heartbeat(at: s.now)
                s.detectors[member.uid] = fresh
            }
            let mine = s.gossip.reachability.observers[s.me.uid]?.unreachable.contains(member.uid) ?? false
            let phi = s.detectors[member.uid]?.phi(at: s.now) ?? 0
            let available = phi < settings.failureDetector.threshold
            if !mine, phi >= Self.retryPhi, settings.heartbeatRetries > 0 {
                if !s.retried.contains(member.uid) {
                    // Quiet for the first time in this silence: ask again
                    // before judging. Once a silence, not once a tick: a
                    // node too busy to answer in time would otherwise be
                    // sent more work the longer it stays busy (eight
                    // requests a tick from each watcher slowed the whole
                    // test suite).
                    s.retried.insert(member.uid)
                    for _ in 0..<settings.heartbeatRetries { out.append(.sendHeartbeatRequest(to: member.node)) }
                    continue
                }
            } else {
                s.retried.remove(member.uid)
            }
            if available == mine { s.gossip.observe(s.me.uid, reaches: member.uid, available) }
        }
        // No longer watched (the ring moved as members came and went): drop
        // the detector, whose last heartbeat would be stale if this node
        // watched the member again, and withdraw this node's verdict, which
        // it can no longer revise. The member's new watchers judge it.
        for uid in s.detectors.keys where !others.contains(where: { $0.uid == uid }) {
            s.detectors[uid] = nil
            s.retried.remove(uid)
            if s.gossip.reachability.observers[s.me.uid]?.unreachable.contains(uid) ?? false {
                s.gossip.observe(s.me.uid, reaches: uid, true)
            }
        }
        var unreachable = s.gossip.unreachable
        if !unreachable.isEmpty {
            unreachable = unreachable.filter { uid in
                s.gossip.members[uid].map { $0.status != .down && $0.status != .exiting } ?? false
            }
        }
        if unreachable != s.lastUnreachable {
            s.lastUnreachable = unreachable
            s.unreachableChangedAt = s.now
            s.unreachableSince = s.unreachableSince.filter { unreachable.contains($0.key) }
            for uid in unreachable where s.unreachableSince[uid] == nil { s.unreachableSince[uid] = s.now }
            if !unreachable.isEmpty { s.unstableSince = s.unstableSince ?? s.now }
        }
        if unreachable.isEmpty, s.unstableSince != nil, s.gossip.isConverged { s.unstableSince = nil }
        noteSettled(&s)
        noteDowned(&s)
    }

    /// The leader tells every member, once per state, that everyone has
    /// seen it (nobody unreachable): they learn at once which members are
    /// settled (`KeepMajority`) instead of a gossip round or two later, so a
    /// partition right after a join finds the new member counted.
    private func announceConvergence(_ s: inout State, _ out: inout [Directive]) {
        guard s.admitted, s.gossip.leader?.uid == s.me.uid, s.announced != s.gossip.version,
            s.gossip.unreachable.isEmpty, s.gossip.isConverged
        else { return }
        s.announced = s.gossip.version
        gossipToEveryMember(s, &out)
        noteSettled(&s)
        noteDowned(&s)
    }

    /// A converged view with nobody unreachable: every member has seen
    /// these members up, so they are settled.
    /// Returns whether the view was so.
    @discardableResult
    private func noteSettled(_ s: inout State) -> Bool {
        let g = s.gossip
        guard g.unreachable.isEmpty, g.isConverged else { return false }
        s.settledView = g.members  // a reference, not a copy
        return true
    }

    /// Keeps `downSince` and `exited` up to date with the view.
    private func noteDowned(_ s: inout State) {
        let g = s.gossip
        if !s.downSince.isEmpty { s.downSince = s.downSince.filter { g.members[$0.key]?.status == .down } }
        if !s.exited.isEmpty { s.exited = s.exited.filter { g.members[$0]?.status == .exiting } }
        if !s.gone.isEmpty { s.gone = s.gone.filter { g.members[$0]?.status == .down } }
        // The down flags, not a walk over members: this runs on every tick.
        for i in g.downFlags.setIndices where s.downSince[g.current[i].uid] == nil {
            s.downSince[g.current[i].uid] = s.now
        }
    }

    /// Sends this node's state to every other member that is not down, at
    /// once: for news every member should have now rather than a gossip
    /// round at a time.
    private func gossipToEveryMember(_ s: State, _ out: inout [Directive]) {
        for m in s.gossip.current where m.uid != s.me.uid && m.status != .down {
            out.append(.sendGossip(to: m.node, s.gossip))
        }
    }

    /// Gossips to `count` members, preferring ones that have not seen this
    /// state. Members that cannot take part (down, exiting, unreachable *by
    /// this node's own detectors*) are never chosen: preferring one that
    /// will never see the state would starve everyone else of gossip, and
    /// "seen" would never flow back. Another observer's verdict does not
    /// stop this node from trying: after a heal every member may be flagged
    /// by someone, and only gossip can carry the withdrawals.
    private func gossip(_ s: inout State, _ out: inout [Directive], count: Int) {
        let g = s.gossip
        let mine = g.reachability.observers[s.me.uid]?.unreachable ?? []
        // Word-wide flag arithmetic, no walk over the members: this runs on
        // every tick of every node.
        var ruledOut = MemberFlags(count: g.current.count)
        if let me = g.currentIndex(of: s.me.uid) { ruledOut[me] = true }
        if !mine.isEmpty {
            for i in g.unreachableFlags.setIndices where mine.contains(g.current[i].uid) { ruledOut[i] = true }
        }
        let eligible = MemberFlags.all(count: g.current.count).subtracting(
            g.downFlags, g.exitingFlags, ruledOut)
        let unseen = eligible.subtracting(g.seenFlags)
        let pool = unseen.setCount > 0 ? unseen : eligible
        let poolSize = pool.setCount
        for _ in 0..<min(count, poolSize) {
            // The pick-th member of the pool in address order.
            if let i = pool.indexOfSet(Int(nextRandom(&s) % UInt64(poolSize))) {
                out.append(.sendGossip(to: g.current[i].node, g))
            }
        }
    }

    /// The leader moves members on once everyone reachable has seen the
    /// state. While a member is unreachable (and not yet down) nobody is
    /// promoted or let go: the voters downing counts stay as every side
    /// knows them. A downed member is removed only `removalMargin` after
    /// this node saw it down, by which time it has downed itself, or once
    /// a new incarnation holds its address (the old process is gone). One
    /// whose address refuses connections goes sooner (`removeGone`).
    ///
    /// Members promoted in one pass share one up number (a promotion
    /// round): no view can hold one of them up without the others, which
    /// lets keep-majority count them all once any of them is known up.
    private func leaderActions(_ s: inout State, _ out: inout [Directive]) {
        removeGone(&s, &out)
        guard s.gossip.isConverged else { return }
        let round = (s.gossip.members.values.map(\.upNumber).max() ?? 0) + 1
        var changed = false
        let nobodyUnreachable = s.lastUnreachable.isEmpty
        for member in s.gossip.current {
            var m = member
            switch m.status {
            case .joining where nobodyUnreachable && s.gossip.isReachable(m.uid):
                m.status = .up
                m.upNumber = round
            case .leaving where nobodyUnreachable: m.status = .exiting
            case .exiting where nobodyUnreachable || s.exited.contains(m.uid): m.status = .removed
            case .down
            where s.now - (s.downSince[m.uid] ?? s.now) >= settings.removalMargin
                || KeepMajority.isReplaced(m, in: s.gossip):
                m.status = .removed
            default: continue
            }
            changed = s.gossip.update(m, by: s.me.uid) || changed
        }
        if changed { gossip(&s, &out, count: settings.gossipFanout + 1) }
        // Gossip no longer goes to exiting members, so tell them directly:
        // seeing itself exiting is what lets a leaving node stop.
        for m in s.gossip.current where m.status == .exiting && m.uid != s.me.uid {
            out.append(.sendGossip(to: m.node, s.gossip))
        }
    }

    /// Asks each downed member for a heartbeat, once a tick, at the tick's
    /// end (after `removeGone`, so none known gone is left, and after
    /// `downing`, so one downed this tick is asked at once): nobody else
    /// sends it anything, and the dial, made past the reconnect backoff
    /// (`Directive.probe`), is how the leader learns that its address
    /// refuses connections (`incarnationGone`). One that still runs (cut
    /// off, not crashed) answers, and waits out the margin.
    private func probeDowned(_ s: State, _ out: inout [Directive]) {
        guard settings.removesRefusingMembers else { return }
        let g = s.gossip
        for i in g.downFlags.setIndices where g.current[i].uid != s.me.uid {
            out.append(.probe(to: g.current[i].node))
        }
    }

    /// Removes every downed member whose process is gone, at once: it needs
    /// no removal margin (it cannot be serving on another side), and no
    /// convergence either: whoever has not seen it down learns both steps
    /// from one state, and a removed member counts as a voter nowhere,
    /// which takes nothing from any side that is alive (docs/DOWNING.md).
    /// Waiting for convergence took 6 s at 64 nodes, as each of the dead
    /// member's watchers withdrew its verdict in turn. The new state goes
    /// to every member directly, not a gossip round at a time.
    private func removeGone(_ s: inout State, _ out: inout [Directive]) {
        guard !s.gone.isEmpty else { return }
        var changed = false
        for uid in s.gone.sorted() {
            guard var m = s.gossip.members[uid], m.status == .down else { continue }
            m.status = .removed
            changed = s.gossip.update(m, by: s.me.uid) || changed
        }
        guard changed else { return }
        gossipToEveryMember(s, &out)
    }

    /// The leader sends its state to the configured seeds that are not
    /// members, every other second: a seed restarted while the cluster
    /// lives on (on nodes that are not seeds) learns of it and joins,
    /// instead of forming a second cluster with the other seeds. Only the
    /// seeds this node lists: every node must list the same ones.
    private func inviteSeeds(_ s: inout State, _ out: inout [Directive]) {
        // Only a healthy cluster invites: a minority that is about to down
        // itself would draw the seeds into a cluster that then vanishes,
        // leaving them joined to nothing.
        guard !s.seeds.isEmpty, s.lastUnreachable.isEmpty, Int(s.now) % 2 == 0, Int(s.now) != Int(s.lastTickAt ?? -1)
        else { return }
        for seed in s.seeds
        where !s.gossip.current.contains(where: {
            $0.status != .down && s.gossip.isReachable($0.uid) && $0.node.hasEndpoint(of: seed)
        }) {
            out.append(.sendGossip(to: seed, s.gossip))
        }
    }

    /// Keep-majority (`KeepMajority`): once the unreachable set has been
    /// stable for `stableAfter`, or has kept changing for
    /// `decideWhenUnstableAfter` longer, the leader of a consistent majority
    /// downs the members unreachable for at least `stableAfter`; every
    /// other node downs itself. Never two clusters: at most one side holds
    /// a consistent majority.
    private func downing(_ s: inout State) {
        // A joining node is no voter and serves nothing yet: it has no say,
        // and nothing to give up (it could not prove a majority before it
        // has seen one settled view, and would down itself on joining a
        // cluster that has a member unreachable).
        guard settings.downing == .keepMajority, let unstableSince = s.unstableSince, !s.lastUnreachable.isEmpty,
            s.admitted,
            s.myStatus == .up || s.myStatus == .leaving
        else { return }
        let stable = s.now - s.unreachableChangedAt >= settings.stableAfter
        let overdue = s.now - unstableSince >= settings.stableAfter + settings.decideWhenUnstableAfter
        guard stable || overdue else { return }
        switch KeepMajority.decide(me: s.me.uid, gossip: s.gossip, isSettled: s.isSettled, exited: s.exited) {
        case .wait:
            if overdue { downSelf(&s) }
        case .downSelf:
            downSelf(&s)
        case .downOthers(let uids):
            guard s.gossip.leader?.uid == s.me.uid else { return }
            for uid in uids where s.now - (s.unreachableSince[uid] ?? s.now) >= settings.stableAfter {
                guard var m = s.gossip.members[uid], m.status.canMove(to: .down), m.status != .down else { continue }
                m.status = .down
                s.gossip.update(m, by: s.me.uid)
            }
        }
    }

    private func downSelf(_ s: inout State) {
        guard var me = s.gossip.members[s.me.uid], me.status.canMove(to: .down), me.status != .down else { return }
        me.status = .down
        s.gossip.update(me, by: s.me.uid)
    }

    private func nextRandom(_ s: inout State) -> UInt64 { s.random.next() }
}
