// The one module an application imports. Each layer below is its own module so
// that the compiler keeps the layering (docs/ARCHITECTURE.md); this one
// re-exports the ones an application uses.
@_exported import OscarBase
@_exported import OscarCBOR
@_exported import OscarCluster
@_exported import OscarDistributed
@_exported import OscarMembership
@_exported import OscarRemote
@_exported import OscarRuntime

/// Oscar: distributed actors for Swift, on libuv, over TCP.
public enum Oscar {
    /// The release of this library and CLI.
    public static let version = "0.1.0"
}
