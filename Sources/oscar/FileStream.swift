import Glibc
import Oscar

/// Writes to a file descriptor in one `write(2)` per call.
struct FileStream {
    let fd: Int32
    static let standardError = FileStream(fd: 2)

    func write(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    /// `path` opened for appending (created if missing), kept open: for a
    /// history written line by line. Nil when it cannot be opened.
    static func appending(_ path: String) -> FileStream? {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        return fd >= 0 ? FileStream(fd: fd) : nil
    }

    /// Replaces `path` with `text`, created with `mode`; false on failure.
    static func write(_ path: String, _ text: String, mode: mode_t = 0o644) -> Bool {
        put(path, text, flags: O_TRUNC, mode: mode)
    }

    /// Replaces `path` with `text`, created with `mode`, or fails naming
    /// the path and the system's reason.
    static func replace(_ path: String, with text: String, mode: mode_t = 0o644) throws(CLIError) {
        guard write(path, text, mode: mode) else {
            throw .failed("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Appends `text` to `path`, creating it; false on failure.
    static func append(_ path: String, _ text: String) -> Bool { put(path, text, flags: O_APPEND, mode: 0o644) }

    private static func put(_ path: String, _ text: String, flags: Int32, mode: mode_t) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, mode)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == bytes.count
    }

    /// The names in a directory (not `.` and `..`); empty if it cannot be read.
    static func names(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// A file as UTF-8 text, read to at most `limit` bytes: a larger file,
    /// or one that never ends (`/dev/zero`), is refused with a usage error
    /// that says so, after reading `limit + 1` bytes, not for ever.
    static func read(_ path: String, atMost limit: Int) throws(CLIError) -> String {
        do { return try ProcessControl.readFile(path, atMost: limit) } catch { throw .usage("\(error)") }
    }

    /// A whole (small) file as UTF-8 text; nil when it cannot be read.
    static func readAll(_ path: String) -> String? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = fread(&chunk, 1, chunk.count, file)
            if n == 0 { break }
            bytes += chunk[..<n]
        }
        return ferror(file) == 0 ? String(decoding: bytes, as: UTF8.self) : nil
    }
}
