// Unit tests: the daemon's proxy settings, their precedence over the environment, a session's redacted proxy.
import Foundation
@testable import HalfTunesDaemon
import HalfTunesProtocol
import Testing

@Suite("Proxy settings")
struct ProxySettingsTests {
    func parse(_ text: String) throws(ConfigFileError) -> DaemonSettings { try ConfigFile.parse(text, path: "/etc/h.conf") }

    @Test func theSettingsAreCheckedAndStoredNormalized() throws {
        let s = try parse("proxy = HTTP://alice:s3cret@Proxy.corp:3128/\nproxy-bypass = localhost, .corp 10.0.0.0/8")
        #expect(s.proxy == "http://alice:s3cret@proxy.corp:3128")
        #expect(s.proxyBypass == "localhost,.corp,10.0.0.0/8")
        #expect(try parse("proxy = direct").proxy == "direct")
        for bad in ["proxy = ftp://h:1", "proxy = socks5://u:p@h:1", "proxy-bypass = 10.0.0.0/40"] {
            do {
                _ = try parse(bad)
                Issue.record("'\(bad)' parsed")
            } catch {
                #expect("\(error)".contains("h.conf:1"), "\(error)")
            }
        }
    }

    /// The setting wins over the environment for every scheme; the bypass list falls back to no_proxy.
    @Test func theSettingWinsOverTheEnvironment() throws {
        let env = ["http_proxy": "http://env:1", "https_proxy": "http://env:2", "no_proxy": "skip.test"]
        let fromEnv = ResolvedSettings(try parse("")).proxyRules(environment: env)
        #expect(fromEnv.0.source == "environment" && fromEnv.0.proxy(for: "https://x/")?.port == 2)
        #expect(fromEnv.0.proxy(for: "https://skip.test/") == nil)
        let configured = ResolvedSettings(try parse("proxy = http://conf:3")).proxyRules(environment: env).0
        #expect(configured.source == "configuration")
        #expect(configured.proxy(for: "http://x/")?.host == "conf" && configured.proxy(for: "https://x/")?.host == "conf")
        #expect(configured.proxy(for: "http://skip.test/") == nil, "no_proxy still applies")
        let direct = ResolvedSettings(try parse("proxy = direct\nproxy-bypass = a.test")).proxyRules(environment: env).0
        #expect(direct.isDirect)
        let bypass = ResolvedSettings(try parse("proxy-bypass = a.test")).proxyRules(environment: env).0
        #expect(bypass.proxy(for: "http://skip.test/")?.host == "env" && bypass.proxy(for: "http://a.test/") == nil)
    }

    /// A session's proxy is stored whole and shown without its password; the shown form sent back keeps it.
    @Test func aSessionsProxyIsRedactedAndRoundTrips() throws {
        let stored = try SessionProxy.resolve("http://alice:s3cret@proxy:3128", stored: nil)
        #expect(stored == "http://alice:s3cret@proxy:3128")
        let shown = SessionProxy.presented(stored)
        #expect(shown == "http://alice:***@proxy:3128")
        #expect(try SessionProxy.resolve(shown, stored: stored) == stored)
        #expect(try SessionProxy.resolve("http://alice:other@proxy:3128", stored: stored) == "http://alice:other@proxy:3128")
        #expect(try SessionProxy.resolve("DIRECT", stored: stored) == "direct" && SessionProxy.presented("direct") == "direct")
        #expect(try SessionProxy.resolve("", stored: stored) == nil && SessionProxy.resolve(nil, stored: stored) == nil)
        #expect(try SessionProxy.resolveBypass("") == "" && SessionProxy.resolveBypass(nil) == nil)
        #expect(throws: RPCError.self) { try SessionProxy.resolve("gopher://h:1", stored: nil) }
    }
}
