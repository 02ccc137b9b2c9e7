// The user's agent: the connection that starts a user's launch units in that user's own service manager.

/// `agent.register`'s result: the uid the connection is now the agent of (the caller's own), and whether it
/// replaced another agent of that uid (which was told `agent.replaced`).
public struct AgentRegisterResult: Codable, Sendable, Equatable {
    public var uid: UInt32
    public var replaced: Bool

    public init(uid: UInt32, replaced: Bool) {
        self.uid = uid
        self.replaced = replaced
    }
}

/// `agent.launch` (daemon → agent): start `unit` in your service manager for your session `session` (its events
/// wait and no client is subscribed), report `agent.started`, watch it, and report `agent.ended` once it ended.
public struct AgentLaunch: Codable, Sendable, Equatable {
    public var session: String
    public var unit: String

    public init(session: String, unit: String) {
        self.session = session
        self.unit = unit
    }

    /// The notifications the daemon sends an agent.
    public static let method = "agent.launch"
    /// Another connection of the same uid registered: this one is no agent any more.
    public static let replacedMethod = "agent.replaced"
}

/// `agent.started`: the service manager's answer to starting the session's unit `unit` (as `agent.launch` named it;
/// `error` nil: started).
public struct AgentStartedParams: Codable, Sendable, Equatable {
    public var session: String
    public var unit: String
    public var error: String?

    public init(session: String, unit: String, error: String? = nil) {
        self.session = session
        self.unit = unit
        self.error = error
    }
}

/// `agent.ended`: the started unit ended (inactive or failed, no job pending): its service `Result` and main exit
/// status.
public struct AgentEndedParams: Codable, Sendable, Equatable {
    public var session: String
    public var unit: String
    public var result: String
    public var exitStatus: Int32

    public init(session: String, unit: String, result: String, exitStatus: Int32) {
        self.session = session
        self.unit = unit
        self.result = result
        self.exitStatus = exitStatus
    }
}

/// What `agent.started` and `agent.ended` return.
public struct AgentReportResult: Codable, Sendable, Equatable {
    public var ok: Bool

    public init(ok: Bool = true) { self.ok = ok }
}

/// `agent.notify` (daemon → agent): finished tasks of the agent's user's sessions whose `notifications` cover them,
/// sent once each when they finish (after their journal write is durable), for the agent to post as a desktop
/// notification. Nothing is sent again: not to a restarted agent, not after a daemon restart.
public struct AgentNotice: Codable, Sendable, Equatable {
    public var session: String
    public var task: Int64
    public var kind: TaskKind
    public var state: TaskState
    /// The file's name (a download's or upload's), else the URL's last path segment or host.
    public var name: String
    /// Where a completed download is.
    public var location: String?
    /// Bytes transferred (a download's file size).
    public var bytes: Int64?
    /// From the task's creation to its end.
    public var seconds: Double
    /// Why it failed.
    public var error: String?

    public init(session: String, task: Int64, kind: TaskKind, state: TaskState, name: String, location: String? = nil,
                bytes: Int64? = nil, seconds: Double, error: String? = nil) {
        self.session = session
        self.task = task
        self.kind = kind
        self.state = state
        self.name = name
        self.location = location
        self.bytes = bytes
        self.seconds = seconds
        self.error = error
    }

    public static let method = "agent.notify"
}
