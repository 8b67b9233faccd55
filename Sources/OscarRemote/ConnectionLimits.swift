import Glibc

/// How many connections a node keeps open, derived from its file-descriptor
/// limit: a node that runs out of descriptors fails every new connection,
/// its own outbound ones and the management endpoint's included, with
/// nothing in the log. Refusing inbound connections early, with a log line,
/// keeps descriptors for the node's own work.
package enum ConnectionLimits {
    /// The soft `RLIMIT_NOFILE`, raised to the hard limit first (once per
    /// process), as servers do: the soft default of 1024 is a historical
    /// default for `select`, which libuv does not use.
    static let descriptors: Int = {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return limit.rlim_cur == rlim_t.max ? 1 << 20 : Int(min(limit.rlim_cur, 1 << 20))
    }()

    /// Three quarters of the descriptors, less 64 for the node's own use
    /// (loops, listeners, outbound connections, files), at least 16.
    package static var defaultInbound: Int { max(16, (descriptors - 64) * 3 / 4) }

    /// A quarter of the inbound limit, at most 256: honest peers finish a
    /// handshake in a round trip, so many at once is a flood.
    package static var defaultHandshaking: Int { max(8, min(256, defaultInbound / 4)) }
}
