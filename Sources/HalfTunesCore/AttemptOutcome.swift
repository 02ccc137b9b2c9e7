// What an Attempt reports: the response it started writing and its outcome.
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
    package var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
