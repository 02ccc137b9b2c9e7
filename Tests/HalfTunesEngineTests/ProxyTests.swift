// Unit tests: proxy URLs, the bypass list's rules, curl's environment variables, and proxy failures' words.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import AsyncHTTPClient
@testable import HalfTunesCore
@testable import HalfTunesEngine
import HalfTunesProtocol
import NIOCore
import NIOSOCKS
import Testing

@Suite struct ProxyServerTests {
    @Test(arguments: [
        ("http://proxy.corp:3128", ProxyServer(kind: .http, host: "proxy.corp", port: 3128)),
        ("proxy.corp:3128", ProxyServer(kind: .http, host: "proxy.corp", port: 3128)),
        ("HTTP://Proxy.Corp:3128/", ProxyServer(kind: .http, host: "proxy.corp", port: 3128)),
        ("http://proxy.corp", ProxyServer(kind: .http, host: "proxy.corp", port: 1080)),
        ("http://alice:s3cret@10.0.0.1:8080", ProxyServer(kind: .http, host: "10.0.0.1", port: 8080, username: "alice", password: "s3cret")),
        ("http://al%40ice:p%3Ass%40w@h:1", ProxyServer(kind: .http, host: "h", port: 1, username: "al@ice", password: "p:ss@w")),
        ("http://bob@h:2", ProxyServer(kind: .http, host: "h", port: 2, username: "bob", password: "")),
        ("http://[::1]:3128", ProxyServer(kind: .http, host: "::1", port: 3128)),
        ("socks5://127.0.0.1:1080", ProxyServer(kind: .socks5, host: "127.0.0.1", port: 1080)),
        ("socks5h://tor.local:9050", ProxyServer(kind: .socks5h, host: "tor.local", port: 9050)),
        ("  http://h:3  ", ProxyServer(kind: .http, host: "h", port: 3)),
    ])
    func parses(_ text: String, _ expected: ProxyServer) throws {
        #expect(try ProxyServer.parse(text) == expected)
    }

    @Test(arguments: [
        ("", "empty"),
        ("https://h:443", "https:// proxies"),
        ("socks4://h:1080", "not supported"),
        ("ftp://h:21", "unknown proxy scheme 'ftp'"),
        ("http://h:0", "port must be from 1 to 65535"),
        ("http://h:65536", "port must be from 1 to 65535"),
        ("http://h:port", "port must be from 1 to 65535"),
        ("http://h:3128/path", "no path"),
        ("http://h:3128?x=1", "no path"),
        ("http://:3128", "must name a host"),
        ("http://h h:1", "spaces"),
        ("http://h\r\n:1", "control characters"),
        ("socks5://u:p@h:1080", "SOCKS proxies with a user name and password are not supported"),
        ("http://:pw@h:1", "user name must not be empty"),
        ("http://[::1:3128", "lacks its ']'"),
        ("http://h_o$t:1", "not a valid host"),
    ])
    func refuses(_ text: String, _ words: String) {
        do {
            let parsed = try ProxyServer.parse(text)
            Issue.record("'\(text)' parsed as \(parsed)")
        } catch {
            #expect(error.message.contains(words), "\(error.message)")
        }
    }

    @Test func passwordsAreRedactedWhereverShown() throws {
        let p = try ProxyServer.parse("http://alice:s3cret@proxy:3128")
        #expect(p.description == "http://alice:***@proxy:3128")
        #expect("\(p)" == "http://alice:***@proxy:3128")
        #expect(p.url(redacted: false) == "http://alice:s3cret@proxy:3128")
        #expect(try ProxyServer.parse(p.url(redacted: false)) == p, "the stored form parses back")
        let odd = try ProxyServer.parse("http://a%3Ab:p%40ss@h:1")
        #expect(try ProxyServer.parse(odd.url(redacted: false)) == odd)
        #expect(ProxyServer.redact("http://u:pw@h:1/x y") == "http://u:***@h:1/x y", "even a URL that does not parse")
        #expect(ProxyServer.redact("http://h:1") == "http://h:1")
        #expect(try ProxyServer.parse("http://[::1]:8").description == "http://[::1]:8")
    }

    @Test func clientProxyCarriesTheCredentials() throws {
        let http = try ProxyServer.parse("http://alice:s3cret@proxy:3128").clientProxy
        #expect(http.host == "proxy" && http.port == 3128)
        #expect(http.authorization == .basic(username: "alice", password: "s3cret"))
        let socks = try ProxyServer.parse("socks5h://s:9050").clientProxy
        #expect(socks.host == "s" && socks.port == 9050 && socks.authorization == nil)
    }
}

@Suite struct ProxyBypassTests {
    @Test(arguments: [
        // (list, host, bypassed)
        ("example.com", "example.com", true),
        ("example.com", "www.example.com", true),
        ("example.com", "EXAMPLE.com.", true),
        ("example.com", "notexample.com", false),
        ("example.com", "example.com.evil", false),
        (".example.com", "example.com", true),
        (".example.com", "a.b.example.com", true),
        ("*.example.com", "a.example.com", true),
        ("*", "anything.at.all", true),
        ("localhost, 127.0.0.1", "localhost", true),
        ("localhost, 127.0.0.1", "127.0.0.1", true),
        ("localhost 127.0.0.1", "127.0.0.2", false),
        ("10.0.0.0/8", "10.200.3.4", true),
        ("10.0.0.0/8", "11.0.0.1", false),
        ("192.168.1.0/24", "192.168.1.77", true),
        ("192.168.1.0/24", "192.168.2.1", false),
        ("10.0.0.0/8", "ten.example", false),
        ("::1", "[::1]", true),
        ("[::1]", "::1", true),
        ("fd00::/8", "[fd12:3456::1]", true),
        ("fd00::/8", "[fe80::1]", false),
        ("0.0.0.0/0", "8.8.8.8", true),
        ("0.0.0.0/0", "::1", false),
        ("example.com:8080", "example.com", true),
        ("", "example.com", false),
    ])
    func matches(_ list: String, _ host: String, _ bypassed: Bool) throws {
        #expect(try ProxyBypass.parse(list).matches(host: host) == bypassed, "\(list) vs \(host)")
    }

    @Test func badEntriesAreNamed() {
        for bad in ["10.0.0.0/33", "a/b", "exa mple.com,@host", "h$st"] {
            do {
                _ = try ProxyBypass.parse(bad)
                Issue.record("'\(bad)' parsed")
            } catch {
                #expect(error.message.contains("neither a host name"), "\(error.message)")
            }
        }
        #expect((try? ProxyBypass.parse(" a.com ,, .b.org\t10.0.0.0/8 "))?.text == "a.com,.b.org,10.0.0.0/8")
    }
}

@Suite struct ProxyRulesTests {
    let proxyA = ProxyServer(kind: .http, host: "a", port: 1)
    let proxyB = ProxyServer(kind: .http, host: "b", port: 2)
    let socks = ProxyServer(kind: .socks5h, host: "s", port: 3)

    @Test func curlsVariables() {
        var (rules, problems) = ProxyRules.environment(["http_proxy": "http://a:1", "HTTPS_PROXY": "b:2", "no_proxy": "local.test"])
        #expect(problems.isEmpty && rules.source == "environment")
        #expect(rules.proxy(for: "http://x.org/f") == proxyA && rules.proxy(for: "https://x.org/f") == proxyB)
        #expect(rules.proxy(for: "https://files.local.test/f") == nil)
        // HTTP_PROXY (upper case) is ignored, as curl ignores it; all_proxy covers a scheme without its own.
        (rules, _) = ProxyRules.environment(["HTTP_PROXY": "http://a:1"])
        #expect(rules.isDirect && rules.source == "none")
        (rules, _) = ProxyRules.environment(["ALL_PROXY": "socks5h://s:3", "https_proxy": "http://b:2"])
        #expect(rules.proxy(for: "http://x/") == socks && rules.proxy(for: "https://x/") == proxyB)
        // Lower case wins; an empty variable is unset.
        (rules, _) = ProxyRules.environment(["https_proxy": "http://a:1", "HTTPS_PROXY": "http://b:2", "all_proxy": " "])
        #expect(rules.https == proxyA && rules.http == nil)
        // `direct` in a variable means none for that scheme.
        (rules, _) = ProxyRules.environment(["all_proxy": "http://a:1", "http_proxy": "direct"])
        #expect(rules.http == nil && rules.https == proxyA)
    }

    @Test func badVariablesAreLeftOutAndNamedWithoutTheirPassword() {
        let (rules, problems) = ProxyRules.environment(["https_proxy": "ftp://u:pw@h:1", "no_proxy": "10.0.0.0/99"])
        #expect(rules.isDirect)
        #expect(problems.count == 2)
        #expect(problems.allSatisfy { !$0.contains("pw") }, "\(problems)")
        #expect(problems[0].contains("$https_proxy") && problems[1].contains("$no_proxy"))
    }

    @Test func aSessionsOwnWinsPerField() {
        let daemon = ProxyRules(all: proxyA, bypass: (try? ProxyBypass.parse("skip.test")) ?? .none, source: "configuration")
        #expect(daemon.forSession(proxy: nil, bypass: nil) == daemon)
        let own = daemon.forSession(proxy: "http://b:2", bypass: nil)
        #expect(own.proxy(for: "http://x/") == proxyB && own.proxy(for: "http://skip.test/") == nil && own.source == "session")
        #expect(daemon.forSession(proxy: "direct", bypass: nil).proxy(for: "http://x/") == nil)
        #expect(daemon.forSession(proxy: nil, bypass: "").proxy(for: "http://skip.test/") == proxyA, "'' bypasses nothing")
        #expect(daemon.forSession(proxy: nil, bypass: "*").proxy(for: "http://x/") == nil)
    }

    @Test func onlyHttpAndHttpsURLsUseAProxy() {
        let rules = ProxyRules(all: proxyA, bypass: .none, source: "configuration")
        #expect(rules.proxy(for: "ftp://x/f") == nil && rules.proxy(for: "not a url") == nil)
        #expect(rules.summary == "http://a:1 for http and https")
        #expect(ProxyRules(http: proxyA, https: nil, bypass: (try? ProxyBypass.parse("l")) ?? .none, source: "environment").summary
            == "http://a:1 for http, direct for https, bypassing l")
        #expect(ProxyRules.none.summary == "direct")
    }
}

@Suite struct ProxyFailureTests {
    let url = "https://files.example:8443/big.iso"
    let proxy = ProxyServer(kind: .http, host: "proxy", port: 3128, username: "alice", password: "s3cret")
    let socks = ProxyServer(kind: .socks5h, host: "socks", port: 1080)

    @Test func theProxysFailuresAreProxyFailures() {
        let cases: [(Error, ProxyServer, String)] = [
            (HTTPClientError.proxyAuthenticationRequired, proxy, "refused the credentials of user 'alice' (407"),
            (HTTPClientError.invalidProxyResponse, proxy, "did not open a tunnel to files.example:8443"),
            (HTTPClientError.httpProxyHandshakeTimeout, proxy, "did not complete its handshake"),
            (HTTPClientError.socksHandshakeTimeout, socks, "did not complete its handshake"),
            (HTTPClientError.connectTimeout, proxy, "Cannot connect to the proxy http://alice:***@proxy:3128: timed out"),
            (IOError(errnoCode: ECONNREFUSED, reason: "connect"), proxy, "Cannot connect to the proxy"),
            (IOError(errnoCode: EHOSTUNREACH, reason: "connect"), socks, "Cannot connect to the proxy socks5h://socks:1080"),
            (ChannelError.connectTimeout(.seconds(30)), proxy, "timed out"),
            (SOCKSError.ConnectionFailed(reply: .hostUnreachable), socks, "could not connect to files.example:8443: host unreachable"),
            (SOCKSError.ConnectionFailed(reply: .refused), socks, "connection refused"),
            (SOCKSError.InvalidProtocolVersion(actual: 4), socks, "broke the SOCKS5 handshake"),
        ]
        for (error, proxy, words) in cases {
            let (mapped, transient) = ErrorMapping.classify(error, url: url, proxy: proxy)
            #expect(mapped.code == TaskErrorCode.proxyFailure && transient, "\(error) → \(mapped)")
            #expect(mapped.message.contains(words), "\(mapped.message)")
            #expect(!mapped.message.contains("s3cret"), "\(mapped.message)")
        }
    }

    @Test func theOriginsFailuresStayTheirOwn() {
        let cases: [(Error, String)] = [
            (HTTPClientError.remoteConnectionClosed, TaskErrorCode.connectionLost),
            (IOError(errnoCode: ETIMEDOUT, reason: "read"), TaskErrorCode.timedOut),
            (IOError(errnoCode: ECONNRESET, reason: "read"), TaskErrorCode.connectionLost),
            (HTTPClientError.redirectLimitReached, TaskErrorCode.tooManyRedirects),
        ]
        for (error, code) in cases {
            #expect(ErrorMapping.classify(error, url: url, proxy: proxy).error.code == code, "\(error)")
        }
        #expect(ErrorMapping.classify(IOError(errnoCode: ECONNREFUSED, reason: "connect"), url: url).error.code
            == TaskErrorCode.connectionRefused, "without a proxy, a refusal is the origin's")
    }

    @Test func theProxysAnswerToConnectNamesTheCause() {
        let bare = ProxyServer(kind: .http, host: "proxy", port: 3128)
        let cases: [(ProxyServer, ProxyProbe.Answer, String)] = [
            (proxy, .init(status: 401, reason: "Unauthorized"), "refused the credentials of user 'alice' (401 Unauthorized)"),
            (bare, .init(status: 407, reason: "Proxy Authentication Required"), "asks for credentials (407 Proxy Authentication Required)"),
            (bare, .init(status: 403, reason: "Forbidden"), "forbids a tunnel to files.example:8443 (403 Forbidden); many proxies tunnel only to port 443"),
            (bare, .init(status: 502, reason: "Bad Gateway"), "did not open a tunnel to files.example:8443: it answered CONNECT with 502 Bad Gateway"),
        ]
        for (proxy, answer, words) in cases {
            let error = ErrorMapping.tunnelRefused(proxy: proxy, url: url, answer: answer)
            #expect(error.code == TaskErrorCode.proxyFailure && error.httpStatus == answer.status)
            #expect(error.message.contains(words), "\(error.message)")
        }
        #expect(ProxyProbe.parse("HTTP/1.0 401 Unauthorized") == .init(status: 401, reason: "Unauthorized"))
        #expect(ProxyProbe.parse("HTTP/1.1 200") == .init(status: 200, reason: ""))
        #expect(ProxyProbe.parse("SSH-2.0-OpenSSH") == nil && ProxyProbe.parse("") == nil)
    }
}
