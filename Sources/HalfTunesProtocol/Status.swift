public struct DaemonStatus: Codable, Sendable, Equatable {
    public var version: String
    public var pid: Int32
    public var uptimeSeconds: Double
    /// Task counts by state name; every state is present.
    public var tasks: [String: Int]
    public var sessions: Int
    /// Current aggregate download rate in bytes per second (over the last few seconds).
    public var downloadRate: Double
    public var maxConcurrent: Int
    public var socketPath: String
    public var stateDirectory: String
    /// The limits in effect (absent from daemons before 0.2).
    public var limits: DaemonLimits?
    /// Current aggregate upload rate in bytes per second.
    public var uploadRate: Double?
    /// Transfers holding a slot (at most `maxConcurrent`); `tasks.running` also counts downloads being verified
    /// or published (`TaskInfo.phase`).
    public var transfers: Int?
    /// HTTP connections of the transfers: one per transfer plus the extra ones of split downloads.
    public var connections: Int?

    public init(version: String, pid: Int32, uptimeSeconds: Double, tasks: [String: Int], sessions: Int,
                downloadRate: Double, maxConcurrent: Int, socketPath: String, stateDirectory: String,
                limits: DaemonLimits? = nil, uploadRate: Double? = nil, transfers: Int? = nil,
                connections: Int? = nil) {
        self.version = version
        self.pid = pid
        self.uptimeSeconds = uptimeSeconds
        self.tasks = tasks
        self.sessions = sessions
        self.downloadRate = downloadRate
        self.maxConcurrent = maxConcurrent
        self.socketPath = socketPath
        self.stateDirectory = stateDirectory
        self.limits = limits
        self.uploadRate = uploadRate
        self.transfers = transfers
        self.connections = connections
    }
}
