import Synchronization

/// Holds the non-actor services an application shares with its actors (a
/// storage, a clock, an HTTP client), registered by type or by protocol.
///
/// Services are shared by actors on every loop, so they must be `Sendable`.
public final class ServiceLocator: Sendable {
    private let services = Mutex<[ObjectIdentifier: any Sendable]>([:])

    public init() {}

    /// Registers `service` under `type`: its own type by default, or a
    /// protocol it conforms to (`register(storage, as: (any SessionStore).self)`).
    /// A later registration under the same type replaces the earlier one.
    public func register<S: Sendable>(_ service: S, as type: S.Type = S.self) {
        services.withLock { $0[ObjectIdentifier(type)] = service }
    }

    /// The service registered under `type`, if any.
    public func service<S>(_ type: S.Type = S.self) -> S? {
        services.withLock { $0[ObjectIdentifier(type)] } as? S
    }
}
