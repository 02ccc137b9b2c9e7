#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A background session's configuration (like `URLSessionConfiguration.background`). Every field is
/// optional on the wire; the daemon fills in defaults and returns the resolved configuration.
public struct SessionConfiguration: Codable, Sendable, Equatable {
    /// Where downloads go when a task names no destination. Default: the daemon's `--downloads-dir`.
    public var destinationDirectory: String?
    /// Extra HTTP headers sent with every request of the session (`httpAdditionalHeaders`).
    public var headers: [String: String]?
    /// Idle timeout in seconds, reset by every received byte (`timeoutIntervalForRequest`). Default 60.
    public var requestTimeout: Double?
    /// Whole-task limit in seconds, after which a task fails (`timeoutIntervalForResource`). Default 7 days.
    public var resourceTimeout: Double?
    /// How transient failures are retried.
    public var retry: RetryPolicy?
    /// Transfers of this session running at once (default: only the daemon-wide limit applies).
    public var maxConcurrent: Int?
    /// Follow a redirect from https to http (default false: such a redirect fails the task).
    public var allowInsecureRedirects: Bool?
    /// The most HTTP connections one download may use (1...16, default 8): a download whose server takes
    /// ranges is split over several connections while that makes it faster, always within the daemon's
    /// `max-connections-per-host`. 1 turns splitting off. A task's `maxConnections` wins.
    public var maxConnectionsPerTask: Int?
    /// Transfer over a metered network (NetworkManager's `Metered`), like URLSession's
    /// `allowsExpensiveNetworkAccess`. Default true; false: tasks wait with `networkExpensive` while it is metered.
    public var allowsExpensiveNetworkAccess: Bool?
    /// While the network is offline, tasks wait for it (`offline`) instead of failing. Default true; false: a
    /// task that would start offline fails at once with `offline`, like URLSession.
    public var waitsForConnectivity: Bool?
    /// Transfer only in good conditions: unmetered and on power, like URLSession's `isDiscretionary`. Default
    /// false; true: tasks wait with `discretionary` while the network is metered or the machine on battery.
    public var isDiscretionary: Bool?
    /// A systemd service the daemon starts when events of the session are journaled while no client is
    /// subscribed (like `sessionSendsLaunchEvents`): `name.service`, or a template `name@.service` whose instance
    /// is the escaped session identifier. Started again with backoff until the events are acknowledged. Only for
    /// sessions of the daemon's own user (see docs/security.md). Default: none.
    public var launchUnit: String?
    /// Give a downloaded file the server's `Last-Modified` as its modification time (`wget -N`, `curl -R`).
    /// Default true.
    public var preserveModificationTime: Bool?
    /// The proxy of the session's requests (`connectionProxyDictionary`): `http://[user:password@]host:port`
    /// (https through `CONNECT` tunnels, plain http forwarded), `socks5://host:port` or `socks5h://host:port`, or `direct` for none. Default (absent):
    /// the daemon's `proxy` setting, else its environment's `http_proxy`/`https_proxy`/`all_proxy`. Shown with
    /// the password as `***`; sending that form back keeps the stored password.
    public var proxy: String?
    /// Hosts whose requests skip the proxy, like `no_proxy`: names (with their subdomains), IP addresses, CIDR
    /// ranges, or `*`, separated by commas. Default (absent): the daemon's `proxy-bypass`, else `no_proxy`.
    public var proxyBypass: String?
    /// Plain http through an HTTP proxy goes through a `CONNECT` tunnel too, like curl's `--proxytunnel`, for
    /// proxies that only tunnel. Default false: plain http is forwarded (`GET http://host/path`), as every client does.
    public var proxyTunnel: Bool?
    /// Seconds a finished task (completed, failed, canceled) is kept once its events are acknowledged, for
    /// `task.get` and `task.list`; then it is deleted from the journal with its data-task body. 0: as soon as
    /// acknowledged. Default 86,400 (24 h). Unacknowledged events keep their task however long it takes.
    public var finishedTaskRetention: Double?
    /// User names and passwords answering servers that ask (`401` with `WWW-Authenticate: Basic` or `Digest`),
    /// each for one origin (and optionally one realm), like `URLCredentialStorage`'s protection spaces: sent only
    /// to that origin, and only when it asks. Shown with the password as `***`; sending that form back keeps the
    /// stored password. Default: none (a server that asks fails the task with `authenticationRequired`).
    public var credentials: [OriginCredentials]?
    /// Desktop notifications the user's agent posts for the session's finished tasks: `none`, `completed`
    /// (downloads that completed or failed) or `all` (every finished task, canceled ones too). Default `none`,
    /// `completed` for the CLI's session `halftunesctl`.
    public var notifications: SessionNotifications?

    public static let defaultRequestTimeout: Double = 60
    public static let defaultResourceTimeout: Double = 7 * 24 * 3600
    public static let defaultMaxConnectionsPerTask = 8
    public static let defaultFinishedTaskRetention: Double = 24 * 3600
    /// The longest `finishedTaskRetention`: ten years.
    public static let maxFinishedTaskRetention: Double = 10 * 365 * 24 * 3600
    /// The values `maxConnectionsPerTask` and `TaskCreateParams.maxConnections` may take.
    public static let maxConnectionsRange = 1...16

    public init(destinationDirectory: String? = nil, headers: [String: String]? = nil,
                requestTimeout: Double? = nil, resourceTimeout: Double? = nil, retry: RetryPolicy? = nil,
                maxConcurrent: Int? = nil, allowInsecureRedirects: Bool? = nil, maxConnectionsPerTask: Int? = nil,
                allowsExpensiveNetworkAccess: Bool? = nil, waitsForConnectivity: Bool? = nil, isDiscretionary: Bool? = nil,
                launchUnit: String? = nil, preserveModificationTime: Bool? = nil, proxy: String? = nil,
                proxyBypass: String? = nil, proxyTunnel: Bool? = nil, finishedTaskRetention: Double? = nil,
                credentials: [OriginCredentials]? = nil, notifications: SessionNotifications? = nil) {
        self.destinationDirectory = destinationDirectory
        self.headers = headers
        self.requestTimeout = requestTimeout
        self.resourceTimeout = resourceTimeout
        self.retry = retry
        self.maxConcurrent = maxConcurrent
        self.allowInsecureRedirects = allowInsecureRedirects
        self.maxConnectionsPerTask = maxConnectionsPerTask
        self.allowsExpensiveNetworkAccess = allowsExpensiveNetworkAccess
        self.waitsForConnectivity = waitsForConnectivity
        self.isDiscretionary = isDiscretionary
        self.launchUnit = launchUnit
        self.preserveModificationTime = preserveModificationTime
        self.proxy = proxy
        self.proxyBypass = proxyBypass
        self.proxyTunnel = proxyTunnel
        self.finishedTaskRetention = finishedTaskRetention
        self.credentials = credentials
        self.notifications = notifications
    }
}

/// Which of a session's finished tasks get a desktop notification (`SessionConfiguration.notifications`).
public enum SessionNotifications: String, Codable, Sendable, CaseIterable {
    case none
    /// Downloads that completed or failed.
    case completed
    /// Every finished task: downloads, uploads and data tasks; completed, failed or canceled.
    case all

    /// The CLI's own session, whose downloads notify by default.
    public static let cliSession = "halftunesctl"

    /// The default for a session named `name` (its identifier without the owner's uid).
    public static func defaultValue(forSession name: String) -> SessionNotifications {
        name == cliSession ? .completed : .none
    }

    /// Whether a task of `kind` that ended `state` is notified.
    public func covers(kind: TaskKind, state: TaskState) -> Bool {
        switch self {
        case .none: return false
        case .completed: return kind == .download && (state == .completed || state == .failed)
        case .all: return state == .completed || state == .failed || state == .canceled
        }
    }
}

/// A user name and password for HTTP authentication (Basic, Digest).
public struct Credentials: Codable, Sendable, Equatable {
    public var user: String
    public var password: String

    /// How the password is shown.
    public static let redacted = "***"

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }
}

/// A session's credentials for the servers of one origin: a `URLCredential` stored for a protection space.
public struct OriginCredentials: Codable, Sendable, Equatable {
    /// Where they are sent: `scheme://host[:port]` (http or https). Nil only in a session journaled before
    /// credentials named their origin: such credentials are kept but sent nowhere.
    public var origin: String?
    /// The realm of the server's challenge they answer; nil: any realm of the origin.
    public var realm: String?
    public var user: String
    public var password: String

    /// The most a session holds.
    public static let maxCount = 64

    public init(origin: String?, realm: String? = nil, user: String, password: String) {
        self.origin = origin
        self.realm = realm
        self.user = user
        self.password = password
    }

    public var credentials: Credentials { Credentials(user: user, password: password) }

    /// `text` as an origin is written: `scheme://host[:port]`, the scheme and host in lower case, the port only
    /// when not the scheme's own; nil unless http or https with a host and nothing after it (a path "/" at most).
    public static func normalizedOrigin(_ text: String) -> String? {
        guard text.utf8.count <= 1024, let c = URLComponents(string: text), let scheme = c.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = c.host?.lowercased(), !host.isEmpty,
              c.user == nil, c.password == nil, c.query == nil, c.fragment == nil, c.path.isEmpty || c.path == "/"
        else { return nil }
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        guard let port = c.port else { return "\(scheme)://\(bracketed)" }
        guard (1...65535).contains(port) else { return nil }
        return port == (scheme == "https" ? 443 : 80) ? "\(scheme)://\(bracketed)" : "\(scheme)://\(bracketed):\(port)"
    }
}

public enum SessionState: String, Codable, Sendable {
    /// Accepts new tasks.
    case active
    /// `session.invalidate {cancelTasks: false}` was called: running tasks finish, no new tasks.
    case invalidating
}

public struct SessionInfo: Codable, Sendable, Equatable {
    public var identifier: String
    public var configuration: SessionConfiguration
    public var state: SessionState
    public var createdAt: String
    /// Task counts by state name (only states with at least one task appear).
    public var taskCounts: [String: Int]
    /// The highest journaled event sequence number of this session (0 if none yet). Subscribing with
    /// `after` set to this value yields only events that happen from now on.
    public var lastEventSeq: Int64
    /// Events up to and including this sequence number were acknowledged and may be pruned.
    public var ackedThrough: Int64
    /// How starting the session's `launchUnit` went (absent without one).
    public var launch: SessionLaunch?

    public init(identifier: String, configuration: SessionConfiguration, state: SessionState, createdAt: String,
                taskCounts: [String: Int], lastEventSeq: Int64, ackedThrough: Int64, launch: SessionLaunch? = nil) {
        self.identifier = identifier
        self.configuration = configuration
        self.state = state
        self.createdAt = createdAt
        self.taskCounts = taskCounts
        self.lastEventSeq = lastEventSeq
        self.ackedThrough = ackedThrough
        self.launch = launch
    }
}

/// The relaunch state of a session with a `launchUnit`.
public struct SessionLaunch: Codable, Sendable, Equatable {
    /// The unit the daemon starts (a template's instance filled in).
    public var unit: String
    /// When the unit was last started (RFC 3339).
    public var lastLaunchAt: String?
    /// How the last start went: `starting`, `running` (the unit is active), `acknowledged` (it ended after its
    /// client acknowledged the events), `exitedWithoutAcknowledging`, `failed` (the unit failed), `startFailed`
    /// (the service manager refused or could not be reached), `waitingForAgent` (a session of another user than the
    /// daemon's: no agent of that user is connected; the start happens when one registers).
    public var lastResult: String?
    /// The service manager's words about it (the unit's result and exit status, or the error).
    public var lastMessage: String?
    /// When the next start is due (RFC 3339), while backing off after a failure.
    public var nextAttemptAt: String?
    /// Starts in a row that ended without the events acknowledged (the backoff: 10 s doubling up to 1 h).
    public var failures: Int

    public init(unit: String, lastLaunchAt: String? = nil, lastResult: String? = nil, lastMessage: String? = nil,
                nextAttemptAt: String? = nil, failures: Int = 0) {
        self.unit = unit
        self.lastLaunchAt = lastLaunchAt
        self.lastResult = lastResult
        self.lastMessage = lastMessage
        self.nextAttemptAt = nextAttemptAt
        self.failures = failures
    }
}

public struct SessionOpenParams: Codable, Sendable {
    public var identifier: String
    /// When given, replaces the stored configuration (applies to tasks created and attempts started later).
    public var configuration: SessionConfiguration?
    public init(identifier: String, configuration: SessionConfiguration? = nil) {
        self.identifier = identifier
        self.configuration = configuration
    }
}

public struct SessionOpenResult: Codable, Sendable {
    public var session: SessionInfo
    /// True when the session already existed (a re-attach), false when it was created.
    public var reattached: Bool
    public init(session: SessionInfo, reattached: Bool) {
        self.session = session
        self.reattached = reattached
    }
}

public struct SessionListResult: Codable, Sendable {
    public var sessions: [SessionInfo]
    public init(sessions: [SessionInfo]) { self.sessions = sessions }
}

public struct SessionInvalidateParams: Codable, Sendable {
    public var identifier: String
    /// true: `invalidateAndCancel()`; false (default): `finishTasksAndInvalidate()`.
    public var cancelTasks: Bool?
    public init(identifier: String, cancelTasks: Bool? = nil) {
        self.identifier = identifier
        self.cancelTasks = cancelTasks
    }
}

public struct SessionInvalidateResult: Codable, Sendable {
    /// True when the session is gone now; false when it waits for its remaining tasks.
    public var invalidated: Bool
    /// Tasks still running that the session waits for.
    public var remainingTasks: Int
    public init(invalidated: Bool, remainingTasks: Int) {
        self.invalidated = invalidated
        self.remainingTasks = remainingTasks
    }
}
