import CLibUV
import Glibc
import Oscar

/// `oscar`: thin by design. It parses arguments and prints; the work is in the
/// Oscar library.
let usage = """
    oscar — distributed actors for Swift

    USAGE
      oscar demo                      start a local actor system and show a round trip
      oscar bench w4 [--count N]      workload W4: local tell throughput
      oscar help | --help             this text
      oscar version

    Exit codes: 0 success, 1 the command failed, 64 bad arguments.
    """

oscar_stdout_line_buffered()
let raw = CommandLine.arguments.dropFirst()
let command = raw.first ?? "help"

func fail(_ error: CLIError) -> Never {
    FileStream.standardError.write("oscar: \(error)\n")
    exit(error.exitCode)
}

do throws(CLIError) {
    var args = try Arguments(raw.dropFirst())
    switch command {
    case "help", "--help", "-h":
        print(usage)
    case "version", "--version":
        print("oscar \(Oscar.version)")
    case "demo":
        try args.rejectUnknownOptions()
        try await DemoCommand.run()
    case "bench":
        try await BenchCommand.run(&args)
    default:
        throw .usage("unknown command '\(command)'; see 'oscar help'")
    }
} catch {
    fail(error)
}
