import Oscar
import Testing

/// Configuration resolves flags, then environment, then file, then defaults,
/// and names the key and source of a bad value.
@Suite(.timeLimit(.minutes(5))) struct NodeConfigurationTests {
    let file = (path: "node.json", text: #"{"port": 7100, "roles": ["a", "b"], "stable-after": "7s", "secret": "f"}"#)

    /// Seeds in code read as a person writes them; text from outside
    /// parses to nil, never a trap.
    @Test func nodeAddressesAreWrittenAsHostPortLiterals() {
        let seeds: [NodeAddress] = ["127.0.0.1:7001", "node-2.inventory.svc:7000"]
        #expect(
            seeds == [
                NodeAddress(host: "127.0.0.1", port: 7001), NodeAddress(host: "node-2.inventory.svc", port: 7000),
            ])
        #expect(ClusterNode.Settings(secret: "a-long-cluster-secret", seeds: ["127.0.0.1:7001"]).seeds == [seeds[0]])
        for text in ["127.0.0.1", ":7001", "host:0", "host:65536", "host:x", ""] {
            #expect(NodeAddress(hostPort: text) == nil, "\(text)")
        }
    }

    @Test func flagsBeatEnvironmentBeatFileBeatDefaults() throws {
        let r = try NodeConfiguration.resolve(
            flags: ["port": "7300"], environment: ["OSCAR_PORT": "7200", "OSCAR_SECRET": "e"], file: file)
        #expect(r.configuration.port == 7300 && r.sources["port"] == .flag)
        #expect(r.configuration.secret == "e" && r.sources["secret"] == .environment)
        #expect(r.configuration.roles == ["a", "b"] && r.sources["roles"] == .file)
        #expect(r.configuration.stableAfter == .seconds(7))
        #expect(r.configuration.bindHost == "127.0.0.1" && r.sources["bind-host"] == .default)
        let settings = r.configuration.clusterSettings(secret: "e")
        #expect(settings.port == 7300 && settings.membership.stableAfter == 7)
    }

    /// `max-message-size` takes bytes or KiB, MiB and GiB, up to the wire's
    /// 2 GiB, and reaches the node's settings.
    @Test func theMaximumMessageSizeIsASizeUpToTwoGiB() throws {
        func resolved(_ text: String) -> Int? {
            try? NodeConfiguration.resolve(flags: ["max-message-size": text], environment: [:], file: nil)
                .configuration.clusterSettings(secret: "s").maxMessageSize
        }
        #expect(NodeConfiguration().clusterSettings(secret: "s").maxMessageSize == 64 << 20)
        #expect(resolved("16MiB") == 16 << 20)
        #expect(resolved("512KiB") == 512 << 10)
        #expect(resolved("2GiB") == 1 << 31)
        #expect(resolved("1_000_000") == 1_000_000)
        for bad in ["3GiB", "2147483649", "0", "-1", "12x", "MiB", "", "9223372036854775807GiB"] {
            #expect(resolved(bad) == nil, "\(bad)")
        }
        let file = try NodeConfiguration.resolve(
            flags: [:], environment: [:], file: ("n.json", #"{"max-message-size": "32MiB"}"#))
        #expect(file.configuration.maxMessageSize == 32 << 20 && file.sources["max-message-size"] == .file)
    }

    /// `loop-cpus` is a list of CPU numbers that reaches the node's loops;
    /// anything else is refused by name.
    @Test func loopCPUsAreAListOfCPUNumbers() throws {
        func resolved(_ text: String) -> [Int]? {
            try? NodeConfiguration.resolve(flags: ["loop-cpus": text], environment: [:], file: nil)
                .configuration.clusterSettings(secret: "s").loopCPUs
        }
        #expect(NodeConfiguration().clusterSettings(secret: "s").loopCPUs.isEmpty)
        #expect(resolved("0") == [0])
        #expect(resolved("2, 3,1") == [2, 3, 1])
        #expect(resolved("0-2,5") == [0, 1, 2, 5])
        for bad in ["", "x", "1,", "-1", "1024", "0;1", "3-1", "0-", "0-1-2", "1-1024"] {
            #expect(resolved(bad) == nil, "\(bad)")
        }
        #expect(Self.failureOf(flags: ["loop-cpus": "0,,1"])?.reason == "'' is not a CPU or a range of CPUs like 0-3")
        #expect(Self.failureOf(flags: ["loop-cpus": "a"])?.key == "loop-cpus")
        let environment = try NodeConfiguration.resolve(flags: [:], environment: ["OSCAR_LOOP_CPUS": "1"])
        #expect(environment.configuration.loopCPUs == [1])
    }

    /// `cluster-size` reaches `MembershipSettings.scaled(toClusterSize:)`
    /// from a flag, the environment or a file, on top of the windows given.
    @Test func aClusterSizeOverAThousandWidensTheDowningWindows() throws {
        let small = try NodeConfiguration.resolve(flags: ["cluster-size": "1000"], environment: [:])
        #expect(small.configuration.clusterSettings(secret: "e").membership == MembershipSettings())
        let large = try NodeConfiguration.resolve(
            flags: ["removal-margin": "10s"], environment: ["OSCAR_CLUSTER_SIZE": "3000"])
        #expect(large.configuration.clusterSize == 3_000 && large.sources["cluster-size"] == .environment)
        var expected = MembershipSettings()
        expected.removalMargin = 10
        #expect(large.configuration.clusterSettings(secret: "e").membership == expected.scaled(toClusterSize: 3_000))
        #expect(expected.scaled(toClusterSize: 3_000) != expected, "not vacuous")
        // --print-config shows the windows in effect beside the ones given.
        #expect(
            large.printed.contains(
                "cluster-size = 3000 (in effect: decide-when-unstable-after 9s, removal-margin 16s, first seed's wait 17s)"
            ), "\(large.printed)")
        #expect(try NodeConfiguration.resolve(flags: [:], environment: [:]).printed.contains("(not set)"))
        do {
            _ = try NodeConfiguration.resolve(flags: ["cluster-size": "0"], environment: [:])
            Issue.record("a cluster of no members is refused")
        } catch { #expect(error.key == "cluster-size") }
    }

    @Test func printedConfigurationMasksTheSecret() throws {
        let r = try NodeConfiguration.resolve(flags: ["secret": "hunter2"], environment: [:])
        #expect(!r.printed.contains("hunter2"))
        #expect(r.printed.contains("secret = ******  (flag)"))
    }

    @Test func badValuesNameTheKeyAndTheSource() {
        func failure(
            _ flags: [String: String], _ env: [String: String] = [:], file: (path: String, text: String)? = nil
        )
            -> ConfigurationError?
        {
            do {
                _ = try NodeConfiguration.resolve(flags: flags, environment: env, file: file)
                return nil
            } catch { return error }
        }
        #expect(failure([:], ["OSCAR_PORT": "abc"])?.description.contains("port (from OSCAR_PORT)") == true)
        #expect(failure(["seeds": "nohost"])?.key == "seeds")
        #expect(failure(["downing": "random"])?.source == "--downing")
        #expect(failure(["bind-host": "0.0.0.0"])?.key == "advertised-host")
        #expect(failure([:], file: ("n.json", #"{"prot": 1}"#))?.reason.contains("unknown setting") == true)
        #expect(failure([:], file: ("n.json", "[1]"))?.key == "config")
        #expect(failure([:], file: ("n.json", "{"))?.reason.contains("not valid JSON") == true)
        #expect(failure(["bind-host": "0.0.0.0", "advertised-host": "oscar-1", "seeds": "oscar-1:7000"]) == nil)
    }

    static func failure(file text: String) -> ConfigurationError? {
        do {
            _ = try NodeConfiguration.resolve(flags: [:], environment: [:], file: ("n.json", text))
            return nil
        } catch { return error }
    }

    @Test func aKeyGivenTwiceInTheFileIsRefusedByName() {
        let twice = Self.failure(file: #"{"port": 7100, "roles": "a", "port": 7200}"#)
        #expect(twice?.key == "port" && twice?.source == "n.json", "\(String(describing: twice))")
        #expect(twice?.description.contains("given twice") == true)
        // Equal once unescaped, and at any position.
        #expect(Self.failure(file: #"{"roles": "a", "log-level": "info", "r\u006fles": "b"}"#)?.key == "roles")
        #expect(Self.failure(file: #"{"port": 7100, "roles": "a"}"#) == nil)
    }

    @Test func aConfigFileOverTheMaximumIsRefusedAtTheLimit() {
        let padding = { (n: Int) in "{\"port\": 7100" + String(repeating: " ", count: n) + "}" }
        let exact = padding(NodeConfiguration.maxFileSize - padding(0).utf8.count)
        #expect(exact.utf8.count == NodeConfiguration.maxFileSize)
        #expect(Self.failure(file: exact) == nil)
        let over = Self.failure(file: exact + " ")
        #expect(over?.key == "config" && over?.reason.contains("maximum of 1048576 bytes") == true)
    }

    @Test func rolesWithControlCharactersAreRefused() {
        for bad in ["a\u{0}", "a\nb", "\u{7f}", "x,\t"] {
            #expect(Self.failureOf(flags: ["roles": bad])?.key == "roles", "\(bad.debugDescription)")
        }
        // Quotes and backslashes are fine: JSON output escapes them.
        #expect(Self.failureOf(flags: ["roles": #"q"uote,back\slash,水"#]) == nil)
        #expect(Self.failure(file: #"{"roles": ["ok", "n\u0001"]}"#)?.key == "roles")
    }

    /// The three TLS files go together; every source names them the same.
    @Test func tlsTakesItsThreeFilesTogetherAndThePlaintextSwitch() throws {
        let r = try NodeConfiguration.resolve(
            flags: ["tls-cert": "a.pem"], environment: ["OSCAR_TLS_KEY": "a.key", "OSCAR_TLS_PLAINTEXT": "accept"],
            file: (path: "node.json", text: #"{"tls-ca": "ca.pem"}"#))
        #expect(r.sources["tls-cert"] == .flag && r.sources["tls-key"] == .environment && r.sources["tls-ca"] == .file)
        let tls = try #require(r.configuration.clusterSettings(secret: "s").tls)
        #expect(tls.certificateFile == "a.pem" && tls.privateKeyFile == "a.key" && tls.caFile == "ca.pem")
        #expect(tls.acceptsPlaintext)
        #expect(r.printed.contains("tls-plaintext = accept  (environment)"))

        let none = try NodeConfiguration.resolve(flags: [:], environment: [:])
        #expect(none.configuration.clusterSettings(secret: "s").tls == nil)
        #expect(none.configuration.tlsPlaintext == .refuse)
        #expect(Self.failureOf(flags: ["tls-cert": "a.pem", "tls-ca": "ca.pem"])?.key == "tls-key")
        #expect(Self.failureOf(flags: ["tls-ca": "ca.pem"])?.key == "tls-cert")
        #expect(Self.failureOf(flags: ["tls-plaintext": "maybe"])?.reason == "must be refuse or accept, not 'maybe'")
        #expect(Self.failureOf(flags: ["tls-key": ""])?.key == "tls-key")
    }

    static func failureOf(flags: [String: String]) -> ConfigurationError? {
        do {
            _ = try NodeConfiguration.resolve(flags: flags, environment: [:])
            return nil
        } catch { return error }
    }
}
