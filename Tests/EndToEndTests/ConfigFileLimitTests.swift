import Foundation
import Testing

/// `oscar node --config FILE` reads at most `NodeConfiguration.maxFileSize`
/// (1 MiB) of the file: one that never ends is refused, not read for ever.
@Suite(.timeLimit(.minutes(4))) struct ConfigFileLimitTests {
    @Test func aConfigFileThatNeverEndsIsRefusedAtTheLimit() async throws {
        let endless = try await OscarProcess.run(
            ["node", "--config", "/dev/zero", "--check-config"], timeout: .seconds(30))
        #expect(endless.status == 64, "\(endless.stderr)")
        #expect(endless.stderr.contains("'/dev/zero' is larger than the maximum of 1048576 bytes"), "\(endless.stderr)")
    }

    @Test func aConfigFileAtTheLimitIsReadAndOneByteMoreIsNot() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("oscar-config-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let head = #"{"port": 7100"#
        let exact = head + String(repeating: " ", count: 1_048_576 - head.utf8.count - 1) + "}"
        let fits = dir.appendingPathComponent("fits.json")
        let over = dir.appendingPathComponent("over.json")
        try exact.write(to: fits, atomically: true, encoding: .utf8)
        try (exact + "\n").write(to: over, atomically: true, encoding: .utf8)
        let good = try await OscarProcess.run(["node", "--config", fits.path, "--check-config"])
        #expect(good.status == 0, "\(good.stderr)")
        let bad = try await OscarProcess.run(["node", "--config", over.path, "--check-config"])
        #expect(bad.status == 64 && bad.stderr.contains("larger than the maximum"), "\(bad.stderr)")
    }
}
