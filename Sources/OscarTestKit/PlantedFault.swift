import Glibc
import OscarCluster

/// A bug planted on purpose, to prove that `oscar chaos` catches broken
/// reliable delivery: with `OSCAR_PLANTED_FAULT=reliable-drop-one`, a
/// consumer acknowledges message 5 without processing it. The library never
/// reads the variable; the CLI's node calls `plantFromEnvironment`, in debug
/// builds only (the test build).
public enum PlantedFault {
    /// Plants the bug named by `OSCAR_PLANTED_FAULT`, if any.
    public static func plantFromEnvironment() {
        #if DEBUG
            if getenv("OSCAR_PLANTED_FAULT").map({ String(cString: $0) }) == "reliable-drop-one" {
                PlantedBug.skipsFifthDelivery.store(true, ordering: .relaxed)
            }
        #endif
    }
}
