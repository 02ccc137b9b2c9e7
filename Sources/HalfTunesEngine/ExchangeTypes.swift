// The value types an Exchange (one attempt of an upload or data task) takes and reports.
import HalfTunesProtocol

/// One attempt of an upload (a file sent as the request body) or a data task (an in-memory request).
/// Unlike a download nothing is kept between attempts: every attempt starts from byte 0.
public struct ExchangeRequest: Sendable {
    public var taskID: Int64
    public var url: String
    /// PUT or POST (uploads), GET or HEAD (data tasks).
    public var method: String
    /// Session and task headers, merged. `Content-Length`, `Transfer-Encoding` and `Accept-Encoding` are set
    /// by the engine; a `User-Agent` given here replaces the default `halftunesd/<version>`.
    public var headers: [(name: String, value: String)]
    /// Uploads: the file sent as the body (opened by `UploadSource.open` when the attempt starts).
    public var uploadFile: String?
    /// Uploads: the file every attempt must open (pinned when the task was created; nil: not pinned).
    public var uploadFileID: FileID? = nil
    /// How much of the response body is kept, and what a longer one means.
    public var responseLimit: ResponseLimit
    /// Idle timeout in seconds, reset by every byte sent or received.
    public var requestTimeout: Double
    public var progressInterval: Double
    /// Bandwidth limits the request body (uploads) and the response body are metered against (nil: none).
    public var rateLimiter: RateLimiter? = nil
    /// Follow a redirect from https to http (the session's `allowInsecureRedirects`); refused by default.
    public var allowInsecureRedirects = false

    public init(taskID: Int64, url: String, method: String, headers: [(name: String, value: String)] = [],
                uploadFile: String? = nil, responseLimit: ResponseLimit, requestTimeout: Double = 60,
                progressInterval: Double = 0.25) {
        self.taskID = taskID
        self.url = url
        self.method = method
        self.headers = headers
        self.uploadFile = uploadFile
        self.responseLimit = responseLimit
        self.requestTimeout = requestTimeout
        self.progressInterval = progressInterval
    }
}

/// The most response body bytes kept, and what happens to a longer body.
public struct ResponseLimit: Sendable, Equatable {
    public enum Overflow: Sendable, Equatable {
        /// Keep the beginning, mark the response `truncated`, read and discard the rest (uploads).
        case truncate
        /// Fail the attempt with `responseTooLarge` (data tasks: the body is the result).
        case fail
    }

    public var maxBytes: Int
    public var overflow: Overflow

    public init(maxBytes: Int, overflow: Overflow) {
        self.maxBytes = maxBytes
        self.overflow = overflow
    }

    /// Uploads keep the first 64 KiB of the response body.
    public static let upload = ResponseLimit(maxBytes: 64 << 10, overflow: .truncate)
    /// Data tasks' default (and largest) body cap: 16 MiB.
    public static let dataDefaultBytes: Int64 = 16 << 20

    public static func data(maxBytes: Int64?) -> ResponseLimit {
        ResponseLimit(maxBytes: Int(min(max(maxBytes ?? dataDefaultBytes, 0), dataDefaultBytes)), overflow: .fail)
    }
}

public enum ExchangeOutcome: Sendable, Equatable {
    /// A 2xx response arrived whole.
    case completed(TaskResponse)
    /// `stop()` was called.
    case stopped
    /// The attempt failed; `response` is set when a whole response arrived (a non-2xx status).
    case failed(TransferFailure, response: TaskResponse?)
}

/// Receives an exchange's progress. Calls come from the exchange's event loop, serially.
public protocol ExchangeObserver: AnyObject, Sendable {
    /// The upload's source was opened: the body has `bytesExpectedToSend` bytes in this attempt.
    func exchangeDidOpenSource(_ exchange: Exchange, bytesExpectedToSend: Int64)
    /// At most every progressInterval, plus once when the body is sent. Totals count from 0 in every attempt.
    func exchangeDidSend(_ exchange: Exchange, bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64?)
    /// Response body bytes received (at most every progressInterval, plus once at the end).
    func exchangeDidReceive(_ exchange: Exchange, bytesReceived: Int64, totalBytesReceived: Int64, totalBytesExpected: Int64?)
}
