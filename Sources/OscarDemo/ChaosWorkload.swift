import Distributed
import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime
import OscarTestKit
import Synchronization

/// What every node of a chaos run does while the nemesis works, recording
/// each step in its history:
/// - asks, every `interval`: to the `echo` actor of a random member, to the
///   `workers` cluster pool, to the `ledger` cluster singleton, and calls to
///   virtual actors (`ChaosAccount`, 8 identities);
/// - with `streamTo`, a reliable stream to that node's consumer;
/// - its own membership view, whenever it changes;
/// - the ledger singleton's starts and stops, when it hosts it, and the
///   activations of virtual actors it hosts.
public enum ChaosWorkload {
    public struct Settings: Sendable {
        /// When the workload stops (`MonotonicTime` nanoseconds).
        public var until: UInt64
        /// Seeds the choice of operations (with the node's port).
        public var seed: UInt64
        /// The node whose stream consumer this node produces to, if any.
        public var streamTo: NodeAddress?
        public var askTimeout = Duration.seconds(2)
        public var interval = Duration.milliseconds(100)
        /// Asks in flight at most; a tick with none free sends nothing.
        public var maxInFlight = 32
        /// Stream messages sent per second at most.
        public var streamRate = 20

        public init(until: UInt64, seed: UInt64, streamTo: NodeAddress? = nil) {
            self.until = until
            self.seed = seed
            self.streamTo = streamTo
        }
    }

    /// The singleton's name and its one message.
    public static let ledger = "ledger"
    /// Where every chaos node hosts its stream consumer.
    public static let streamConsumer = "chaos-stream"

    public struct Next: Message {
        public typealias Reply = LedgerEntry
        public init() {}
    }

    public struct LedgerEntry: Codable, Sendable {
        public var n: Int
        public var node: String
    }

    public struct StreamItem: Message {
        public var seq: UInt64
        /// The producer's stream id: a restarted producer starts a new one.
        public var stream: UInt64
    }

    /// The virtual actor of chaos runs: records its activation and
    /// deactivation, counts deposits.
    public distributed actor ChaosAccount {
        public typealias ActorSystem = ClusterSystem
        public nonisolated var unownedExecutor: UnownedSerialExecutor { actorSystem.executor(for: id) }
        package let key: String
        package let recorder: ChaosRecorder
        private var balance = 0

        init(actorSystem: ClusterSystem, key: String, recorder: ChaosRecorder) {
            self.actorSystem = actorSystem
            self.key = key
            self.recorder = recorder
            recorder.record(.activationStart, target: key)
        }

        deinit { recorder.record(.activationStop, target: key) }

        public distributed func deposit(_ amount: Int) -> Int {
            balance += amount
            return balance
        }
    }

    public static let virtualKind = "chaos-account"

    final class Ledger: Reactor {
        let recorder: ChaosRecorder
        var n = 0
        var node = ""
        init(recorder: ChaosRecorder) { self.recorder = recorder }
        func started(_ context: ActorContext) {
            node = context.node.description
            recorder.record(.singletonStart)
        }
        func stopped() { recorder.record(.singletonStop) }
        static func reactions(_ r: inout Reactions<Ledger>) {
            r.on(
                Next.self,
                result: { me, _ in
                    me.n += 1
                    return LedgerEntry(n: me.n, node: me.node)
                })
        }
    }

    /// Declares the ledger singleton, whose starts and stops go to `recorder`.
    public static func declare(in actors: inout ActorSystemBuilder, recorder: ChaosRecorder) {
        actors.clusterSingleton(ledger) { Ledger(recorder: recorder) }
    }

    /// Runs the workload on `node` until `settings.until`, then waits for
    /// every ask to end and (as producer) for the stream's last
    /// acknowledgement, bounded; records `workload-done` last.
    public static func run(on cluster: ClusterSystem, settings: Settings, recorder: ChaosRecorder) async {
        let node = cluster.node
        let system = node.system
        try? cluster.registerVirtual(ChaosAccount.self, kind: virtualKind) { cluster, key in
            ChaosAccount(actorSystem: cluster, key: key, recorder: recorder)
        }
        _ = try? ReliableConsumer.spawn(on: system, name: streamConsumer, StreamItem.self) { item in
            recorder.record(.streamProcess, seq: item.seq, stream: item.stream)
        }
        let view = ChaosMembershipWatch()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await view.run(node, until: settings.until, recorder: recorder) }
            if let target = settings.streamTo {
                group.addTask { await produce(on: system, to: target, settings: settings, recorder: recorder) }
            }
            group.addTask {
                await operations(cluster, settings: settings).run(
                    on: node, until: settings.until, seed: settings.seed, view: view, recorder: recorder)
            }
        }
        recorder.record(.workloadDone)
    }

    /// The asks, as a user of the test kit's `ChaosOperations` writes
    /// them: to the `echo` actor of a random member, to the `workers`
    /// cluster pool, to the `ledger` cluster singleton, and calls to virtual
    /// actors (`ChaosAccount`, 8 identities).
    static func operations(_ cluster: ClusterSystem, settings: Settings) -> ChaosOperations {
        let timeout = settings.askTimeout
        var operations = ChaosOperations(operations: [
            .init("echo", weight: 0.4, timeout: timeout) { c in
                await .asking {
                    _ = try await c.ref("/user/echo", on: c.randomMember).ask(
                        Demo.Echo(text: "\(c.op)"), timeout: timeout)
                }
            },
            .init("pool", weight: 0.3, timeout: timeout) { c in
                await .asking {
                    _ = try await c.ref("/user/workers").ask(Demo.Work(id: c.op), timeout: timeout)
                }
            },
            .init("singleton", weight: 0.15, timeout: timeout) { c in
                await .asking {
                    _ = try await c.ref("/user/\(ledger)").ask(Next(), timeout: timeout)
                }
            },
            // Distributed calls time out after the system's call timeout.
            .init("virtual", weight: 0.15, timeout: cluster.settings.callTimeout) { c in
                let account = try cluster.virtualActor(ChaosAccount.self, id: "k\(c.draw % 8)")
                return await .asking { _ = try await account.deposit(1) }
            },
        ])
        operations.interval = settings.interval
        operations.maxInFlight = settings.maxInFlight
        return operations
    }

    private static func produce(
        on system: ActorSystem, to target: NodeAddress, settings: Settings, recorder: ChaosRecorder
    )
        async
    {
        let consumer = system.ref(for: ActorAddress(node: target, path: "/user/\(streamConsumer)"))
        guard
            let producer = try? ReliableProducer<StreamItem>(
                on: system, name: "chaos-producer", to: consumer, window: 32, resendInterval: .milliseconds(300))
        else { return }
        defer { producer.close() }
        let pace = Duration.milliseconds(1000 / max(settings.streamRate, 1))
        var acknowledged: UInt64 = 0
        func noteAcks() {
            let now = producer.acknowledged
            if now > acknowledged {
                acknowledged = now
                recorder.record(.streamAck, seq: now, stream: producer.stream)
            }
        }
        var seq: UInt64 = 0
        while MonotonicTime.now() < settings.until {
            // `send` waits while the window is full: bounded by the deadline.
            let sending = Task { [seq] in try? await producer.send(StreamItem(seq: seq + 1, stream: producer.stream)) }
            while MonotonicTime.now() < settings.until, producer.sent == seq {
                try? await Task.sleep(for: .milliseconds(20))  // poll the window
                noteAcks()
            }
            guard producer.sent > seq else {
                sending.cancel()
                break
            }
            seq += 1
            recorder.record(.streamSend, seq: seq, stream: producer.stream)
            noteAcks()
            try? await Task.sleep(for: pace)  // the stream's rate
        }
        // After the deadline: wait (bounded) for what was sent to be acknowledged.
        let drain = MonotonicTime.now() + 20_000_000_000
        while acknowledged < producer.sent, MonotonicTime.now() < drain {
            try? await Task.sleep(for: .milliseconds(100))  // poll the acknowledgements
            noteAcks()
        }
    }
}
