// The value types a Transfer takes and reports: request, validators, response start, outcome, observer.
import HalfTunesProtocol

/// Validators of one version of a resource, as sent by the server (`ETag`, `Last-Modified`).
public struct Validators: Codable, Sendable, Equatable {
    public var etag: String?
    public var lastModified: String?

    public init(etag: String?, lastModified: String?) {
        self.etag = etag
        self.lastModified = lastModified
    }

    /// The value for If-Range: a strong ETag if present, else Last-Modified, else nil
    /// (weak ETags "W/..." are not usable in If-Range).
    public var ifRangeValue: String? {
        if let etag = etag?.trimmingSpaces, !etag.isEmpty, !etag.hasPrefix("W/"), !etag.hasPrefix("w/") {
            return etag
        }
        if let lastModified = lastModified?.trimmingSpaces, !lastModified.isEmpty {
            return lastModified
        }
        return nil
    }

    /// True when neither validator is present.
    public var isEmpty: Bool { etag == nil && lastModified == nil }
}

public struct TransferRequest: Sendable {
    public var taskID: Int64
    public var url: String
    /// Session and task headers, already merged. `Range`, `If-Range` and `Accept-Encoding` are replaced by the
    /// engine; a `User-Agent` given here replaces the default `halftunesd/<version>`.
    public var headers: [(name: String, value: String)]
    /// The partial file (may not exist yet).
    public var partialPath: String
    /// Bytes at the start of the partial that are durable and valid.
    public var durableOffset: Int64
    /// From an earlier response; nil means the transfer cannot resume and starts at 0.
    public var validators: Validators?
    /// Total length known from an earlier response.
    public var expectedLength: Int64?
    /// Idle timeout in seconds, reset by every received byte.
    public var requestTimeout: Double
    public var checkpointInterval: Double
    public var progressInterval: Double
    /// Bandwidth limits the body is metered against (received bytes are held back to the rate); nil: none.
    public var rateLimiter: RateLimiter? = nil
    /// Follow a redirect from https to http (the session's `allowInsecureRedirects`); refused by default.
    public var allowInsecureRedirects = false

    public init(taskID: Int64, url: String, headers: [(name: String, value: String)] = [], partialPath: String,
                durableOffset: Int64 = 0, validators: Validators? = nil, expectedLength: Int64? = nil,
                requestTimeout: Double = 60, checkpointInterval: Double = 1.0, progressInterval: Double = 0.25) {
        self.taskID = taskID
        self.url = url
        self.headers = headers
        self.partialPath = partialPath
        self.durableOffset = durableOffset
        self.validators = validators
        self.expectedLength = expectedLength
        self.requestTimeout = requestTimeout
        self.checkpointInterval = checkpointInterval
        self.progressInterval = progressInterval
    }
}

public struct ResponseStart: Sendable, Equatable {
    public var status: Int
    /// Where writing starts: durableOffset for an appended 206, 0 otherwise (the total for an already complete 416).
    public var offset: Int64
    /// > 0 when partial data was thrown away because the server sent the whole resource.
    public var discardedBytes: Int64
    /// When restarting from 0 although data was kept: "resourceChanged", "rangeNotHonored" or "noValidator".
    public var reason: String?
    /// Total resource length if known.
    public var expectedTotal: Int64?
    /// From this response (for an appended 206 without validators: the ones that matched If-Range).
    public var validators: Validators
    /// After redirects.
    public var finalURL: String

    public init(status: Int, offset: Int64, discardedBytes: Int64, reason: String?, expectedTotal: Int64?,
                validators: Validators, finalURL: String) {
        self.status = status
        self.offset = offset
        self.discardedBytes = discardedBytes
        self.reason = reason
        self.expectedTotal = expectedTotal
        self.validators = validators
        self.finalURL = finalURL
    }
}

/// Receives a transfer's events. Calls are serial (never concurrent) and come from the transfer's own queue.
public protocol TransferObserver: AnyObject, Sendable {
    /// Once a response was accepted, after any truncation of the partial is durable, before any other call.
    func transferDidStart(_ transfer: Transfer, _ start: ResponseStart)
    /// At most every progressInterval, plus one final call when the body ends. bytesWritten = delta since the previous call;
    /// totals are absolute positions in the file (they include the resumed offset).
    func transferDidWrite(_ transfer: Transfer, bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64?)
    /// Called AFTER the first `durableBytes` of the partial file are written and fsynced; serially, never concurrently,
    /// in non-decreasing order (may go to a smaller value only after a restart-from-zero). The daemon journals synchronously inside.
    func transferDidCheckpoint(_ transfer: Transfer, durableBytes: Int64)
}

public struct TransferFailure: Error, Sendable, Equatable {
    /// Code from TaskErrorCode, human message, httpStatus when an HTTP status.
    public var error: TaskError
    /// Retry later (waiting) vs fail permanently.
    public var isTransient: Bool
    /// Seconds, from Retry-After (delta-seconds or HTTP-date), if the server sent one.
    public var retryAfter: Double?
    /// What is durable in the partial now (0 if it was discarded).
    public var durableBytes: Int64

    public init(error: TaskError, isTransient: Bool, retryAfter: Double? = nil, durableBytes: Int64) {
        self.error = error
        self.isTransient = isTransient
        self.retryAfter = retryAfter
        self.durableBytes = durableBytes
    }
}

public enum TransferOutcome: Sendable, Equatable {
    /// Every byte written + fsynced, fd closed, length verified against the expected total when known.
    case completed(totalBytes: Int64, validators: Validators)
    /// stop() was called: pending data flushed, fsynced and checkpointed.
    case stopped(durableBytes: Int64)
    case failed(TransferFailure)
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
