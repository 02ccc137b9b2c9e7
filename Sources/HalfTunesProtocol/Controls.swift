#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a task transfers.
public enum TaskKind: String, Codable, Sendable, CaseIterable {
    /// A file downloaded to `destination` (resumable, journaled).
    case download
    /// A local file sent with PUT or POST; the response status and a bounded body end the task.
    case upload
    /// An in-memory request whose (capped) response body is returned in `didComplete`.
    case data
}

/// Queue order: every queued `high` task starts before any `normal` one, and so on; FIFO within one.
public enum TaskPriority: String, Codable, Sendable, CaseIterable, Comparable {
    case high, normal, low

    public var rank: Int {
        switch self {
        case .high: return 0
        case .normal: return 1
        case .low: return 2
        }
    }

    public static func < (a: TaskPriority, b: TaskPriority) -> Bool { a.rank < b.rank }
}

/// Why a `queued` task is not running yet (`TaskInfo.hold`).
public struct TaskHold: Codable, Sendable, Equatable {
    /// Stable code: `queue` (tasks ahead of it), `maxConcurrent` (daemon-wide limit),
    /// `sessionMaxConcurrent`, `hostMaxConnections`, `uidMaxProxies` (its owner's transfers use 16 proxies and it
    /// needs another), `uidDataMemory` (a data task; its owner's running ones may keep 64 MiB of responses in
    /// memory), `previousTransferStopping`, `shuttingDown`,
    /// `earliestBeginDate` (not before the task's date).
    public var reason: String
    /// A sentence a person can act on, e.g. "3 tasks ahead; 6 of 6 daemon-wide transfer slots in use".
    public var message: String

    public init(reason: String, message: String) {
        self.reason = reason
        self.message = message
    }
}

/// The end of an upload or data task's HTTP exchange, carried by its `didComplete` event.
public struct TaskResponse: Codable, Sendable, Equatable {
    public var status: Int
    /// Response header fields in order (names as received).
    public var headers: [[String]]?
    /// The response body, base64; at most `maxResponseBytes` (data tasks) or 64 KiB (uploads) of it.
    public var body: String?
    /// The body's full length as received (may exceed what `body` holds when `truncated`).
    public var bodyBytes: Int64
    /// True when the body was longer than the cap and `body` holds only its beginning.
    public var truncated: Bool

    public init(status: Int, headers: [[String]]? = nil, body: String?, bodyBytes: Int64, truncated: Bool) {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyBytes = bodyBytes
        self.truncated = truncated
    }
}

/// How a session retries transient failures (`SessionConfiguration.retry`). Every field is optional;
/// the daemon fills in the defaults.
public struct RetryPolicy: Codable, Sendable, Equatable {
    /// Delay before the first retry, seconds (default 1).
    public var initialDelay: Double?
    /// Longest computed delay, seconds (default 300).
    public var maxDelay: Double?
    /// Each delay is multiplied by a random factor in [1 - jitter, 1 + jitter] (default 0.2, 0 ... 1).
    public var jitter: Double?
    /// Longest `Retry-After` honoured, seconds (default 3600).
    public var maxRetryAfter: Double?
    /// Transient failures in a row (without progress) after which the task fails (default: none,
    /// only the resource timeout ends retrying).
    public var maxAttempts: Int?

    public static let defaultInitialDelay = 1.0
    public static let defaultMaxDelay = 300.0
    public static let defaultJitter = 0.2
    public static let defaultMaxRetryAfter = 3600.0

    public init(initialDelay: Double? = nil, maxDelay: Double? = nil, jitter: Double? = nil,
                maxRetryAfter: Double? = nil, maxAttempts: Int? = nil) {
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.jitter = jitter
        self.maxRetryAfter = maxRetryAfter
        self.maxAttempts = maxAttempts
    }
}

/// `task.update`: change a task's priority or bandwidth limit at any time (running transfers go on).
public struct TaskUpdateParams: Codable, Sendable {
    public var id: Int64
    public var priority: TaskPriority?
    /// Bytes per second for this task; 0 removes the task's limit.
    public var bandwidthLimit: Int64?

    public init(id: Int64, priority: TaskPriority? = nil, bandwidthLimit: Int64? = nil) {
        self.id = id
        self.priority = priority
        self.bandwidthLimit = bandwidthLimit
    }
}

/// `task.move`: place a queued (or suspended, waiting) task at the front or back of its priority class.
public struct TaskMoveParams: Codable, Sendable {
    public enum Position: String, Codable, Sendable { case front, back }
    public var id: Int64
    public var to: Position

    public init(id: Int64, to: Position) {
        self.id = id
        self.to = to
    }
}

/// Daemon-wide limits, as reported by `daemon.status`/`daemon.setLimits`.
public struct DaemonLimits: Codable, Sendable, Equatable {
    /// Transfers running at once, daemon-wide.
    public var maxConcurrent: Int
    /// Transfers running at once to one host (scheme, host and port).
    public var maxConnectionsPerHost: Int
    /// Bytes per second across all transfers; 0 = unlimited.
    public var bandwidthLimit: Int64

    public init(maxConcurrent: Int, maxConnectionsPerHost: Int, bandwidthLimit: Int64) {
        self.maxConcurrent = maxConcurrent
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.bandwidthLimit = bandwidthLimit
    }
}

/// `daemon.setLimits`: every field is optional; the ones given replace the current values at once,
/// without restarting running transfers, and are kept in the journal across restarts (they win over
/// the configuration file until set again).
public struct DaemonSetLimitsParams: Codable, Sendable, Equatable {
    public var maxConcurrent: Int?
    public var maxConnectionsPerHost: Int?
    public var bandwidthLimit: Int64?

    public init(maxConcurrent: Int? = nil, maxConnectionsPerHost: Int? = nil, bandwidthLimit: Int64? = nil) {
        self.maxConcurrent = maxConcurrent
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.bandwidthLimit = bandwidthLimit
    }
}
