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

/// Which release of Oscar this is. (Not named `Oscar`: a type named like
/// its module would hide the module, and `Oscar.Message` could no longer
/// name the protocol where an application has a `Message` of its own.)
public enum OscarRelease {
    /// The release of this library and CLI.
    public static let version = "0.1.0"
}
