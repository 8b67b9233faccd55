import Glibc

/// Writes to a file descriptor in one `write(2)` per call.
struct FileStream {
    let fd: Int32
    static let standardError = FileStream(fd: 2)

    func write(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }
}
