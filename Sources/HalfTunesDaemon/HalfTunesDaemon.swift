// HalfTunesDaemon: sessions, the queue, event fan-out and the JSON-RPC control server.
import Foundation
import HalfTunesCore
import HalfTunesEngine

/// Everything the daemon needs to start; built from flags by the `halftunesd` executable.
public struct DaemonConfiguration: Sendable {
    public var socketPath: String
    public var stateDirectory: String
    public var downloadsDirectory: String
    public var maxConcurrent: Int
    /// Transfers running at once to one host (scheme, host and port).
    public var maxConnectionsPerHost: Int = 6
    /// Bytes per second across all transfers; 0 = unlimited.
    public var bandwidthLimit: Int64 = 0
    /// How often a running transfer fsyncs and journals its durable length.
    public var checkpointInterval: Double = 1.0
    /// The free space downloads leave on their file system (`min-free-space`).
    public var minFreeSpace = FreeSpaceFloor.automatic
    /// The free space calls that write to the journal leave on the state directory's file system
    /// (`state-min-free-space`, else `min-free-space`): below it they are refused, so the journal never fills it.
    public var stateMinFreeSpace = FreeSpaceFloor.automatic
    /// The bytes each user's partial files (unfinished downloads, kept resume data) may hold, but the daemon's
    /// own uid's and root's (`max-disk-per-uid`; a percentage is of the downloads directory's file system).
    public var maxDiskPerUID = DiskLimit.standard
    /// What the journal may hold for each user but root and the daemon's own (`max-journal-per-uid`): their
    /// unacknowledged events, data-task bodies and finished tasks kept; past it their `task.create` is refused.
    public var maxJournalPerUID = Self.defaultMaxJournalPerUID
    public static let defaultMaxJournalPerUID = DiskLimit.percent(5)
    /// How long shutdown waits for transfers to checkpoint.
    public var shutdownGrace: Double = 3.5
    /// A subscriber with more unsent output than this is disconnected.
    public var maxPendingOutputBytes: Int = 8 << 20
    /// Unsent output all of one uid's connections may hold together (`max-output-per-uid`): past it, the
    /// connection whose line crossed it is disconnected like a client that stopped reading.
    public var maxOutputPerUID = Self.defaultMaxOutputPerUID
    public static let defaultMaxOutputPerUID = 128 << 20
    /// Requests read and not yet answered that all of one uid's connections may hold together
    /// (`max-input-per-uid`): past it, those of its connections with requests waiting stop being read.
    public var maxInputPerUID = Self.defaultMaxInputPerUID
    public static let defaultMaxInputPerUID = 16 << 20
    /// A client that leaves the daemon's output unread this long (seconds) is disconnected.
    public var clientTimeout: Double = 60
    /// Group of the socket file when halftunesd binds it itself (nil: the daemon's own group).
    public var socketGroup: gid_t?
    /// Control connections one uid may hold open at once.
    public var maxConnectionsPerUID: Int = 64
    /// Event subscriptions one connection may hold.
    public var maxSubscriptionsPerConnection: Int = 16
    /// Unfinished tasks one session may hold.
    public var maxTasksPerSession: Int = 10_000
    /// Sessions one uid may hold (`session.open` of a new one fails with `limitExceeded` past it).
    public var maxSessionsPerUID: Int = 1000
    /// Unfinished tasks one uid may hold across all its sessions (`task.create` fails with `limitExceeded`).
    public var maxTasksPerUID: Int = 100_000
    /// Journaled, unacknowledged events one uid may hold across its sessions before `task.create` is refused.
    public var maxPendingEventsPerUID: Int = 1_000_000
    /// Resume-data partials one uid may keep at once (`task.cancel` with resume data beyond it: `limitExceeded`).
    public var maxResumeDataPerUID: Int = 200
    /// PEM certificate authorities trusted besides the system's (`ca-file`).
    public var caFile: String?
    /// The netrc file whose credentials answer servers that ask, for the daemon's own user's tasks without
    /// credentials of their own (`netrc`; nil: none).
    public var netrcPath: String?
    /// The daemon's proxies (its `proxy` and `proxy-bypass` settings, else curl's environment variables);
    /// a session's own `proxy`/`proxyBypass` win over them.
    public var proxyRules: ProxyRules = .none
    /// Proxy variables of the environment that could not be used (logged at start).
    public var proxyProblems: [String] = []
    /// Unacknowledged journaled events past which a session accepts no new tasks.
    public var maxPendingEventsPerSession: Int = 100_000
    /// Resume data (and the partial data it keeps) expires after this many seconds.
    public var resumeDataLifetime: Double = 7 * 24 * 3600

    public init(socketPath: String, stateDirectory: String, downloadsDirectory: String, maxConcurrent: Int) {
        self.socketPath = socketPath
        self.stateDirectory = stateDirectory
        self.downloadsDirectory = downloadsDirectory
        self.maxConcurrent = maxConcurrent
    }

    public var journalPath: String { stateDirectory + "/journal.sqlite" }
    public var lockPath: String { stateDirectory + "/halftunesd.lock" }
}

/// Default locations: system-wide as root, XDG for everyone else.
public enum DefaultPaths {
    static var environment: [String: String] { ProcessInfo.processInfo.environment }
    static var isRoot: Bool { geteuid() == 0 }

    public static func socketPath() -> String {
        if isRoot { return "/run/halftunesd/control.sock" }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return runtime + "/halftunesd/control.sock"
        }
        return "/tmp/halftunesd-\(getuid())/control.sock"
    }

    public static func stateDirectory() -> String {
        if isRoot { return "/var/lib/halftunesd" }
        if let state = environment["XDG_STATE_HOME"], !state.isEmpty { return state + "/halftunesd" }
        return home() + "/.local/state/halftunesd"
    }

    public static func downloadsDirectory() -> String {
        if isRoot { return "/var/lib/halftunesd/downloads" }
        if let dir = environment["XDG_DOWNLOAD_DIR"], !dir.isEmpty { return dir }
        return home() + "/Downloads"
    }

    static func home() -> String {
        if let home = environment["HOME"], !home.isEmpty { return home }
        if let pw = getpwuid(getuid()), let dir = pw.pointee.pw_dir { return String(cString: dir) }
        return "/tmp"
    }
}
