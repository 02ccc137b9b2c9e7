import HalfTunesProtocol

/// Where a task is in its life after the bytes arrive: `publishing` is journaled (with `location`) before the
/// partial file is linked to its destination, so an interrupted publish can be finished after a crash.
public enum TaskPhase: String, Codable, Sendable {
    case transfer, publishing
}

/// One row of `sessions`.
public struct SessionRecord: Codable, Sendable, Equatable {
    public var identifier: String
    /// The uid of the client that opened the session (from SO_PEERCRED).
    public var uid: UInt32
    /// Stored as JSON text.
    public var configuration: SessionConfiguration
    public var state: SessionState
    /// Seconds since 1970.
    public var createdAt: Double
    /// Events with seq <= this were acknowledged (and pruned). Never decreases in the journal.
    public var ackedThrough: Int64
    /// How starting its `launchUnit` went (`sessions.launch`, JSON; written by `setSessionLaunch` only).
    public var launch: SessionLaunchRecord?

    public init(identifier: String, uid: UInt32, configuration: SessionConfiguration, state: SessionState,
                createdAt: Double, ackedThrough: Int64 = 0, launch: SessionLaunchRecord? = nil) {
        self.identifier = identifier
        self.uid = uid
        self.configuration = configuration
        self.state = state
        self.createdAt = createdAt
        self.ackedThrough = ackedThrough
        self.launch = launch
    }
}

/// The relaunch state of a session with a `launchUnit` (times in seconds since 1970).
public struct SessionLaunchRecord: Codable, Sendable, Equatable {
    public var lastLaunchAt: Double?
    public var lastResult: String?
    public var lastMessage: String?
    public var nextAttemptAt: Double?
    public var failures: Int

    public init(lastLaunchAt: Double? = nil, lastResult: String? = nil, lastMessage: String? = nil,
                nextAttemptAt: Double? = nil, failures: Int = 0) {
        self.lastLaunchAt = lastLaunchAt
        self.lastResult = lastResult
        self.lastMessage = lastMessage
        self.nextAttemptAt = nextAttemptAt
        self.failures = failures
    }
}

/// One row of `tasks`. Times are seconds since 1970.
public struct TaskRecord: Codable, Sendable, Equatable {
    /// nil before insert; assigned by `INTEGER PRIMARY KEY AUTOINCREMENT` (never reused, even after deletes).
    public var id: Int64?
    public var session: String
    public var kind: String
    public var url: String
    public var currentURL: String?
    public var state: TaskState
    public var phase: TaskPhase
    public var waitingReason: TaskError?
    public var nextAttemptAt: Double?
    public var destination: String
    public var location: String?
    public var partialPath: String
    public var headers: [String: String]
    public var description: String?
    /// The ranges of the partial file that are durable (fsynced before they were journaled).
    public var durableRanges: ByteRanges
    /// How many bytes are durable; setting it makes the first that many bytes the durable ones.
    public var bytesDurable: Int64 {
        get { durableRanges.count }
        set { durableRanges = ByteRanges(prefix: newValue) }
    }
    public var bytesExpected: Int64?
    public var etag: String?
    public var lastModified: String?
    public var error: TaskError?
    public var attempts: Int
    public var queueOrder: Int64
    public var createdAt: Double
    public var updatedAt: Double
    public var resourceDeadline: Double?
    public var priority: TaskPriority
    /// "sha256:<hex>" expected digest of a download.
    public var checksum: String?
    /// Bytes per second; nil = no per-task limit.
    public var bandwidthLimit: Int64?
    /// Uploads and data tasks: the HTTP method.
    public var method: String?
    /// Uploads: the source file.
    public var file: String?
    /// Data tasks: the response body cap.
    public var maxResponseBytes: Int64?
    /// Uploads and data tasks, once ended: the response (JSON text in the row).
    public var response: TaskResponse?
    /// Uploads: "<device>:<inode>" of the file checked at creation; every attempt must open that file.
    public var fileID: String?
    /// Downloads: replace an existing file at the destination when publishing.
    public var overwrite: Bool
    /// Downloads: the most connections this task may use (nil: the session's setting).
    public var maxConnections: Int?
    /// The task does not start before this time (seconds since 1970; nil: at once).
    public var earliestBeginDate: Double?
    /// Downloads the client named no file for: the first response may name it (Content-Disposition, the URL
    /// after redirects). Cleared once settled.
    public var nameFromResponse: Bool
    /// The file name the response suggested (`URLResponse.suggestedFilename`), once one arrived.
    public var suggestedFilename: String?
    /// The task's own credentials for a server that asks (nil: the session's).
    public var credentials: Credentials?

    public init(id: Int64? = nil, session: String, kind: String = "download", url: String, currentURL: String? = nil,
                state: TaskState, phase: TaskPhase = .transfer, waitingReason: TaskError? = nil,
                nextAttemptAt: Double? = nil, destination: String, location: String? = nil, partialPath: String,
                headers: [String: String] = [:], description: String? = nil, bytesDurable: Int64 = 0,
                bytesExpected: Int64? = nil, etag: String? = nil, lastModified: String? = nil,
                error: TaskError? = nil, attempts: Int = 0, queueOrder: Int64 = 0, createdAt: Double,
                updatedAt: Double, resourceDeadline: Double? = nil, priority: TaskPriority = .normal,
                checksum: String? = nil, bandwidthLimit: Int64? = nil, method: String? = nil, file: String? = nil,
                maxResponseBytes: Int64? = nil, response: TaskResponse? = nil, fileID: String? = nil, overwrite: Bool = false,
                durableRanges: ByteRanges? = nil, maxConnections: Int? = nil, earliestBeginDate: Double? = nil,
                nameFromResponse: Bool = false, suggestedFilename: String? = nil, credentials: Credentials? = nil) {
        self.credentials = credentials
        self.nameFromResponse = nameFromResponse
        self.suggestedFilename = suggestedFilename
        self.maxConnections = maxConnections
        self.earliestBeginDate = earliestBeginDate
        self.id = id
        self.session = session
        self.kind = kind
        self.url = url
        self.currentURL = currentURL
        self.state = state
        self.phase = phase
        self.waitingReason = waitingReason
        self.nextAttemptAt = nextAttemptAt
        self.destination = destination
        self.location = location
        self.partialPath = partialPath
        self.headers = headers
        self.description = description
        self.durableRanges = durableRanges ?? ByteRanges(prefix: bytesDurable)
        self.bytesExpected = bytesExpected
        self.etag = etag
        self.lastModified = lastModified
        self.error = error
        self.attempts = attempts
        self.queueOrder = queueOrder
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.resourceDeadline = resourceDeadline
        self.priority = priority
        self.checksum = checksum
        self.bandwidthLimit = bandwidthLimit
        self.method = method
        self.file = file
        self.maxResponseBytes = maxResponseBytes
        self.response = response
        self.fileID = fileID
        self.overwrite = overwrite
    }
}

/// One row of `resume_tokens`: the kept partial data of a task canceled with `produceResumeData: true`.
/// The opaque `token` is what the client holds; the path never leaves the daemon.
public struct ResumeTokenRecord: Codable, Sendable, Equatable {
    public var token: String
    public var session: String
    public var url: String
    public var partialPath: String
    public var destination: String
    /// The kept data's ranges (`bytes` is their sum).
    public var ranges: ByteRanges
    public var bytes: Int64 { ranges.count }
    public var bytesExpected: Int64?
    public var etag: String?
    public var lastModified: String?
    public var createdAt: Double

    public init(token: String, session: String, url: String, partialPath: String, destination: String,
                ranges: ByteRanges, bytesExpected: Int64? = nil, etag: String? = nil, lastModified: String? = nil,
                createdAt: Double) {
        self.token = token
        self.session = session
        self.url = url
        self.partialPath = partialPath
        self.destination = destination
        self.ranges = ranges
        self.bytesExpected = bytesExpected
        self.etag = etag
        self.lastModified = lastModified
        self.createdAt = createdAt
    }

    /// A token keeping the first `bytes` bytes.
    public init(token: String, session: String, url: String, partialPath: String, destination: String, bytes: Int64,
                bytesExpected: Int64? = nil, etag: String? = nil, lastModified: String? = nil, createdAt: Double) {
        self.init(token: token, session: session, url: url, partialPath: partialPath, destination: destination,
                  ranges: ByteRanges(prefix: bytes), bytesExpected: bytesExpected, etag: etag,
                  lastModified: lastModified, createdAt: createdAt)
    }
}

/// One page of task ids (ascending) and the rows of the finished tasks among them, with their text when the page
/// was read with a `describe` (`Journal.taskPage`).
public struct TaskPage: Sendable, Equatable {
    public var ids: [Int64]
    public var finished: [Int64: FinishedRow]

    public init(ids: [Int64], finished: [Int64: FinishedRow]) {
        self.ids = ids
        self.finished = finished
    }
}
