// A session's row as the state holds it, with its relaunch record.
import HalfTunesProtocol

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
