@testable import HalfTunesEngine
import Testing

/// The method and body of the request a redirect leads to, as AsyncHTTPClient decides (the attempt's own hops
/// follow the same rule, from the method of the request that got the redirect).
@Suite struct HopMethodTests {
    @Test func redirectsChangeMethodsAsAsyncHTTPClientDoes() {
        typealias Hop = AttemptDelegate.Hop
        #expect(Hop.afterRedirect(303, method: "PUT", sendsBody: true) == ("GET", false))
        #expect(Hop.afterRedirect(303, method: "HEAD", sendsBody: false) == ("HEAD", false))
        #expect(Hop.afterRedirect(302, method: "POST", sendsBody: true) == ("GET", false))
        #expect(Hop.afterRedirect(301, method: "POST", sendsBody: true) == ("GET", false))
        #expect(Hop.afterRedirect(302, method: "PUT", sendsBody: true) == ("PUT", true))
        #expect(Hop.afterRedirect(307, method: "POST", sendsBody: true) == ("POST", true))
        #expect(Hop.afterRedirect(308, method: "PUT", sendsBody: true) == ("PUT", true))
        #expect(Hop.afterRedirect(302, method: "GET", sendsBody: false) == ("GET", false))
    }
}
