import Foundation

/// /usr/bin/openssl, the standard tool that the certificates Oscar issues
/// must satisfy.
public enum OpenSSLTool {
    /// Runs `openssl ARGUMENTS` with `input` on its standard input; its exit
    /// status and its output (standard output and error together).
    public static func run(_ arguments: [String], input: String = "") throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let output = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = stdin
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
