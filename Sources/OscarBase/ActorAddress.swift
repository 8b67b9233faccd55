/// A node: where it listens, and which start of that process it is.
///
/// The `uid` is random per process start, so a node restarted on the same port
/// is a different incarnation; 0 means "whichever incarnation is there" (an
/// address typed by a person has no uid).
public struct NodeAddress: Hashable, Sendable, Codable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var uid: UInt64

    public init(host: String, port: Int, uid: UInt64 = 0) {
        self.host = host
        self.port = port
        self.uid = uid
    }

    /// `host:port`.
    public var description: String { "\(host):\(port)" }

    /// Parses `host:port` (a seed, a node to ask); uid 0. Nil when the port
    /// is not 1...65535 or the host is empty.
    public init?(hostPort text: String) {
        guard let colon = text.lastIndex(of: ":"), colon > text.startIndex,
            let port = Int(text[text.index(after: colon)...]), (1...65535).contains(port)
        else { return nil }
        self.init(host: String(text[..<colon]), port: port)
    }

    /// Same host and port, whatever the incarnation.
    public func hasEndpoint(of other: NodeAddress) -> Bool { host == other.host && port == other.port }

    /// True when `address` names this node: its endpoint, and either no
    /// particular incarnation (uid 0) or this one. An address with the
    /// endpoint but another uid names an earlier incarnation, which is gone.
    public func isNamed(by address: NodeAddress) -> Bool {
        hasEndpoint(of: address) && (address.uid == 0 || address.uid == uid)
    }

    /// A fresh node identity for a process that does not listen (port 0).
    public static func local(host: String = "127.0.0.1", port: Int = 0) -> NodeAddress {
        NodeAddress(host: host, port: port, uid: UInt64.random(in: 1...UInt64.max))
    }
}

/// An actor's name: its node plus a path such as `/user/echo` or
/// `/user/workers/3`. The URI form is `oscar://host:port/user/echo`.
public struct ActorAddress: Hashable, Sendable, Codable, CustomStringConvertible {
    public var node: NodeAddress
    public var path: String

    public init(node: NodeAddress, path: String) {
        self.node = node
        self.path = path
    }

    /// Parses `oscar://host:port/path`. Returns nil for anything else.
    public init?(uri: String) {
        let scheme = "oscar://"
        guard uri.hasPrefix(scheme) else { return nil }
        let rest = uri.dropFirst(scheme.count)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        let authority = rest[..<slash]
        guard let colon = authority.lastIndex(of: ":"),
            let port = Int(authority[authority.index(after: colon)...]), (0...65535).contains(port)
        else { return nil }
        let host = String(authority[..<colon])
        let path = String(rest[slash...])
        guard !host.isEmpty, path.count > 1 else { return nil }
        self.init(node: NodeAddress(host: host, port: port), path: path)
    }

    public var uri: String { "oscar://\(node.host):\(node.port)\(path)" }
    public var description: String { uri }
}

/// `"127.0.0.1:7001"` in code: seeds and nodes to ask, written as a person
/// would. A literal that is not `host:port` is a mistake in the program, not
/// input, so it stops the program the first time it runs; text that comes
/// from outside (flags, files, peers) goes through `init?(hostPort:)`, which
/// returns nil instead.
extension NodeAddress: ExpressibleByStringLiteral {
    public init(stringLiteral text: String) {
        guard let address = NodeAddress(hostPort: text) else {
            preconditionFailure("\"\(text)\" is not a node address (host:port, port 1...65535)")
        }
        self = address
    }
}
