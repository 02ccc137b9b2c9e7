// Public value types of TestOrigin: per-path misbehaviour, recorded requests, wait errors.

extension TestOrigin {
    /// How the origin (mis)behaves for one path. Faults with a `...Times` counter are used up per request.
    public struct Behavior: Sendable {
        public init() {}

        /// Throttle the body of each response to this rate (slices every ~15 ms).
        public var bytesPerSecond: Int? = nil
        /// Close the connection abruptly (FIN, no end of body) after writing N body bytes of a response (with
        /// `omitContentLength`, N may be the whole length: every byte is sent, the closing chunk is not)...
        public var dropAfterBytes: Int64? = nil
        /// ...for this many responses (then behave normally).
        public var dropTimes: Int = 1
        /// Reset the connection (TCP RST: SO_LINGER {1, 0}, then close) after writing N body bytes of a response;
        /// bytes still unsent in the origin's socket buffer are discarded by the reset...
        public var resetAfterBytes: Int64? = nil
        /// ...for this many responses (then behave normally).
        public var resetTimes: Int = 1
        /// Write N body bytes of a response, then stop writing (connection stays open) until `releaseStall`.
        public var stallAfterBytes: Int64? = nil
        /// How many responses stall (each needs its own `releaseStall`); default: every response.
        public var stallTimes: Int = .max
        /// Answer with this status and a short text/html body...
        public var failStatus: Int? = nil
        /// ...for this many requests.
        public var failTimes: Int = 1
        /// Retry-After header value on `failStatus` responses.
        public var retryAfter: String? = nil
        /// Always answer 200 with the full body (and no Accept-Ranges), whatever Range/If-Range say.
        public var ignoreRange: Bool = false
        /// Answer a Range with a 206 whose Content-Range and body start 1024 bytes before the asked start (or at 0).
        public var wrongContentRange: Bool = false
        /// Declare the full Content-Length, send half of the body, then close...
        public var shortBody: Bool = false
        /// ...for this many responses (then behave normally).
        public var shortBodyTimes: Int = .max
        /// Answer this many satisfiable Range requests with `416` and `Content-Range: bytes */<size>` (a server
        /// that wrongly refuses a range it has).
        public var refuseRangeTimes: Int = 0
        /// Send no ETag / Last-Modified (If-Range then never matches).
        public var omitValidators: Bool = false
        /// Honour Range whatever If-Range says (BusyBox httpd): a changed file is answered 206 with its new
        /// validators, the splice case.
        public var ignoreIfRange: Bool = false
        /// Send the ETag as weak (`W/"…"`); If-Range with it never matches (RFC 9110: weak never matches).
        public var weakETag: Bool = false
        /// Send no ETag (Last-Modified still).
        public var omitETag: Bool = false
        /// Send no Last-Modified (the ETag still).
        public var omitLastModified: Bool = false
        /// Claim this complete length in the `Content-Range` of a 206 (a server lying about the resource).
        public var contentRangeTotal: Int64? = nil
        /// Declare this `Content-Length` (e.g. 20 GiB), send the body the resource has, then stall until
        /// `releaseStall` (a server claiming a length it never sends).
        public var claimedLength: Int64? = nil
        /// Use chunked transfer encoding instead of Content-Length.
        public var omitContentLength: Bool = false
        /// Answer `redirectStatus` with this Location (absolute URL or path).
        public var redirectTo: String? = nil
        /// The status of `redirectTo` answers (301, 302, 303, 307, 308).
        public var redirectStatus: Int = 302
        /// More header fields on every resource answer (200, 206), e.g. `Content-Disposition`.
        public var extraHeaders: [(String, String)] = []
        /// Write the whole head in ISO-8859-1 (one byte per character up to U+00FF) instead of UTF-8, as servers
        /// of old do: `filename="foo-\u{E4}.html"` goes out as the byte 0xE4.
        public var headInLatin1: Bool = false
        /// The faults above (`failStatus`, `ignoreRange`, `wrongContentRange`, `refuseRangeTimes`, drop, reset,
        /// short body, stall, and the validator lies `ignoreIfRange`, `weakETag`, `omitETag`, `omitLastModified`,
        /// `contentRangeTotal`) apply only from this request to the path on, counting from 0: 1 spares the first
        /// request (a download's first connection) and hits the further ones (its segments).
        public var faultsFromRequest: Int = 0
    }

    /// One request as the origin saw it, and what it answered.
    public struct RecordedRequest: Sendable {
        public var method: String
        /// The request target's path, without the query string.
        public var path: String
        /// The full request target as sent (path and query).
        public var uri: String
        /// Header fields as received, in order, with their original spelling.
        public var headers: [(name: String, value: String)]
        public var range: String?
        public var ifRange: String?
        /// When the request head arrived: seconds since 1970 (CLOCK_REALTIME, sub-second).
        public var arrivedAt: Double
        /// The status answered; 0 while the request is queued behind another on the same connection.
        public var status: Int
        /// Start of the body sent within the resource (0 for 200); nil when no resource body was answered.
        public var rangeStart: Int64?
        /// Body bytes whose write completed (updated live).
        public var bodyBytesSent: Int64
        /// The ETag of the resource version served (recorded even when `omitValidators` hides it); nil if none.
        public var etag: String?
        /// Body length the response declared (Content-Length, or the length it would have had when chunked).
        public var declaredLength: Int64?
        /// The origin closed the connection before the body was complete (drop, shortBody) or the client left.
        public var truncated: Bool
        /// The number of the connection it came on (1 for the origin's first).
        public var connection: Int

        /// The value of the first header field named `name` (case-insensitive).
        public func header(_ name: String) -> String? {
            let lower = name.lowercased()
            return headers.first { $0.name.lowercased() == lower }?.value
        }
    }

    /// Thrown by the `waitFor...` functions.
    public struct WaitError: Error, CustomStringConvertible {
        public var description: String
    }
}
