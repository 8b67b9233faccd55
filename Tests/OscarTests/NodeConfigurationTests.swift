import Testing

@testable import Oscar

/// Configuration resolves flags, then environment, then file, then defaults,
/// and names the key and source of a bad value.
@Suite(.timeLimit(.minutes(5))) struct NodeConfigurationTests {
    let file = (path: "node.json", text: #"{"port": 7100, "roles": ["a", "b"], "stable-after": "7s", "secret": "f"}"#)

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
}
