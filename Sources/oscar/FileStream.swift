import Glibc

/// Writes to a file descriptor in one `write(2)` per call.
struct FileStream {
    let fd: Int32
    static let standardError = FileStream(fd: 2)

    func write(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
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

/// The process environment, without Foundation.
enum ProcessInfoLite {
    static var environment: [String: String] {
        var out: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let eq = text.firstIndex(of: "=") {
                out[String(text[..<eq])] = String(text[text.index(after: eq)...])
            }
            entry += 1
        }
        return out
    }
}
