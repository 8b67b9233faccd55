/// Oscar: distributed actors for Swift, on libuv, over TCP.
public enum Oscar {
    /// The release of this library and CLI.
    public static let version = "0.1.0"
}
