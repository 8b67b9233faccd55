import Glibc

/// A bug planted on purpose, to prove that `oscar chaos` catches broken
/// reliable delivery: with `OSCAR_PLANTED_FAULT=reliable-drop-one`, a
/// consumer acknowledges message 5 without processing it. Debug builds only
/// (the test build); a release build ignores the variable.
enum PlantedFault {
    #if DEBUG
        static let dropsOneDelivery = getenv("OSCAR_PLANTED_FAULT").map { String(cString: $0) } == "reliable-drop-one"
    #else
        static let dropsOneDelivery = false
    #endif

    static func skips(_ seq: UInt64) -> Bool { dropsOneDelivery && seq == 5 }
}
