// What an Attempt reports: the response it started writing, its outcome, and the observer of its progress.
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
    /// (weak ETags "W/..." are not usable in If-Range, nor one with bytes replaced: `ResourceVersion.strongETag`).
    public var ifRangeValue: String? {
        if let etag = ResourceVersion.strongETag(etag) { return etag }
        if let lastModified = lastModified?.trimmingSpaces, !lastModified.isEmpty {
            return lastModified
        }
        return nil
    }

    /// True when neither validator is present.
    public var isEmpty: Bool { etag == nil && lastModified == nil }
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
    /// Bytes the file already has when writing starts: `offset` when they are one range from byte 0, their sum
    /// when an earlier split attempt left gaps (the progress totals count from here).
    public var keptBytes: Int64
    /// The response's `Content-Disposition` (the file name it may suggest).
    public var contentDisposition: String?

    public init(status: Int, offset: Int64, discardedBytes: Int64, reason: String?, expectedTotal: Int64?,
                validators: Validators, finalURL: String, keptBytes: Int64? = nil, contentDisposition: String? = nil) {
        self.keptBytes = keptBytes ?? offset
        self.contentDisposition = contentDisposition
        self.status = status
        self.offset = offset
        self.discardedBytes = discardedBytes
        self.reason = reason
        self.expectedTotal = expectedTotal
        self.validators = validators
        self.finalURL = finalURL
    }
}

/// Receives an attempt's events. Calls are serial (never concurrent). A download's come from its partial
/// file's callback queue, so progress and checkpoints arrive in the order the data was written; an upload's
/// and a data task's come from the attempt's event loop.
public protocol AttemptObserver: AnyObject, Sendable {
    /// Downloads: once a response was accepted, after any truncation of the partial is durable, before any
    /// other call about the response.
    func attemptDidStart(_ attempt: Attempt, _ start: ResponseStart)
    /// Response body bytes received: at most every progressInterval, plus once when the body ends.
    /// `bytes` is the delta since the previous call; a download's totals are positions in the file (they
    /// include the resumed offset), others count from 0 in every attempt.
    func attemptDidReceive(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?)
    /// Downloads: called AFTER the `durable` ranges of the partial file are written and fsynced; each call's
    /// ranges hold the previous call's (fewer only after a restart from zero). The daemon journals inside.
    func attemptDidCheckpoint(_ attempt: Attempt, durable: ByteRanges)
    /// Uploads: the file was opened; this attempt sends `bytesExpectedToSend` bytes.
    func attemptDidOpenBody(_ attempt: Attempt, bytesExpectedToSend: Int64)
    /// Uploads: at most every progressInterval, plus once when the body is sent. Totals count from 0 in
    /// every attempt (and again after a redirect that sends the body anew).
    func attemptDidSend(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?)
    /// Downloads: the attempt wants one more connection besides those it has (to split the download); false
    /// and it opens none now (it asks again later). Each true is given back by `attemptReleasedConnection`
    /// once that request ended. Called on the attempt's event loop: answer at once, never block.
    func attemptWantsConnection(_ attempt: Attempt) -> Bool
    /// Downloads: a connection granted by `attemptWantsConnection` is no longer used.
    func attemptReleasedConnection(_ attempt: Attempt)
    /// Downloads: the server refused a further connection (429, 503), asking to wait `retryAfter` seconds if it
    /// said so. The attempt already uses fewer connections; the observer may give the host fewer as well.
    func attemptConnectionRefused(_ attempt: Attempt, retryAfter: Double?)
}

extension AttemptObserver {
    public func attemptDidStart(_ attempt: Attempt, _ start: ResponseStart) {}
    public func attemptDidOpenBody(_ attempt: Attempt, bytesExpectedToSend: Int64) {}
    public func attemptDidSend(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?) {}
    public func attemptWantsConnection(_ attempt: Attempt) -> Bool { true }
    public func attemptReleasedConnection(_ attempt: Attempt) {}
    public func attemptConnectionRefused(_ attempt: Attempt, retryAfter: Double?) {}
}

public struct TransferFailure: Error, Sendable, Equatable {
    /// Code from TaskErrorCode, human message, httpStatus when an HTTP status.
    public var error: TaskError
    /// Retry later (waiting) vs fail permanently.
    public var isTransient: Bool
    /// Seconds, from Retry-After (delta-seconds or HTTP-date), if the server sent one.
    public var retryAfter: Double?
    /// What is durable in the partial now (nothing if it was discarded).
    public var durable: ByteRanges
    /// How many bytes are durable.
    public var durableBytes: Int64 { durable.count }

    public init(error: TaskError, isTransient: Bool, retryAfter: Double? = nil, durable: ByteRanges) {
        self.error = error
        self.isTransient = isTransient
        self.retryAfter = retryAfter
        self.durable = durable
    }

    /// A failure that keeps the first `durableBytes` of the file.
    public init(error: TaskError, isTransient: Bool, retryAfter: Double? = nil, durableBytes: Int64) {
        self.init(error: error, isTransient: isTransient, retryAfter: retryAfter, durable: ByteRanges(prefix: durableBytes))
    }
}

public enum AttemptOutcome: Sendable, Equatable {
    /// A download: every byte written + fsynced, fd closed, length verified against the expected total.
    case completed(totalBytes: Int64, validators: Validators)
    /// An upload or data task: a whole 2xx response arrived.
    case responded(TaskResponse)
    /// stop() was called: a download's pending data was flushed, fsynced and checkpointed.
    case stopped(durable: ByteRanges)
    /// `response` is set when a whole (non-2xx) response of an upload or data task arrived.
    case failed(TransferFailure, response: TaskResponse? = nil)

    /// Stopped, keeping the first `durableBytes` of the file.
    public static func stopped(durableBytes: Int64) -> AttemptOutcome { .stopped(durable: ByteRanges(prefix: durableBytes)) }

    /// A download's durable ranges once the attempt ended (nil: a whole response of an upload or data task).
    public var durable: ByteRanges? {
        switch self {
        case .stopped(let ranges): ranges
        case .failed(let failure, _): failure.durable
        case .completed(let total, _): ByteRanges(prefix: total)
        case .responded: nil
        }
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
