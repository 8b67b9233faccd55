import OscarBase
import OscarCBOR
import OscarRemote

/// A state-changing management request (any method but GET), signed with
/// the cluster secret so that it can be neither forged nor replayed.
///
/// The signature covers the method, the path, a timestamp (Unix seconds),
/// a random nonce and the body; a node accepts it within `window` seconds of
/// its own clock and only once. A body signed alone (the first version)
/// could be captured on the wire and sent again for ever: a `POST /faults`
/// blackhole replayed after the chaos run that sent it. The cost is that the
/// clocks of the signer and the node must agree to within the window, as
/// NTP keeps them.
package enum SignedRequest {
    package static let timestampHeader = "x-oscar-timestamp"
    package static let nonceHeader = "x-oscar-nonce"
    package static let signatureHeader = "x-oscar-signature"

    /// How far a request's timestamp may be from the node's clock, seconds.
    package static let window: Int64 = 30

    /// The headers that sign a request (names as sent; HTTP ignores case).
    package static func headers(
        method: String, path: String, body: [UInt8], secret: [UInt8], now: Int64,
        nonce: String = (0..<2).map { _ in String(UInt64.random(in: .min ... .max), radix: 16).leftPadded(16) }
            .joined()
    ) -> [String: String] {
        [
            timestampHeader: "\(now)", nonceHeader: nonce,
            signatureHeader: signature(
                method: method, path: path, timestamp: now, nonce: nonce, body: body, secret: secret),
        ]
    }

    /// The hex HMAC-SHA256, under the secret, of `METHOD\nPATH\nTIMESTAMP\nNONCE\n`
    /// followed by the body. `openssl dgst -sha256 -hmac "$SECRET"` over the
    /// same bytes computes it.
    package static func signature(
        method: String, path: String, timestamp: Int64, nonce: String, body: [UInt8], secret: [UInt8]
    ) -> String {
        let head = Array("\(method)\n\(path)\n\(timestamp)\n\(nonce)\n".utf8)
        return HMAC.sha256(key: secret, message: head + body).hex
    }
}

/// The nonces a node has accepted, until their window has passed: the pure
/// core of the replay check, one per management endpoint.
///
/// Bounded: at most `capacity` nonces are remembered. When that many signed
/// requests arrived within one window, the next is refused (503) until old
/// ones expire, rather than forgetting a nonce that could then be replayed.
package struct ReplayGuard: Sendable {
    package let capacity: Int
    private var expiries: [String: Int64] = [:]

    package init(capacity: Int = 4096) { self.capacity = capacity }

    /// Nil when `request` is signed with `secret`, fresh at `now` (Unix
    /// seconds) and not seen before, and remembers its nonce; otherwise the
    /// refusal.
    package mutating func admit(
        _ request: ManagementRoutes.Request, secret: [UInt8], now: Int64
    ) -> ManagementRoutes.Refusal? {
        let usage =
            "sign it: \(SignedRequest.timestampHeader) (Unix seconds), \(SignedRequest.nonceHeader) (8 to 64 hex "
            + "digits, once) and \(SignedRequest.signatureHeader) (see docs/PROTOCOL.md)"
        guard let timestampText = request.headers[SignedRequest.timestampHeader],
            let timestamp = Int64(timestampText),
            let nonce = request.headers[SignedRequest.nonceHeader]?.lowercased(),
            (8...64).contains(nonce.utf8.count), nonce.utf8.allSatisfy(\.isHexDigit),
            let signature = request.headers[SignedRequest.signatureHeader]?.lowercased()
        else { return ManagementRoutes.Refusal(status: 401, "unsigned request; \(usage)") }
        let expected = SignedRequest.signature(
            method: request.method, path: request.path, timestamp: timestamp, nonce: nonce, body: request.body,
            secret: secret)
        guard HMAC.equal(Array(signature.utf8), Array(expected.utf8)) else {
            return ManagementRoutes.Refusal(status: 401, "wrong signature; \(usage)")
        }
        let (distance, overflowed) = now.subtractingReportingOverflow(timestamp)
        guard !overflowed, distance.magnitude <= SignedRequest.window.magnitude else {
            return ManagementRoutes.Refusal(
                status: 401, "stale: signed at \(timestamp), now is \(now) (a \(SignedRequest.window) s window)")
        }
        if expiries.count >= capacity { expiries = expiries.filter { $0.value >= now } }
        guard expiries[nonce] == nil else {
            return ManagementRoutes.Refusal(status: 401, "replayed: nonce already used")
        }
        guard expiries.count < capacity else {
            return ManagementRoutes.Refusal(status: 503, "too many signed requests in \(SignedRequest.window) s; retry")
        }
        let (expiry, past) = timestamp.addingReportingOverflow(SignedRequest.window)
        expiries[nonce] = past ? .max : expiry
        return nil
    }

    /// Nonces remembered now.
    package var remembered: Int { expiries.count }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool { (48...57).contains(self) || (97...102).contains(self) }
}
