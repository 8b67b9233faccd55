import Dispatch
import OscarBase
import OscarCBOR
import OscarRuntime
import Synchronization

/// The bulk lane: large messages on a second connection per node pair,
/// read and written by threads of their own at `SCHED_IDLE`, so that
/// copying megabytes never takes a core from the loops that carry small
/// messages.
///
/// Why not chunks between the small frames, as before (and still with TLS):
/// however small the window, the copying ran on the I/O loops, and every
/// small message behind it waited for a core. In W2S on the 2-core VM the
/// p99 stayed at 4× the quiet one; a stream at `SCHED_IDLE` in other
/// processes left W2's p99 as it was quiet (`Cluster/bench/lane-isolation.sh`).
///
/// Each node dials its own bulk connection to a peer, the first time it has
/// a large message for it: the connection carries that node's messages one
/// way and acknowledgements back, so who owns it is plain and no tie-break
/// is needed. It is authenticated with the ordinary handshake (its hello
/// says `lane: bulk`) and then detached from the I/O loop.
///
/// Order: a message's bytes go on the bulk connection, but its place among
/// the sender's frames is a commit frame on the main connection, written
/// once the receiver acknowledged the whole message (staged, see
/// `StagedMessages`). The receiver delivers the message when the commit
/// arrives, so it comes after every frame sent before it, and frames to the
/// same recipient sent after it wait behind it in the sender's large lane
/// until the commit is written. One message at a time per peer.
///
/// On the bulk connection, after the handshake: the sender writes each
/// message as a 16-byte header (its id, 8 bytes, and its length, 4 bytes,
/// big-endian, and 4 bytes of zero) and the frame body (kind, flags,
/// correlation, recipient, manifest, payload: what a chunked message
/// carries); the receiver answers with the id, 8 bytes, once the message
/// is staged.
enum BulkLane {
    static let headerBytes = 16
    static let acknowledgementBytes = 8

    /// One message for the bulk lane: its id and body, as slices of where
    /// the body's bytes are.
    struct Message: Sendable {
        var id: UInt64
        var body: [LargeMessageLane.OutgoingFrame.Piece]
        var bodyCount: Int
    }

    static func header(id: UInt64, length: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(headerBytes)
        appendUInt64(id, to: &bytes)
        LargeMessageLane.appendUInt32(UInt32(length), to: &bytes)
        bytes.append(contentsOf: [0, 0, 0, 0])
        return bytes
    }

    /// The commit frame that delivers message `id` (length prefix included).
    static func commitFrame(_ id: UInt64) -> [UInt8] {
        var frame: [UInt8] = [0, 0, 0, 10, WireKind.commit.rawValue, 0]
        appendUInt64(id, to: &frame)
        return frame
    }

    static func appendUInt64(_ value: UInt64, to out: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }

    static func readUInt64(_ bytes: some Collection<UInt8>) -> UInt64 {
        bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// Writes `message` (its bytes copied by `copier`) and waits for its
    /// acknowledgement (the lane's sending thread).
    static func send(_ message: Message, on socket: BulkSocket, copier: BulkCopier) throws(BulkSocket.Failure) {
        let frame = LargeMessageLane.OutgoingFrame(
            head: header(id: message.id, length: message.bodyCount), pieces: message.body, isChunk: false)
        let failure = frame.withBuffers { buffers -> BulkSocket.Failure? in
            do throws(BulkSocket.Failure) { try socket.write(buffers, on: copier) } catch { return error }
            return nil
        }
        if let failure { throw failure }
        let acknowledged = readUInt64(try socket.read(acknowledgementBytes))
        guard acknowledged == message.id else {
            throw BulkSocket.Failure(
                description: "the bulk connection acknowledged message \(acknowledged), not \(message.id)")
        }
    }

    /// Reads messages from `peer` until the connection ends, staging each
    /// (the lane's receiving thread). Every message is held to this node's
    /// bounds before a byte of it is kept: one larger than the maximum is
    /// read past and staged as refused; one the reassembly bound has no
    /// room for ends the connection (its sender sends it in chunks).
    static func receive(on socket: BulkSocket, from peer: NodeAddress, transport: Transport) {
        BulkSocket.startThread(named: "oscar-bulk-in")
        let copier = BulkCopier.take(idle: transport.settings.bulkLaneAtIdlePriority)
        do throws(BulkSocket.Failure) {
            guard let copier else { throw BulkSocket.Failure(description: "no thread for the bulk lane's copying") }
            defer { copier.park() }
            while true {
                socket.waitUntilReadable()
                let header = try socket.read(headerBytes)
                let id = readUInt64(header)
                let length = Int(readUInt64(header[8..<12]))
                guard length > 0 else { throw BulkSocket.Failure(description: "a bulk message of 0 bytes") }
                if length > transport.settings.maxMessageSize {
                    let head = try socket.read(min(length, 10))
                    try socket.skip(length - head.count, on: copier)
                    transport.staged.stage(.refused(length: length, head: head), from: peer.uid, id: id)
                } else {
                    var reserved = transport.reserveReassembly(length)
                    if !reserved {
                        transport.staged.removeExpired()
                        reserved = transport.reserveReassembly(length)
                    }
                    guard reserved else {
                        throw BulkSocket.Failure(description: WireError.reassemblyFull(length).description)
                    }
                    let body = LendableBuffer(capacity: length)
                    var failure: BulkSocket.Failure?
                    body.append(length) { room in
                        do throws(BulkSocket.Failure) { try socket.read(into: room, on: copier) } catch {
                            failure = error
                        }
                    }
                    if let failure {
                        transport.releaseReassembly(length)
                        throw failure
                    }
                    transport.staged.stage(.whole(body), from: peer.uid, id: id)
                }
                transport.stats.add(.bulkMessagesIn)
                var acknowledgement: [UInt8] = []
                appendUInt64(id, to: &acknowledgement)
                try socket.write(acknowledgement)
            }
        } catch  where error != .closed {
            OscarLog.shared.warning("closing the bulk connection from \(peer): \(error)")
        } catch {}
        socket.shutdown()
        transport.bulkReceiverEnded(socket, from: peer)
    }
}

/// The sending end of one bulk connection: a thread of its own, made once,
/// that writes the messages it is given one at a time and reports each to
/// `done`. It runs at normal priority and blocks while its `BulkCopier`
/// (at `SCHED_IDLE`) copies each message's bytes into the socket.
final class BulkSender: Sendable {
    let socket: BulkSocket
    private let queue = Mutex<(messages: [BulkLane.Message], stopped: Bool)>(([], false))
    private let wake = DispatchSemaphore(value: 0)

    /// Starts the thread (nil when the system has none to give).
    /// `starting` is called as each message starts;
    /// `done` gets each message's id and its failure (nil
    /// once the receiver staged it), on the sending thread; after a failure
    /// the sender is stopped.
    init?(
        socket: BulkSocket, idle: Bool, starting: @escaping @Sendable () -> Void,
        done: @escaping @Sendable (UInt64, BulkSocket.Failure?) -> Void
    ) {
        self.socket = socket
        guard let copier = BulkCopier.take(idle: idle) else { return nil }
        let started = ProcessControl.startThread { [self] in
            BulkSocket.startThread(named: "oscar-bulk-out")
            defer { copier.park() }
            while let message = next() {
                starting()
                do throws(BulkSocket.Failure) {
                    try BulkLane.send(message, on: socket, copier: copier)
                    done(message.id, nil)
                } catch {
                    stop()
                    done(message.id, error)
                }
            }
        }
        guard started else {
            copier.park()
            return nil
        }
    }

    func send(_ message: BulkLane.Message) {
        queue.withLock { $0.messages.append(message) }
        wake.signal()
    }

    /// Ends the connection; the thread ends once it notices.
    func stop() {
        queue.withLock { $0.stopped = true }
        socket.shutdown()
        wake.signal()
    }

    private func next() -> BulkLane.Message? {
        while true {
            wake.wait()
            let (stopped, message) = queue.withLock { queue -> (Bool, BulkLane.Message?) in
                (queue.stopped, queue.stopped || queue.messages.isEmpty ? nil : queue.messages.removeFirst())
            }
            if stopped { return nil }
            if let message { return message }
        }
    }
}
