// What one Attempt is asked to do: the request, its optional body (an upload's file), where the response goes.
import HalfTunesCore
import HalfTunesProtocol

/// One HTTP attempt of any task kind. Downloads, uploads and data tasks differ only in `body` (an upload's
/// file, sent from byte 0 every attempt) and `sink` (the partial file, resumed from its durable end, or the
/// response kept in memory); the attempt itself (redirects, idle timeout, progress pacing, bandwidth limits,
/// stop) is the same for all of them.
public struct AttemptRequest: Sendable {
    public var taskID: Int64
    public var url: String
    /// GET for downloads; PUT or POST (uploads); GET or HEAD (data tasks).
    public var method: String
    /// Session and task headers, merged. `Range`, `If-Range`, `Accept-Encoding`, `Content-Length` and
    /// `Transfer-Encoding` are set by the engine; a `User-Agent` given here replaces `halftunesd/<version>`.
    public var headers: [(name: String, value: String)]
    /// The request body (uploads); nil: none.
    public var body: UploadBody?
    /// Where the response body goes.
    public var sink: Sink
    /// Idle timeout in seconds, reset by every byte sent or received.
    public var requestTimeout: Double
    /// Progress is reported at most this often (seconds), plus once at the end.
    public var progressInterval: Double
    /// Bandwidth limits the request and response bodies are metered against (nil: none).
    public var rateLimiter: RateLimiter? = nil
    /// Follow a redirect from https to http (the session's `allowInsecureRedirects`); refused by default.
    public var allowInsecureRedirects = false
    /// Which proxy each request goes through (`ProxyRules.proxy(for:)`), chosen again for every hop of a redirect:
    /// a redirect to a bypassed host goes direct, one from http to https takes the https proxy (as curl does).
    /// Failures of a proxy become `proxyFailure`.
    public var proxyRules: ProxyRules = .none

    /// The proxy of the first request (nil: direct).
    public var proxy: ProxyServer? { proxyRules.proxy(for: url) }

    /// Answer a server's `401` (Basic, Digest) with these, each only at its own origin (and realm); a server no
    /// entry is for fails the task with `authenticationRequired`.
    public var credentials: [OriginCredentials] = []

    /// Where the task's own headers that carry credentials (`Authorization`, `Cookie`) may be sent: the scheme,
    /// host and port of the task's URL.
    public var credentialsOrigin: String? { HTTPAuthentication.origin(url) }

    public enum Sink: Sendable {
        /// A download's partial file.
        case partialFile(PartialFileTarget)
        /// An upload's or data task's response, kept in memory up to its limit.
        case memory(ResponseLimit)
    }

    public init(taskID: Int64, url: String, method: String, headers: [(name: String, value: String)] = [],
                body: UploadBody? = nil, sink: Sink, requestTimeout: Double = 60, progressInterval: Double = 0.25) {
        self.taskID = taskID
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
        self.sink = sink
        self.requestTimeout = requestTimeout
        self.progressInterval = progressInterval
    }

    /// A download attempt into `partialPath`, resumed from `durableOffset` when `validators` allow it.
    public static func download(taskID: Int64, url: String, headers: [(name: String, value: String)] = [],
                                partialPath: String, durableOffset: Int64 = 0, validators: Validators? = nil,
                                expectedLength: Int64? = nil, requestTimeout: Double = 60,
                                checkpointInterval: Double = 1.0, progressInterval: Double = 0.25) -> AttemptRequest {
        download(taskID: taskID, url: url, headers: headers, partialPath: partialPath,
                 durable: ByteRanges(prefix: durableOffset), validators: validators, expectedLength: expectedLength,
                 requestTimeout: requestTimeout, checkpointInterval: checkpointInterval,
                 progressInterval: progressInterval)
    }

    /// A download attempt into `partialPath`, keeping its `durable` ranges when `validators` allow it, with up
    /// to `maxConnections` requests at once.
    public static func download(taskID: Int64, url: String, headers: [(name: String, value: String)] = [],
                                partialPath: String, durable: ByteRanges, validators: Validators? = nil,
                                expectedLength: Int64? = nil, requestTimeout: Double = 60,
                                checkpointInterval: Double = 1.0, progressInterval: Double = 0.25,
                                maxConnections: Int = 1, freeSpaceFloor: FreeSpaceFloor = .automatic,
                                diskAccount: DiskAccount? = nil) -> AttemptRequest {
        var target = PartialFileTarget(path: partialPath, durable: durable, validators: validators,
                                       expectedLength: expectedLength, checkpointInterval: checkpointInterval)
        target.maxConnections = maxConnections
        target.freeSpaceFloor = freeSpaceFloor
        target.diskAccount = diskAccount
        return AttemptRequest(taskID: taskID, url: url, method: "GET", headers: headers, sink: .partialFile(target),
                              requestTimeout: requestTimeout, progressInterval: progressInterval)
    }
}

/// A download's side of an attempt: the partial file and what is known about the resource.
public struct PartialFileTarget: Sendable, Equatable {
    /// The partial file (may not exist yet).
    public var path: String
    /// The ranges of the partial that are durable and valid (journaled).
    public var durable: ByteRanges
    /// From an earlier response; nil means the attempt cannot resume and starts at 0.
    public var validators: Validators?
    /// Total length known from an earlier response.
    public var expectedLength: Int64?
    /// Seconds between checkpoints (fsync, then the journal records the durable length).
    public var checkpointInterval: Double
    /// The most requests at once for this file (segments, `SegmentPlanner`); 1: one request at a time.
    public var maxConnections = 1
    /// The free space no write or reservation of this download may take (`min-free-space`).
    public var freeSpaceFloor = FreeSpaceFloor.automatic
    /// The partial's place in its uid's `max-disk-per-uid` (nil: not limited).
    public var diskAccount: DiskAccount?

    public init(path: String, durable: ByteRanges, validators: Validators? = nil, expectedLength: Int64? = nil,
                checkpointInterval: Double = 1.0) {
        self.path = path
        self.durable = durable
        self.validators = validators
        self.expectedLength = expectedLength
        self.checkpointInterval = checkpointInterval
    }

    /// A target whose first `durableOffset` bytes are durable.
    public init(path: String, durableOffset: Int64 = 0, validators: Validators? = nil, expectedLength: Int64? = nil,
                checkpointInterval: Double = 1.0) {
        self.init(path: path, durable: ByteRanges(prefix: durableOffset), validators: validators,
                  expectedLength: expectedLength, checkpointInterval: checkpointInterval)
    }
}
