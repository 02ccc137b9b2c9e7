// Unit tests: the head of a request forwarded to an HTTP proxy (absolute form, Host, Proxy-Authorization, framing).
import AsyncHTTPClient
import Foundation
@testable import HalfTunesCore
@testable import HalfTunesEngine
import NIOHTTP1
import Testing

@Suite struct ProxyForwarderTests {
    let proxy = ProxyForwarder(proxy: ProxyServer(kind: .http, host: "proxy.corp", port: 3128, username: "al:ice",
                                                  password: "pw"))

    @Test func theTargetIsAbsoluteWithoutUserInfoOrFragment() throws {
        let request = try HTTPClient.Request(url: "http://bob:secret@files.example:8080/a%20b/c?x=1&y=%2F#part",
                                             method: .GET)
        let head = proxy.head(for: request)
        #expect(head.uri == "http://files.example:8080/a%20b/c?x=1&y=%2F")
        #expect(head.version == .http1_1 && head.method == .GET)
        #expect(head.headers["Host"] == ["files.example:8080"])
        #expect(head.headers["Proxy-Authorization"] == ["Basic " + Data("al:ice:pw".utf8).base64EncodedString()])
        #expect(head.headers["Content-Length"].isEmpty && head.headers["Transfer-Encoding"].isEmpty)
    }

    @Test func hostsPortsAndBodies() throws {
        let bare = proxy.head(for: try HTTPClient.Request(url: "http://example.org", method: .HEAD))
        #expect(bare.uri == "http://example.org/" && bare.headers["Host"] == ["example.org"])
        let v6 = proxy.head(for: try HTTPClient.Request(url: "http://[::1]:81/x", method: .GET))
        #expect(v6.uri == "http://[::1]:81/x" && v6.headers["Host"] == ["[::1]:81"])
        let post = proxy.head(for: try HTTPClient.Request(url: "http://h/p", method: .POST))
        #expect(post.headers["Content-Length"] == ["0"])
        let sized = proxy.head(for: try HTTPClient.Request(url: "http://h/p", method: .PUT, body: .bytes(Array("abc".utf8))))
        #expect(sized.headers["Content-Length"] == ["3"])
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "given.example")
        let given = proxy.head(for: try HTTPClient.Request(url: "http://h/p", method: .GET, headers: headers))
        #expect(given.headers["Host"] == ["given.example"], "a Host the request has is kept")
        let anonymous = ProxyForwarder(proxy: ProxyServer(kind: .http, host: "p", port: 1))
        #expect(anonymous.head(for: try HTTPClient.Request(url: "http://h/", method: .GET)).headers["Proxy-Authorization"].isEmpty)
    }
}
