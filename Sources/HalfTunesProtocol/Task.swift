#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

public enum TaskState: String, Codable, Sendable, CaseIterable {
    case suspended, queued, running, waiting, completed, failed, canceled

    public var isTerminal: Bool { self == .completed || self == .failed || self == .canceled }
    /// States in which the task holds (or waits for) a transfer slot.
    public var isPending: Bool { self == .queued || self == .running || self == .waiting }
}

/// Why a task failed, or why it is waiting. `code` is stable and machine-readable.
public struct TaskError: Codable, Sendable, Equatable, Error, CustomStringConvertible {
    public var code: String
    public var message: String
    /// The HTTP status, when the error is an HTTP status.
    public var httpStatus: Int?

    public init(code: String, message: String, httpStatus: Int? = nil) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
    }

    public var description: String { message }
}

/// Stable `TaskError.code` values.
public enum TaskErrorCode {
    public static let canceled = "canceled"
    public static let httpStatus = "httpStatus"
    public static let connectionRefused = "connectionRefused"
    public static let connectionLost = "connectionLost"
    public static let timedOut = "timedOut"
    public static let dnsFailure = "dnsFailure"
    public static let serverBusy = "serverBusy"
    public static let invalidResponse = "invalidResponse"
    public static let tooManyRedirects = "tooManyRedirects"
    public static let resourceTimeout = "resourceTimeout"
    public static let diskFull = "diskFull"
    /// The task's user holds as much in partial files (unfinished downloads and kept resume data) as
    /// `max-disk-per-uid` allows: the download waits, and goes on once some of them finish or are canceled.
    public static let limitExceeded = "limitExceeded"
    public static let fileTooLarge = "fileTooLarge"
    public static let ioError = "ioError"
    public static let destinationConflict = "destinationConflict"
    public static let sessionInvalidated = "sessionInvalidated"
    public static let internalError = "internalError"
    /// The daemon crashed (a fatal signal of its own: a trap, a fault) in each of its last 3 crashes while this task
    /// ran: the restart did not start it again but failed it, so one task cannot keep the daemon down for everyone.
    public static let quarantined = "quarantined"
    /// The downloaded file's digest differs from the expected `checksum` (the file is not published).
    public static let checksumMismatch = "checksumMismatch"
    /// A redirect was refused (https → http downgrade, or a scheme other than http/https).
    public static let redirectRefused = "redirectRefused"
    /// An upload's source file cannot be read (missing, unreadable, changed size while sending).
    public static let sourceUnreadable = "sourceUnreadable"
    /// A data task's response body is longer than its `maxResponseBytes` (permanent; the body is not kept).
    public static let responseTooLarge = "responseTooLarge"
    /// The server's TLS certificate could not be verified (untrusted issuer, expired, or for another host).
    public static let tlsFailure = "tlsFailure"
    /// The network is offline (NetworkManager): the task waits for it (`waitsForConnectivity`, the default), or
    /// fails at once when its session has `waitsForConnectivity: false`.
    public static let offline = "offline"
    /// The network is metered and the session has `allowsExpensiveNetworkAccess: false`: the task waits.
    public static let networkExpensive = "networkExpensive"
    /// The session is `isDiscretionary` and the network is metered or the machine on battery: the task waits.
    public static let discretionary = "discretionary"
    /// The task's proxy failed: it refused the credentials (407), could not be reached, or would not open a
    /// tunnel (a CONNECT answer other than 2xx, a SOCKS5 failure reply). Transient: the task waits and retries.
    public static let proxyFailure = "proxyFailure"
    /// The server asks for credentials (`401`) the task does not have, or refused those it sent; the message
    /// names the scheme and realm.
    public static let authenticationRequired = "authenticationRequired"
    /// The codes of a task waiting for the network or power conditions (not for a retry time).
    public static let conditions: Set<String> = [offline, networkExpensive, discretionary]
}

/// What a `running` download does once every byte is durable: it no longer holds a transfer slot.
public enum TaskCompletionPhase: String, Codable, Sendable, Equatable {
    /// Its SHA-256 is being checked against the task's `checksum`.
    case verifying
    /// A name is being chosen and the file moved into place.
    case publishing
}

public struct TaskInfo: Codable, Sendable, Equatable {
    /// Unique in the daemon, stable across restarts, never reused.
    public var id: Int64
    public var session: String
    public var kind: String
    public var url: String
    /// The URL after redirects, when it differs from `url`.
    public var currentURL: String?
    public var state: TaskState
    /// While `waiting`: why, and when the next attempt starts.
    public var waitingReason: TaskError?
    public var nextAttemptAt: String?
    /// Position in the queue (1 = next) while `queued`.
    public var queuePosition: Int?
    public var bytesReceived: Int64
    /// Bytes fsynced and journaled: after a crash the transfer resumes from here.
    public var bytesDurable: Int64
    /// null when the length is not known yet (or the server does not say).
    public var bytesExpected: Int64?
    /// Where the file will appear when complete.
    public var destination: String
    /// Where the file is, once completed (may differ from `destination` if that name was taken meanwhile).
    public var location: String?
    public var error: TaskError?
    public var createdAt: String
    public var updatedAt: String
    public var description: String?
    public var etag: String?
    public var lastModified: String?
    /// Number of HTTP attempts started so far.
    public var attempts: Int
    public var priority: TaskPriority
    /// While `queued`: what holds it back (queue, a limit).
    public var hold: TaskHold?
    /// Expected digest, "sha256:<64 hex digits>", checked before the file is published.
    public var checksum: String?
    /// This task's own bandwidth limit in bytes per second (absent: none).
    public var bandwidthLimit: Int64?
    /// Uploads and data tasks: the HTTP method.
    public var method: String?
    /// Uploads: the source file.
    public var file: String?
    /// Uploads: bytes of the body sent in the current attempt, and the body's length.
    public var bytesSent: Int64?
    public var bytesExpectedToSend: Int64?
    /// Uploads and data tasks, once completed: the response (also in `didComplete`).
    public var response: TaskResponse?
    /// Downloads: true when the task replaces an existing file at its destination (`task.create` `overwrite`).
    public var overwrite: Bool?
    /// While `running` after the transfer ended: verifying or publishing (the transfer slot is free again).
    public var phase: TaskCompletionPhase?
    /// Downloads: this task's own most connections (`task.create` `maxConnections`; absent: the session's).
    public var maxConnections: Int?
    /// While the transfer runs: the HTTP connections it uses now (more than 1 when the download is split).
    public var connections: Int?
    /// The task does not start before this time (RFC 3339, `task.create` `earliestBeginDate`).
    public var earliestBeginDate: String?
    /// Downloads: the file name the response suggested (Content-Disposition, else the URL after redirects), like
    /// `URLResponse.suggestedFilename`; absent before a response, and for tasks the client named a file for.
    public var suggestedFilename: String?

    public init(id: Int64, session: String, kind: String = "download", url: String, currentURL: String? = nil,
                state: TaskState, waitingReason: TaskError? = nil, nextAttemptAt: String? = nil,
                queuePosition: Int? = nil, bytesReceived: Int64, bytesDurable: Int64, bytesExpected: Int64?,
                destination: String, location: String? = nil, error: TaskError?, createdAt: String,
                updatedAt: String, description: String?, etag: String? = nil, lastModified: String? = nil,
                attempts: Int = 0, priority: TaskPriority = .normal, hold: TaskHold? = nil, checksum: String? = nil,
                bandwidthLimit: Int64? = nil, method: String? = nil, file: String? = nil, bytesSent: Int64? = nil,
                bytesExpectedToSend: Int64? = nil, response: TaskResponse? = nil, overwrite: Bool? = nil,
                phase: TaskCompletionPhase? = nil, maxConnections: Int? = nil, connections: Int? = nil,
                earliestBeginDate: String? = nil, suggestedFilename: String? = nil) {
        self.earliestBeginDate = earliestBeginDate
        self.suggestedFilename = suggestedFilename
        self.maxConnections = maxConnections
        self.connections = connections
        self.id = id
        self.session = session
        self.kind = kind
        self.url = url
        self.currentURL = currentURL
        self.state = state
        self.waitingReason = waitingReason
        self.nextAttemptAt = nextAttemptAt
        self.queuePosition = queuePosition
        self.bytesReceived = bytesReceived
        self.bytesDurable = bytesDurable
        self.bytesExpected = bytesExpected
        self.destination = destination
        self.location = location
        self.error = error
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.description = description
        self.etag = etag
        self.lastModified = lastModified
        self.attempts = attempts
        self.priority = priority
        self.hold = hold
        self.checksum = checksum
        self.bandwidthLimit = bandwidthLimit
        self.method = method
        self.file = file
        self.bytesSent = bytesSent
        self.bytesExpectedToSend = bytesExpectedToSend
        self.response = response
        self.overwrite = overwrite
        self.phase = phase
    }

    enum CodingKeys: String, CodingKey {
        case id, session, kind, url, currentURL, state, waitingReason, nextAttemptAt, queuePosition
        case bytesReceived, bytesDurable, bytesExpected, destination, location, error, createdAt, updatedAt
        case description, etag, lastModified, attempts
        case priority, hold, checksum, bandwidthLimit, method, file, bytesSent, bytesExpectedToSend, response, overwrite
        case phase, maxConnections, connections, earliestBeginDate, suggestedFilename
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(Int64.self, forKey: .id)
        session = try c.decode(String.self, forKey: .session)
        kind = try c.decodeIfPresent(String.self, forKey: .kind) ?? TaskKind.download.rawValue
        url = try c.decode(String.self, forKey: .url)
        currentURL = try c.decodeIfPresent(String.self, forKey: .currentURL)
        state = try c.decode(TaskState.self, forKey: .state)
        waitingReason = try c.decodeIfPresent(TaskError.self, forKey: .waitingReason)
        nextAttemptAt = try c.decodeIfPresent(String.self, forKey: .nextAttemptAt)
        queuePosition = try c.decodeIfPresent(Int.self, forKey: .queuePosition)
        bytesReceived = try c.decode(Int64.self, forKey: .bytesReceived)
        bytesDurable = try c.decode(Int64.self, forKey: .bytesDurable)
        bytesExpected = try c.decodeIfPresent(Int64.self, forKey: .bytesExpected)
        destination = try c.decode(String.self, forKey: .destination)
        location = try c.decodeIfPresent(String.self, forKey: .location)
        error = try c.decodeIfPresent(TaskError.self, forKey: .error)
        createdAt = try c.decode(String.self, forKey: .createdAt)
        updatedAt = try c.decode(String.self, forKey: .updatedAt)
        description = try c.decodeIfPresent(String.self, forKey: .description)
        etag = try c.decodeIfPresent(String.self, forKey: .etag)
        lastModified = try c.decodeIfPresent(String.self, forKey: .lastModified)
        attempts = try c.decodeIfPresent(Int.self, forKey: .attempts) ?? 0
        priority = try c.decodeIfPresent(TaskPriority.self, forKey: .priority) ?? .normal
        hold = try c.decodeIfPresent(TaskHold.self, forKey: .hold)
        checksum = try c.decodeIfPresent(String.self, forKey: .checksum)
        bandwidthLimit = try c.decodeIfPresent(Int64.self, forKey: .bandwidthLimit)
        method = try c.decodeIfPresent(String.self, forKey: .method)
        file = try c.decodeIfPresent(String.self, forKey: .file)
        bytesSent = try c.decodeIfPresent(Int64.self, forKey: .bytesSent)
        bytesExpectedToSend = try c.decodeIfPresent(Int64.self, forKey: .bytesExpectedToSend)
        response = try c.decodeIfPresent(TaskResponse.self, forKey: .response)
        overwrite = try c.decodeIfPresent(Bool.self, forKey: .overwrite)
        phase = try c.decodeIfPresent(TaskCompletionPhase.self, forKey: .phase)
        maxConnections = try c.decodeIfPresent(Int.self, forKey: .maxConnections)
        connections = try c.decodeIfPresent(Int.self, forKey: .connections)
        earliestBeginDate = try c.decodeIfPresent(String.self, forKey: .earliestBeginDate)
        suggestedFilename = try c.decodeIfPresent(String.self, forKey: .suggestedFilename)
    }

    // `bytesExpected` and `error` are always present on the wire (null when absent).
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(session, forKey: .session)
        try c.encode(kind, forKey: .kind)
        try c.encode(url, forKey: .url)
        try c.encodeIfPresent(currentURL, forKey: .currentURL)
        try c.encode(state, forKey: .state)
        try c.encodeIfPresent(waitingReason, forKey: .waitingReason)
        try c.encodeIfPresent(nextAttemptAt, forKey: .nextAttemptAt)
        try c.encodeIfPresent(queuePosition, forKey: .queuePosition)
        try c.encode(bytesReceived, forKey: .bytesReceived)
        try c.encode(bytesDurable, forKey: .bytesDurable)
        try c.encode(bytesExpected, forKey: .bytesExpected)
        try c.encode(destination, forKey: .destination)
        try c.encodeIfPresent(location, forKey: .location)
        try c.encode(error, forKey: .error)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
        try c.encode(description, forKey: .description)
        try c.encodeIfPresent(etag, forKey: .etag)
        try c.encodeIfPresent(lastModified, forKey: .lastModified)
        try c.encode(attempts, forKey: .attempts)
        try c.encode(priority, forKey: .priority)
        try c.encodeIfPresent(hold, forKey: .hold)
        try c.encodeIfPresent(checksum, forKey: .checksum)
        try c.encodeIfPresent(bandwidthLimit, forKey: .bandwidthLimit)
        try c.encodeIfPresent(method, forKey: .method)
        try c.encodeIfPresent(file, forKey: .file)
        try c.encodeIfPresent(bytesSent, forKey: .bytesSent)
        try c.encodeIfPresent(bytesExpectedToSend, forKey: .bytesExpectedToSend)
        try c.encodeIfPresent(response, forKey: .response)
        try c.encodeIfPresent(overwrite, forKey: .overwrite)
        try c.encodeIfPresent(phase, forKey: .phase)
        try c.encodeIfPresent(maxConnections, forKey: .maxConnections)
        try c.encodeIfPresent(connections, forKey: .connections)
        try c.encodeIfPresent(earliestBeginDate, forKey: .earliestBeginDate)
        try c.encodeIfPresent(suggestedFilename, forKey: .suggestedFilename)
    }
}

public struct TaskCreateParams: Codable, Sendable {
    public var session: String
    /// Required unless `resumeData` is given.
    public var url: String?
    /// Absolute path, or relative to the session's destination directory. Must not exist yet.
    public var destination: String?
    public var headers: [String: String]?
    public var description: String?
    /// Opaque string from `task.cancel {produceResumeData: true}`.
    public var resumeData: String?
    /// false (default): the task starts `suspended`, like URLSession. true: it is queued at once.
    public var start: Bool?
    /// download (default), upload or data.
    public var kind: TaskKind?
    /// Downloads: expected digest, "sha256:<64 hex digits>"; a mismatch fails the task unpublished.
    public var checksum: String?
    /// Default normal.
    public var priority: TaskPriority?
    /// Bytes per second for this task (absent or 0: no per-task limit).
    public var bandwidthLimit: Int64?
    /// Uploads: PUT (default) or POST. Data tasks: GET (default).
    public var method: String?
    /// Uploads: absolute path of the file to send.
    public var file: String?
    /// Data tasks: the most response body bytes kept (default and maximum 16 MiB); longer fails.
    public var maxResponseBytes: Int64?
    /// Downloads: replace a file that exists at the destination (when the download completes) instead of
    /// refusing an explicit destination or picking "name (1).ext". Default false.
    public var overwrite: Bool?
    /// Downloads: the most HTTP connections this download may use (1...16; absent: the session's
    /// `maxConnectionsPerTask`).
    public var maxConnections: Int?
    /// Not before this time (RFC 3339, e.g. "2026-11-25T22:00:00Z" or with an offset): the task stays `queued`
    /// (`hold.reason` `earliestBeginDate`) until then, across restarts. Like URLSessionTask's.
    public var earliestBeginDate: String?
    /// The task's own user and password for a server that asks (`401`: Basic, Digest), instead of the session's;
    /// also taken from the URL's userinfo (`https://alice:s3cret@host/f`, taken out of the stored URL). Sent only
    /// to the origin of the task's URL; never shown.
    public var credentials: Credentials?

    public init(session: String, url: String? = nil, destination: String? = nil, headers: [String: String]? = nil,
                description: String? = nil, resumeData: String? = nil, start: Bool? = nil, kind: TaskKind? = nil,
                checksum: String? = nil, priority: TaskPriority? = nil, bandwidthLimit: Int64? = nil,
                method: String? = nil, file: String? = nil, maxResponseBytes: Int64? = nil, overwrite: Bool? = nil,
                maxConnections: Int? = nil, earliestBeginDate: String? = nil, credentials: Credentials? = nil) {
        self.credentials = credentials
        self.overwrite = overwrite
        self.maxConnections = maxConnections
        self.earliestBeginDate = earliestBeginDate
        self.session = session
        self.url = url
        self.destination = destination
        self.headers = headers
        self.description = description
        self.resumeData = resumeData
        self.start = start
        self.kind = kind
        self.checksum = checksum
        self.priority = priority
        self.bandwidthLimit = bandwidthLimit
        self.method = method
        self.file = file
        self.maxResponseBytes = maxResponseBytes
    }
}

public struct TaskIDParams: Codable, Sendable {
    public var id: Int64
    public init(id: Int64) { self.id = id }
}

public struct TaskCancelParams: Codable, Sendable {
    public var id: Int64
    public var produceResumeData: Bool?
    public init(id: Int64, produceResumeData: Bool? = nil) {
        self.id = id
        self.produceResumeData = produceResumeData
    }
}

public struct TaskCancelResult: Codable, Sendable {
    public var task: TaskInfo
    /// Present when requested and the download can be resumed (validators known, bytes on disk).
    public var resumeData: String?
    public init(task: TaskInfo, resumeData: String?) {
        self.task = task
        self.resumeData = resumeData
    }
}

public struct TaskListParams: Codable, Sendable {
    public var session: String?
    public var state: TaskState?
    /// At most this many tasks in the answer: 1 to `maxLimit`, which is also the default.
    public var limit: Int?
    /// The `nextCursor` of the previous page: this page starts after it. Opaque.
    public var cursor: String?
    public static let maxLimit = 1000
    public init(session: String? = nil, state: TaskState? = nil, limit: Int? = nil, cursor: String? = nil) {
        self.session = session
        self.state = state
        self.limit = limit
        self.cursor = cursor
    }
}

public struct TaskListResult: Codable, Sendable {
    /// A page of the tasks, by id.
    public var tasks: [TaskInfo]
    /// Present when more tasks follow: ask again with it as `cursor`.
    public var nextCursor: String?
    public init(tasks: [TaskInfo], nextCursor: String? = nil) {
        self.tasks = tasks
        self.nextCursor = nextCursor
    }
}
