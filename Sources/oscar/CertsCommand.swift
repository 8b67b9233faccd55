import Oscar

/// `oscar certs`: the cluster's certificates with no other tool. The work is
/// the library's (`CertificateDirectory`); this parses and prints.
enum CertsCommand {
    static let usage =
        "usage: oscar certs init --dir D [--days N] [--force] | "
        + "issue --dir D --name NAME --host H [--host H2...] [--days N] [--force] | show FILE"

    static func run(_ args: inout Arguments) throws(CLIError) {
        let positionals = args.positionals
        switch positionals.first {
        case "init":
            guard positionals.count == 1 else { throw .usage(usage) }
            let directory = try directory(&args)
            let days = try args.int(
                "days", default: CertificateDirectory.authorityDays, range: 1...CertificateDirectory.maxDays)
            try args.rejectUnknownOptions()
            let summary = try perform { () throws(CertificateError) in
                try directory.createAuthority(days: days, force: args.has("force"))
            }
            print("wrote \(directory.caCertificate) and \(directory.caKey) (key mode 0600)\n\(summary)")
        case "issue":
            guard positionals.count == 1 else { throw .usage(usage) }
            let directory = try directory(&args)
            guard let name = args.option("name") else { throw .usage("--name is required; \(usage)") }
            let hosts = args.values("host")
            guard !hosts.isEmpty else { throw .usage("at least one --host is required; \(usage)") }
            let days = try args.int(
                "days", default: CertificateDirectory.nodeDays, range: 1...CertificateDirectory.maxDays)
            try args.rejectUnknownOptions()
            let summary = try perform { () throws(CertificateError) in
                try directory.issue(name: name, hosts: hosts, days: days, force: args.has("force"))
            }
            print("wrote \(directory.certificate(of: name)) and \(directory.key(of: name)) (key mode 0600)\n\(summary)")
        case "show":
            guard positionals.count == 2 else { throw .usage(usage) }
            try args.rejectUnknownOptions()
            print(try perform { () throws(CertificateError) in try CertificateDirectory.show(positionals[1]) })
        default:
            throw .usage(usage)
        }
    }

    private static func directory(_ args: inout Arguments) throws(CLIError) -> CertificateDirectory {
        guard let path = args.option("dir"), !path.isEmpty else { throw .usage("--dir is required; \(usage)") }
        return CertificateDirectory(path)
    }

    /// A bad name, host or lifetime is a usage error (64); a file in the
    /// way, unreadable or not a certificate, a failure (1).
    private static func perform<T>(_ body: () throws(CertificateError) -> T) throws(CLIError) -> T {
        do { return try body() } catch {
            if case .invalidArgument(let text) = error { throw .usage(text) }
            throw .failed("\(error)")
        }
    }
}
