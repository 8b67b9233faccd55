import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime

/// N real `MembershipCore`s on virtual time and a virtual network: per-message
/// latency with jitter, loss, partitions and killed nodes, all from one seed,
/// so a run replays exactly. No threads, sockets or clocks. Each node's
/// state is reduced in place with the same `reduce` the cluster node's
/// `Engine` applies, and its directives are performed as the shell does.
public struct ClusterSimulator: Sendable {
    public struct Settings: Sendable {
        public var nodes: Int
        public var seed: UInt64
        /// Mean one-way latency and its uniform jitter, in seconds.
        public var latency: Double = 0.001
        public var jitter: Double = 0.0005
        /// Fraction of messages dropped.
        public var loss: Double = 0
        /// Seconds between a node's ticks (heartbeat and gossip period).
        public var tickInterval: Double = 0.5
        package var core = MembershipCore.Settings()
        /// The seed (node 0) starts this much later than the others, which
        /// wait for it.
        public var seedStartDelay: Double = 0
        /// When set, the last node starts at this virtual time (a late joiner).
        public var lastNodeStartsAt: Double?
        /// When set, every node (the first too) lists the first `sharedSeeds`
        /// nodes as seeds, highest address first, as real deployments list
        /// them in no particular order; nodes start in a random order within
        /// the first second.
        public var sharedSeeds: Int?
        /// Records every gossip state sent and counts two different contents
        /// under one version (`versionConflicts`), which the gossip's
        /// shortcuts assume never happens. For tests: it keeps every state.
        public var checkVersions = false

        public init(nodes: Int, seed: UInt64) {
            self.nodes = nodes
            self.seed = seed
        }
    }

    private struct Event {
        var at: Double
        var sequence: Int
        var node: Int
        var action: MembershipCore.Action?  // nil: this node's tick
        /// For ticks: the incarnation they belong to (a restart starts a new
        /// chain of ticks; the old one ends).
        var incarnation = 0
    }

    public let settings: Settings
    private let core: MembershipCore
    package private(set) var states: [MembershipCore.State]
    public private(set) var now: Double = 0
    public private(set) var killed: Set<Int> = []
    /// Fraction of messages dropped from now on (starts at `settings.loss`).
    public var loss: Double
    /// Paused nodes (SIGSTOP) and when they continue.
    private var pausedUntil: [Int: Double] = [:]
    /// Nodes whose `join` has run (a node that has not started does nothing).
    private var started: Set<Int> = []
    /// The seeds each node was started with; a restart lists them again.
    private var startSeeds: [[NodeAddress]] = []
    /// How long after its start each node first ticks (drawn at set-up).
    private var firstTickOffsets: [Double] = []
    /// Restarts of each node so far: its incarnation, which picks its uid.
    private var incarnations: [Int: Int] = [:]
    /// Events published by each node, with their virtual time.
    public private(set) var events: [[(time: Double, event: ClusterEvent)]]
    /// The nodes whose published events `events` records; nil, every node.
    /// At 1,000 nodes a cold start publishes millions of events (every node
    /// sees every join), and at 10,000 a minute of heavy loss as many.
    public var recordedNodes: Set<Int>?

    public private(set) var messagesSent = 0
    /// Gossip messages sent (a subset of `messagesSent`).
    public private(set) var gossipSent = 0
    /// With `checkVersions`: states sent under one version with different contents.
    public private(set) var versionConflicts = 0
    private var contentByVersion: [VersionVector: Gossip.Content] = [:]
    /// Blocked directions, (from, to).
    private var blocked: Set<Link> = []
    /// The queue: a binary heap of plain keys, so reordering it copies no
    /// action (an action holds gossip, whose copies cost retains: they were
    /// a fifth of a 1,000-node run); each key names its event's slot.
    private var queue: [Key] = []
    private var slots: [Event?] = []
    private var freeSlots: [Int] = []
    private var sequence = 0
    private var random: SplitMix64

    public init(settings: Settings) {
        self.settings = settings
        core = MembershipCore(settings: settings.core)
        random = SplitMix64(seed: settings.seed)
        loss = settings.loss
        states = (0..<settings.nodes).map { i in
            MembershipCore.State(me: Self.address(i), seed: settings.seed &+ UInt64(i) &* 7919)
        }
        events = Array(repeating: [], count: settings.nodes)
        for i in 0..<settings.nodes {
            var seeds = i == 0 ? [] : [Self.address(0)]
            var start = (i == 0 ? settings.seedStartDelay : 0) + Double(i) * 0.01
            if let shared = settings.sharedSeeds {
                // Highest first: the node that forms the cluster is not the
                // lowest address, so the leader is another seed.
                seeds = (0..<min(shared, settings.nodes)).reversed().map { Self.address($0) }
                start = uniform()
            }
            if i == settings.nodes - 1, let late = settings.lastNodeStartsAt { start = late }
            startSeeds.append(seeds)
            firstTickOffsets.append(uniform() * settings.tickInterval)
            schedule(Event(at: start, sequence: 0, node: i, action: .join(seeds: seeds)))
            schedule(Event(at: start + firstTickOffsets[i], sequence: 0, node: i, action: nil))
        }
    }

    /// Moves the start of node `i`, which has not started, to `time` (after
    /// now), its first tick with it. The run goes on exactly as one set up
    /// with that start from the beginning would have (a node that has not
    /// started draws nothing and sends nothing): a late joiner's start can
    /// follow the others' convergence without forming the cluster a second
    /// time, which at 10,000 nodes took minutes.
    public mutating func moveStart(of i: Int, to time: Double) {
        precondition(
            !started.contains(i) && incarnations[i] == nil && time > now,
            "node \(i) has started, or \(time) is not after now")
        for k in queue.indices {
            guard let event = slots[queue[k].slot], event.node == i, event.incarnation == 0 else { continue }
            switch event.action {
            case .join: queue[k].time = time
            case nil: queue[k].time = time + firstTickOffsets[i]
            default: continue  // a message to it, lost when due as before
            }
            slots[queue[k].slot]?.at = queue[k].time
        }
        // Keys are unique (time, then sequence), so the order events come
        // out in does not depend on how the heap is rebuilt.
        for k in stride(from: queue.count / 2 - 1, through: 0, by: -1) { siftDown(from: k) }
    }

    /// Node `i`'s address: port i + 1, uid i + 1 (a million more per
    /// restart, above any node count the simulator runs, so a restarted
    /// node never takes another node's uid).
    public static func address(_ i: Int, incarnation: Int = 0) -> NodeAddress {
        NodeAddress(host: "sim", port: i + 1, uid: UInt64(i + 1 + 1_000_000 * incarnation))
    }

    /// Node `i`'s current view.
    package func view(_ i: Int) -> Gossip { states[i].gossip }
    /// Node `i`'s uid (its current incarnation's).
    package func uid(of i: Int) -> UInt64 { states[i].me.uid }

    public func isStopped(_ i: Int) -> Bool { killed.contains(i) || states[i].stopped }

    /// Node `i` is stopped, or down in its own view: it has left service
    /// (killed, or downed by others or by itself).
    public func isDowned(_ i: Int) -> Bool { isStopped(i) || states[i].myStatus == .down }

    /// Node `i` runs, is not frozen, and is up or leaving in its own view:
    /// it serves as a member of its cluster.
    public func isServing(_ i: Int) -> Bool {
        guard started.contains(i), !isStopped(i), pausedUntil[i].map({ now >= $0 }) ?? true else { return false }
        let status = states[i].myStatus
        return status == .up || status == .leaving
    }

    /// Node `i` would run a cluster singleton: it serves, and its view
    /// passes the rule `ClusterSingleton` itself follows
    /// (`SingletonPlacement.mayHost`).
    public func hostsSingleton(_ i: Int) -> Bool {
        isServing(i) && SingletonPlacement.mayHost(states[i].me.uid, in: states[i].gossip.current)
    }

    /// Whether node `i` is started and running (not killed, not stopped).
    public func isRunning(_ i: Int) -> Bool { started.contains(i) && !isStopped(i) }

    /// Whether node `i` is frozen now.
    public func isPaused(_ i: Int) -> Bool { pausedUntil[i].map { now < $0 } ?? false }

    // MARK: - Faults

    /// Stops node `i` at once: it neither acts nor answers (SIGKILL).
    public mutating func kill(_ i: Int) { killed.insert(i) }

    /// Cuts every link between the two groups, both ways.
    public mutating func partition(_ a: [Int], _ b: [Int]) {
        for x in a {
            for y in b {
                blocked.insert(Link(from: x, to: y))
                blocked.insert(Link(from: y, to: x))
            }
        }
    }

    /// Cuts the link from `a` to `b` only: `b` still reaches `a`.
    public mutating func block(from a: Int, to b: Int) { blocked.insert(Link(from: a, to: b)) }

    /// Whether messages from `a` to `b` are cut.
    public func isBlocked(from a: Int, to b: Int) -> Bool { blocked.contains(Link(from: a, to: b)) }

    /// Starts a killed or stopped node again as a new incarnation (a new uid
    /// on the same address), joining through the seeds it started with.
    public mutating func restart(_ i: Int) {
        killed.remove(i)
        pausedUntil[i] = nil
        let incarnation = (incarnations[i] ?? 0) + 1
        incarnations[i] = incarnation
        states[i] = MembershipCore.State(
            me: Self.address(i, incarnation: incarnation),
            seed: settings.seed &+ UInt64(i) &* 7919 &+ UInt64(incarnation))
        states[i].now = now  // the new process's clock reads the time it starts
        started.remove(i)
        // The seeds it started with, as a restarted process reads the same
        // configuration: with `sharedSeeds` every node lists the same ones,
        // as `oscar chaos` starts them. (Without, node 0 lists none and
        // would form a second cluster at once, as a lone seed does.)
        schedule(Event(at: now, sequence: 0, node: i, action: .join(seeds: startSeeds[i])))
        schedule(
            Event(
                at: now + uniform() * settings.tickInterval, sequence: 0, node: i, action: nil,
                incarnation: incarnation))
    }

    public mutating func heal() { blocked.removeAll() }

    /// Freezes node `i` for `seconds` (SIGSTOP, then SIGCONT): everything
    /// addressed to it waits, in order, and it resumes where it stopped.
    /// A node already frozen stays frozen until the later of both ends
    /// (what it has queued is due then).
    public mutating func pause(_ i: Int, for seconds: Double) {
        pausedUntil[i] = max(pausedUntil[i] ?? now, now + seconds)
    }

    /// An operator downs member `uid` through node `i`.
    public mutating func operatorDown(_ uid: UInt64, on i: Int) { apply(.down(uid), to: i) }

    /// Node `i` leaves gracefully.
    public mutating func leave(_ i: Int) { apply(.leave, to: i) }

    // MARK: - Running

    /// Runs every event up to virtual time `end`.
    public mutating func run(until end: Double) {
        while let first = queue.first, first.time <= end {
            let event = popFirst()
            now = event.at
            guard !killed.contains(event.node), !states[event.node].stopped else { continue }
            if event.action == nil, !started.contains(event.node) || event.incarnation != incarnations[event.node] ?? 0
            {
                continue
            }
            if let until = pausedUntil[event.node] {
                if now < until {
                    // Frozen: the event happens when the node continues, after
                    // those queued before it (sequence order is kept).
                    var later = event
                    later.at = until
                    schedule(later)
                    continue
                }
                pausedUntil.removeValue(forKey: event.node)
            }
            if let action = event.action {
                apply(action, to: event.node)
            } else {
                apply(.tick(now: now), to: event.node)
                var next = event
                next.at = now + settings.tickInterval
                schedule(next)
            }
        }
        now = end
    }

    /// Runs until `condition` holds or `limit` passes; returns the time it held, or nil.
    public mutating func run(
        untilTrue condition: (ClusterSimulator) -> Bool, limit: Double, step: Double = 0.1
    )
        -> Double?
    {
        while now < limit {
            run(until: now + step)
            if condition(self) { return now }
        }
        return nil
    }

    private mutating func apply(_ action: MembershipCore.Action, to i: Int) {
        if case .join = action { started.insert(i) }
        guard started.contains(i) else { return }  // not running yet: messages to it are lost
        for directive in core.reduce(&states[i], action) {
            switch directive {
            case .sendJoin(let to, let member): send(from: i, to: to, .joinRequest(member))
            case .sendGossip(let to, let gossip):
                gossipSent += 1
                if settings.checkVersions {
                    if let seen = contentByVersion[gossip.version], seen != gossip.content { versionConflicts += 1 }
                    contentByVersion[gossip.version] = gossip.content
                }
                send(from: i, to: to, .gossip(gossip, from: states[i].me.node))
            case .sendHeartbeatRequest(let to), .probe(let to):
                send(from: i, to: to, .heartbeatRequest(from: states[i].me.node))
            case .sendHeartbeat(let to): send(from: i, to: to, .heartbeat(from: states[i].me.uid))
            case .publish(let event): if recordedNodes?.contains(i) ?? true { events[i].append((now, event)) }
            case .shutDown: break  // the state is stopped; nothing more happens here
            }
        }
    }

    private mutating func send(from i: Int, to address: NodeAddress, _ action: MembershipCore.Action) {
        let j = address.port - 1
        guard j >= 0, j < states.count else { return }
        messagesSent += 1
        if !blocked.isEmpty, blocked.contains(Link(from: i, to: j)) { return }
        if address.uid != 0, address.uid == states[j].me.uid, killed.contains(j) || states[j].stopped,
            !blocked.contains(Link(from: j, to: i))
        {
            // Nothing listens at a stopped process's address: the dial is
            // refused, one round trip later (`Transport.onIncarnationGone`).
            // A frozen node's kernel still accepts, and a cut link is silent.
            // No random draw, so runs without kills replay as before.
            let gone = MembershipCore.Action.incarnationGone(address.uid)
            schedule(Event(at: now + 2 * settings.latency, sequence: 0, node: i, action: gone))
            return
        }
        if uniform() < loss { return }
        let delay = settings.latency + (uniform() * 2 - 1) * settings.jitter
        schedule(Event(at: now + max(0, delay), sequence: 0, node: j, action: action))
    }

    // MARK: - Event queue (binary heap by time, then insertion order)

    private struct Link: Hashable {
        var from: Int
        var to: Int
    }

    private struct Key {
        var time: Double
        var sequence: Int
        var slot: Int

        func isEarlier(than other: Key) -> Bool { (time, sequence) < (other.time, other.sequence) }
    }

    private mutating func schedule(_ e: Event) {
        var e = e
        sequence += 1
        e.sequence = sequence
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = e
        } else {
            slot = slots.count
            slots.append(e)
        }
        queue.append(Key(time: e.at, sequence: sequence, slot: slot))
        var child = queue.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard queue[child].isEarlier(than: queue[parent]) else { break }
            queue.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func popFirst() -> Event {
        let first = queue[0]
        let last = queue.removeLast()
        if !queue.isEmpty {
            queue[0] = last
            siftDown(from: 0)
        }
        let event = slots[first.slot].take()!
        freeSlots.append(first.slot)
        return event
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let l = 2 * parent + 1
            let r = l + 1
            var m = parent
            if l < queue.count, queue[l].isEarlier(than: queue[m]) { m = l }
            if r < queue.count, queue[r].isEarlier(than: queue[m]) { m = r }
            if m == parent { break }
            queue.swapAt(parent, m)
            parent = m
        }
    }

    private mutating func uniform() -> Double { random.unit() }
}
