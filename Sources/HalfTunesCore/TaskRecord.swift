// A task's row as the state holds it: its fields, which of them are unwritten, and what a checkpoint records with it.
import HalfTunesProtocol

/// Where a task is in its life after the bytes arrive: `publishing` is journaled (with `location`) before the
/// partial file is linked to its destination, so an interrupted publish can be finished after a crash.
public enum TaskPhase: String, Codable, Sendable {
    case transfer, publishing
}

/// One row of `tasks`. Times are seconds since 1970.
public struct TaskRecord: Sendable, Equatable {
    /// The columns changed since the row was last written (loaded rows: none; a record made here: all):
    /// `Journal.submitTaskUpdate` writes these only, and whoever journals the record clears them (`written()`).
    public var unwritten = UnwrittenColumns(bits: .all)
    /// nil before insert; assigned by `INTEGER PRIMARY KEY AUTOINCREMENT` (never reused, even after deletes).
    public var id: Int64?
    public var session: String { didSet { if session != oldValue { unwritten.bits.insert(.session) } } }
    public var kind: String { didSet { if kind != oldValue { unwritten.bits.insert(.kind) } } }
    public var url: String { didSet { if url != oldValue { unwritten.bits.insert(.url) } } }
    public var currentURL: String? { didSet { if currentURL != oldValue { unwritten.bits.insert(.currentURL) } } }
    public var state: TaskState { didSet { if state != oldValue { unwritten.bits.insert(.state) } } }
    public var phase: TaskPhase { didSet { if phase != oldValue { unwritten.bits.insert(.phase) } } }
    public var waitingReason: TaskError? { didSet { if waitingReason != oldValue { unwritten.bits.insert(.waitingReason) } } }
    public var nextAttemptAt: Double? { didSet { if nextAttemptAt != oldValue { unwritten.bits.insert(.nextAttemptAt) } } }
    public var destination: String { didSet { if destination != oldValue { unwritten.bits.insert(.destination) } } }
    public var location: String? { didSet { if location != oldValue { unwritten.bits.insert(.location) } } }
    public var partialPath: String { didSet { if partialPath != oldValue { unwritten.bits.insert(.partialPath) } } }
    public var headers: [String: String] { didSet { if headers != oldValue { unwritten.bits.insert(.headers) } } }
    public var description: String? { didSet { if description != oldValue { unwritten.bits.insert(.description) } } }
    /// The ranges of the partial file that are durable (fsynced before they were journaled).
    public var durableRanges: ByteRanges { didSet { if durableRanges != oldValue { unwritten.bits.insert(.durableRanges) } } }
    /// How many bytes are durable; setting it makes the first that many bytes the durable ones.
    public var bytesDurable: Int64 {
        get { durableRanges.count }
        set { durableRanges = ByteRanges(prefix: newValue) }
    }
    public var bytesExpected: Int64? { didSet { if bytesExpected != oldValue { unwritten.bits.insert(.bytesExpected) } } }
    public var etag: String? { didSet { if etag != oldValue { unwritten.bits.insert(.etag) } } }
    public var lastModified: String? { didSet { if lastModified != oldValue { unwritten.bits.insert(.lastModified) } } }
    public var error: TaskError? { didSet { if error != oldValue { unwritten.bits.insert(.error) } } }
    public var attempts: Int { didSet { if attempts != oldValue { unwritten.bits.insert(.attempts) } } }
    public var queueOrder: Int64 { didSet { if queueOrder != oldValue { unwritten.bits.insert(.queueOrder) } } }
    public var createdAt: Double { didSet { if createdAt != oldValue { unwritten.bits.insert(.createdAt) } } }
    public var updatedAt: Double { didSet { if updatedAt != oldValue { unwritten.bits.insert(.updatedAt) } } }
    public var resourceDeadline: Double? { didSet { if resourceDeadline != oldValue { unwritten.bits.insert(.resourceDeadline) } } }
    public var priority: TaskPriority { didSet { if priority != oldValue { unwritten.bits.insert(.priority) } } }
    /// "sha256:<hex>" expected digest of a download.
    public var checksum: String? { didSet { if checksum != oldValue { unwritten.bits.insert(.checksum) } } }
    /// Bytes per second; nil = no per-task limit.
    public var bandwidthLimit: Int64? { didSet { if bandwidthLimit != oldValue { unwritten.bits.insert(.bandwidthLimit) } } }
    /// Uploads and data tasks: the HTTP method.
    public var method: String? { didSet { if method != oldValue { unwritten.bits.insert(.method) } } }
    /// Uploads: the source file.
    public var file: String? { didSet { if file != oldValue { unwritten.bits.insert(.file) } } }
    /// Data tasks: the response body cap.
    public var maxResponseBytes: Int64? { didSet { if maxResponseBytes != oldValue { unwritten.bits.insert(.maxResponseBytes) } } }
    /// Uploads and data tasks, once ended: the response (JSON text in the row).
    public var response: TaskResponse? { didSet { if response != oldValue { unwritten.bits.insert(.response) } } }
    /// Uploads: "<device>:<inode>" of the file checked at creation; every attempt must open that file.
    public var fileID: String? { didSet { if fileID != oldValue { unwritten.bits.insert(.fileID) } } }
    /// Downloads: replace an existing file at the destination when publishing.
    public var overwrite: Bool { didSet { if overwrite != oldValue { unwritten.bits.insert(.overwrite) } } }
    /// Downloads: the most connections this task may use (nil: the session's setting).
    public var maxConnections: Int? { didSet { if maxConnections != oldValue { unwritten.bits.insert(.maxConnections) } } }
    /// The task does not start before this time (seconds since 1970; nil: at once).
    public var earliestBeginDate: Double? { didSet { if earliestBeginDate != oldValue { unwritten.bits.insert(.earliestBeginDate) } } }
    /// Downloads the client named no file for: the first response may name it (Content-Disposition, the URL
    /// after redirects). Cleared once settled.
    public var nameFromResponse: Bool { didSet { if nameFromResponse != oldValue { unwritten.bits.insert(.nameFromResponse) } } }
    /// The file name the response suggested (`URLResponse.suggestedFilename`), once one arrived.
    public var suggestedFilename: String? { didSet { if suggestedFilename != oldValue { unwritten.bits.insert(.suggestedFilename) } } }
    /// The task's own credentials for a server that asks (nil: the session's).
    public var credentials: Credentials? { didSet { if credentials != oldValue { unwritten.bits.insert(.credentials) } } }

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

/// Columns of a task's row, one bit each at its index in `TaskRecord.columns`.
public struct TaskColumns: OptionSet, Sendable, Hashable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    /// One bit per column but `id`: 38 (the journal checks this against its own column list).
    public static let count = 38
    public static let all = TaskColumns(rawValue: (1 << UInt64(count)) - 1)
    public static let session = TaskColumns(rawValue: 1 << 0) // session
    public static let kind = TaskColumns(rawValue: 1 << 1) // kind
    public static let url = TaskColumns(rawValue: 1 << 2) // url
    public static let currentURL = TaskColumns(rawValue: 1 << 3) // current_url
    public static let state = TaskColumns(rawValue: 1 << 4) // state
    public static let phase = TaskColumns(rawValue: 1 << 5) // phase
    public static let waitingReason = TaskColumns(rawValue: 1 << 6) // waiting_reason
    public static let nextAttemptAt = TaskColumns(rawValue: 1 << 7) // next_attempt_at
    public static let destination = TaskColumns(rawValue: 1 << 8) // destination
    public static let location = TaskColumns(rawValue: 1 << 9) // location
    public static let partialPath = TaskColumns(rawValue: 1 << 10) // partial_path
    public static let headers = TaskColumns(rawValue: 1 << 11) // headers
    public static let description = TaskColumns(rawValue: 1 << 12) // description
    public static let durableRanges = TaskColumns(rawValue: 1 << 13 | 1 << 32) // bytes_durable, durable_ranges
    public static let bytesExpected = TaskColumns(rawValue: 1 << 14) // bytes_expected
    public static let etag = TaskColumns(rawValue: 1 << 15) // etag
    public static let lastModified = TaskColumns(rawValue: 1 << 16) // last_modified
    public static let error = TaskColumns(rawValue: 1 << 17) // error
    public static let attempts = TaskColumns(rawValue: 1 << 18) // attempts
    public static let queueOrder = TaskColumns(rawValue: 1 << 19) // queue_order
    public static let createdAt = TaskColumns(rawValue: 1 << 20) // created_at
    public static let updatedAt = TaskColumns(rawValue: 1 << 21) // updated_at
    public static let resourceDeadline = TaskColumns(rawValue: 1 << 22) // resource_deadline
    public static let priority = TaskColumns(rawValue: 1 << 23) // priority
    public static let checksum = TaskColumns(rawValue: 1 << 24) // checksum
    public static let bandwidthLimit = TaskColumns(rawValue: 1 << 25) // bandwidth_limit
    public static let method = TaskColumns(rawValue: 1 << 26) // method
    public static let file = TaskColumns(rawValue: 1 << 27) // file
    public static let maxResponseBytes = TaskColumns(rawValue: 1 << 28) // max_response_bytes
    public static let response = TaskColumns(rawValue: 1 << 29) // response
    public static let fileID = TaskColumns(rawValue: 1 << 30) // file_id
    public static let overwrite = TaskColumns(rawValue: 1 << 31) // overwrite
    public static let maxConnections = TaskColumns(rawValue: 1 << 33) // max_connections
    public static let earliestBeginDate = TaskColumns(rawValue: 1 << 34) // earliest_begin_date
    public static let nameFromResponse = TaskColumns(rawValue: 1 << 35) // name_from_response
    public static let suggestedFilename = TaskColumns(rawValue: 1 << 36) // suggested_filename
    public static let credentials = TaskColumns(rawValue: 1 << 37) // credentials
}

/// Which columns of a record are not yet in its row: bookkeeping of the journal's, not part of the task's value
/// (two records of the same task compare equal whatever they hold).
public struct UnwrittenColumns: Sendable, Equatable {
    public var bits: TaskColumns
    public init(bits: TaskColumns) { self.bits = bits }
    public static func == (_: UnwrittenColumns, _: UnwrittenColumns) -> Bool { true }
}

extension TaskRecord {
    /// The record as its row is about to be written (with the columns to write), and the record marked written.
    public mutating func written() -> TaskRecord {
        let row = self
        unwritten.bits = []
        return row
    }
}

/// What a download's response said, recorded with a checkpoint of the attempt that received it, so the
/// durable bytes and the validators they belong to reach the journal in one statement.
public struct CheckpointHead: Sendable, Equatable {
    public var etag: String?
    public var lastModified: String?
    public var bytesExpected: Int64?
    public var currentURL: String

    public init(etag: String?, lastModified: String?, bytesExpected: Int64?, currentURL: String) {
        self.etag = etag
        self.lastModified = lastModified
        self.bytesExpected = bytesExpected
        self.currentURL = currentURL
    }
}
