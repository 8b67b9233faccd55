import Oscar
import OscarRemote

/// One request and its response over TLS on a blocking socket, for the
/// CLI's one-shot HTTPS requests: Oscar's sans-I/O `TLSSession`, its
/// ciphertext moved by `BlockingSocket`. The server's certificate must
/// chain to the CA and name the host dialled; the client presents its own,
/// when it has one.
enum TLSExchange {
    static func run(
        _ request: [UInt8], over socket: BlockingSocket, credentials: TLSCredentials
    ) throws(CLIError)
        -> [UInt8]
    {
        let session: TLSSession
        do {
            session = try TLSSession(credentials: credentials, role: .client(serverHost: socket.peer.host))
        } catch {
            throw .failed("TLS to \(socket.peer): \(error)")
        }
        func flush() throws(CLIError) {
            let ciphertext = session.takeCiphertext()
            if !ciphertext.isEmpty { try socket.send(ciphertext) }
        }
        func refused(_ error: TLSError) throws(CLIError) -> Never {
            try? flush()  // the alert, if any
            throw .failed("TLS to \(socket.peer) failed: \(error)")
        }
        try flush()  // the ClientHello
        while !session.isHandshakeComplete {
            let chunk = try socket.receive()
            guard !chunk.isEmpty else { throw .failed("\(socket.peer) closed the connection during the TLS handshake") }
            do throws(TLSError) { _ = try session.receive(chunk) } catch { try refused(error) }
            try flush()
        }
        do throws(TLSError) { try session.send(request) } catch { try refused(error) }
        try flush()
        var response: [UInt8] = []
        while response.count < BlockingSocket.maxResponse, session.failure == nil {
            let chunk = try socket.receive()
            if chunk.isEmpty { break }
            do throws(TLSError) { response += try session.receive(chunk) } catch {
                if error == .closed { break }
                try refused(error)
            }
            try flush()
        }
        return response
    }
}
