import OscarBase
import OscarRemote
import OscarRuntime

/// Seeds from DNS: the A records of one name (a Kubernetes headless service
/// lists its pods' addresses so), each with the given port.
///
/// Found before the node starts, as Akka's cluster bootstrap does: the name
/// is looked up every `interval` until it gives at least `minimum` addresses
/// and the same ones twice in a row, so nodes starting together agree on
/// the list, and its lowest address (the first seed) forms the cluster
/// when nobody answers. Set `minimum` to the number of nodes that start
/// together: with fewer, two nodes that each found only themselves would
/// form two clusters.
package struct SeedDiscovery: Sendable {
    package var name: String
    package var port: Int
    package var minimum: Int
    package var interval = Duration.seconds(1)

    package init(name: String, port: Int, minimum: Int) {
        self.name = name
        self.port = port
        self.minimum = minimum
    }

    /// The seeds, once found; waits as long as it takes, saying why every
    /// ten looks.
    package func seeds() async -> [NodeAddress] {
        var previous: [String] = []
        var looks = 0
        while true {
            let found = await lookUp()
            looks += 1
            if case .success(let addresses) = found, addresses.count >= minimum, addresses == previous {
                return addresses.map { NodeAddress(host: $0, port: port) }
            }
            if looks % 10 == 0 {
                switch found {
                case .success(let addresses):
                    OscarLog.shared.info(
                        "seed discovery: \(name) gives \(addresses.count) address(es) of the \(minimum) needed: \(addresses)"
                    )
                case .failure(let error):
                    OscarLog.shared.warning("seed discovery: \(name): \(error)")
                }
            }
            previous = (try? found.get()) ?? []
            try? await Task.sleep(for: interval)  // the next look; DNS gives no change notification
        }
    }

    /// One lookup, on a thread of its own (getaddrinfo blocks).
    private func lookUp() async -> Result<[String], TransportError> {
        await withCheckedContinuation { continuation in
            ProcessControl.onOwnThread { [name] in
                continuation.resume(returning: HostResolver.allIPv4Addresses(of: name))
            }
        }
    }
}
