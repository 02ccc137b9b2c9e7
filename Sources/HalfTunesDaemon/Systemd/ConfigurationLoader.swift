import Foundation
import HalfTunesCore
import HalfTunesEngine
import Logging

/// The settings in effect: built-in defaults, overridden by the configuration file, overridden by flags.
public struct ResolvedSettings: Sendable, Equatable {
    public var socket: String
    public var socketGroup: String?
    public var stateDirectory: String
    public var downloadsDirectory: String
    public var maxConcurrent: Int
    public var maxConnectionsPerHost: Int
    /// Bytes per second across all transfers; 0 = unlimited.
    public var bandwidthLimit: Int64
    public var logLevel: Logger.Level
    /// nil: never exit for idleness.
    public var exitWhenIdle: Double?
    public var checkpointInterval: Double
    public var minFreeSpace: FreeSpaceFloor
    /// `state-min-free-space`, else `min-free-space`.
    public var stateMinFreeSpace: FreeSpaceFloor
    public var maxDiskPerUID: DiskLimit
    public var maxJournalPerUID: DiskLimit
    public var maxPendingOutput: Int
    public var maxOutputPerUID: Int
    public var maxInputPerUID: Int
    public var clientTimeout: Double
    public var maxConnectionsPerUID: Int
    public var maxTasksPerSession: Int
    public var maxPendingEvents: Int
    public var maxSessionsPerUID: Int
    public var maxTasksPerUID: Int
    public var maxPendingEventsPerUID: Int
    public var maxResumeDataPerUID: Int
    public var caFile: String?
    public var proxy: String?
    public var proxyBypass: String?
    /// The netrc file given (`none`: none); nil: `$NETRC`, else the daemon user's `~/.netrc`.
    public var netrc: String?

    /// The `netrc` value that reads no file.
    public static let noNetrc = "none"
    public static let defaultMaxConcurrent = 6
    public static let defaultMaxConnectionsPerHost = 6
    public static let defaultLogLevel = Logger.Level.info
    public static let defaultCheckpointInterval = 1.0
    public static let defaultMaxPendingOutput = 8 << 20
    public static let defaultClientTimeout = 60.0
    public static let defaultMaxConnectionsPerUID = 64
    public static let defaultMaxTasksPerSession = 10_000
    public static let defaultMaxPendingEvents = 100_000
    public static let defaultMaxSessionsPerUID = 1000
    public static let defaultMaxTasksPerUID = 100_000
    public static let defaultMaxPendingEventsPerUID = 1_000_000
    public static let defaultMaxResumeDataPerUID = 200

    public init(_ s: DaemonSettings) {
        socket = s.socket ?? DefaultPaths.socketPath()
        socketGroup = s.socketGroup
        stateDirectory = s.stateDirectory ?? DefaultPaths.stateDirectory()
        downloadsDirectory = s.downloadsDirectory ?? DefaultPaths.downloadsDirectory()
        maxConcurrent = s.maxConcurrent ?? Self.defaultMaxConcurrent
        maxConnectionsPerHost = s.maxConnectionsPerHost ?? Self.defaultMaxConnectionsPerHost
        bandwidthLimit = s.bandwidthLimit ?? 0
        logLevel = s.logLevel ?? Self.defaultLogLevel
        exitWhenIdle = s.exitWhenIdle.flatMap { $0 > 0 ? $0 : nil }
        checkpointInterval = s.checkpointInterval ?? Self.defaultCheckpointInterval
        minFreeSpace = s.minFreeSpace ?? .automatic
        stateMinFreeSpace = s.stateMinFreeSpace ?? minFreeSpace
        maxDiskPerUID = s.maxDiskPerUID ?? .standard
        maxJournalPerUID = s.maxJournalPerUID ?? DaemonConfiguration.defaultMaxJournalPerUID
        maxPendingOutput = s.maxPendingOutput ?? Self.defaultMaxPendingOutput
        maxOutputPerUID = s.maxOutputPerUID ?? DaemonConfiguration.defaultMaxOutputPerUID
        maxInputPerUID = s.maxInputPerUID ?? DaemonConfiguration.defaultMaxInputPerUID
        clientTimeout = s.clientTimeout ?? Self.defaultClientTimeout
        maxConnectionsPerUID = s.maxConnectionsPerUID ?? Self.defaultMaxConnectionsPerUID
        maxTasksPerSession = s.maxTasksPerSession ?? Self.defaultMaxTasksPerSession
        maxPendingEvents = s.maxPendingEvents ?? Self.defaultMaxPendingEvents
        maxSessionsPerUID = s.maxSessionsPerUID ?? Self.defaultMaxSessionsPerUID
        maxTasksPerUID = s.maxTasksPerUID ?? Self.defaultMaxTasksPerUID
        maxPendingEventsPerUID = s.maxPendingEventsPerUID ?? Self.defaultMaxPendingEventsPerUID
        maxResumeDataPerUID = s.maxResumeDataPerUID ?? Self.defaultMaxResumeDataPerUID
        caFile = s.caFile
        proxy = s.proxy
        proxyBypass = s.proxyBypass
        netrc = s.netrc
    }

    public var daemonConfiguration: DaemonConfiguration {
        var config = DaemonConfiguration(socketPath: socket, stateDirectory: stateDirectory,
                                         downloadsDirectory: downloadsDirectory, maxConcurrent: maxConcurrent)
        config.socketGroup = socketGroup.flatMap(SocketGroup.gid(of:))
        config.checkpointInterval = checkpointInterval
        config.minFreeSpace = minFreeSpace
        config.stateMinFreeSpace = stateMinFreeSpace
        config.maxDiskPerUID = maxDiskPerUID
        config.maxJournalPerUID = maxJournalPerUID
        config.maxConnectionsPerHost = maxConnectionsPerHost
        config.bandwidthLimit = bandwidthLimit
        config.maxPendingOutputBytes = maxPendingOutput
        config.maxOutputPerUID = maxOutputPerUID
        config.maxInputPerUID = maxInputPerUID
        config.clientTimeout = clientTimeout
        config.maxConnectionsPerUID = maxConnectionsPerUID
        config.maxTasksPerSession = maxTasksPerSession
        config.maxPendingEventsPerSession = maxPendingEvents
        config.maxSessionsPerUID = maxSessionsPerUID
        config.maxTasksPerUID = maxTasksPerUID
        config.maxPendingEventsPerUID = maxPendingEventsPerUID
        config.maxResumeDataPerUID = maxResumeDataPerUID
        config.caFile = caFile
        (config.proxyRules, config.proxyProblems) = proxyRules(environment: ProcessInfo.processInfo.environment)
        config.netrcPath = netrcPath(environment: ProcessInfo.processInfo.environment)
        return config
    }

    /// The same values as settings (exit-when-idle 0 for never).
    public var asSettings: DaemonSettings {
        var s = DaemonSettings()
        s.socket = socket
        s.socketGroup = socketGroup
        s.stateDirectory = stateDirectory
        s.downloadsDirectory = downloadsDirectory
        s.maxConcurrent = maxConcurrent
        s.maxConnectionsPerHost = maxConnectionsPerHost
        s.bandwidthLimit = bandwidthLimit
        s.logLevel = logLevel
        s.exitWhenIdle = exitWhenIdle ?? 0
        s.checkpointInterval = checkpointInterval
        s.minFreeSpace = minFreeSpace
        s.stateMinFreeSpace = stateMinFreeSpace
        s.maxDiskPerUID = maxDiskPerUID
        s.maxJournalPerUID = maxJournalPerUID
        s.maxPendingOutput = maxPendingOutput
        s.maxOutputPerUID = maxOutputPerUID
        s.maxInputPerUID = maxInputPerUID
        s.clientTimeout = clientTimeout
        s.maxConnectionsPerUID = maxConnectionsPerUID
        s.maxTasksPerSession = maxTasksPerSession
        s.maxPendingEvents = maxPendingEvents
        s.maxSessionsPerUID = maxSessionsPerUID
        s.maxTasksPerUID = maxTasksPerUID
        s.maxPendingEventsPerUID = maxPendingEventsPerUID
        s.maxResumeDataPerUID = maxResumeDataPerUID
        s.caFile = caFile
        s.proxy = proxy
        s.proxyBypass = proxyBypass
        s.netrc = netrc
        return s
    }

    /// The netrc file the daemon reads: the `netrc` setting (`none`: nil), else curl's `$NETRC`, else the daemon
    /// user's `~/.netrc` (from `$HOME`, else its passwd entry).
    public func netrcPath(environment: [String: String]) -> String? {
        if let netrc { return netrc == Self.noNetrc ? nil : netrc }
        var environment = environment
        if environment["HOME"]?.isEmpty ?? true, let pw = getpwuid(getuid()), let dir = pw.pointee.pw_dir {
            environment["HOME"] = String(cString: dir)
        }
        return Netrc.defaultPath(environment: environment)
    }

    /// The daemon's proxy rules: the `proxy` setting when given (for every scheme), else the environment's
    /// `http_proxy`/`https_proxy`/`all_proxy`; the `proxy-bypass` setting when given, else `no_proxy`. (The
    /// system unit unsets those variables, so the system daemon follows only its configuration.)
    public func proxyRules(environment: [String: String]) -> (ProxyRules, [String]) {
        var (rules, problems) = ProxyRules.environment(environment)
        if let proxy {
            rules = ProxyRules(all: try? ProxyRules.setting(proxy), bypass: rules.bypass, source: "configuration")
        }
        if let proxyBypass, let bypass = try? ProxyBypass.parse(proxyBypass) { rules.bypass = bypass }
        return (rules, problems)
    }

    /// The keys whose values differ between `self` and `other`.
    func changedKeys(from other: ResolvedSettings) -> [SettingKey] {
        let (mine, theirs) = (asSettings, other.asSettings)
        return SettingKey.allCases.filter { mine.text(for: $0) != theirs.text(for: $0) }
    }
}

/// Reads the configuration file and applies the flags on top, at start and again on every SIGHUP.
public struct ConfigurationLoader: Sendable {
    /// Values given on the command line (they always win over the file).
    public var flags: DaemonSettings
    public var path: String
    /// `--config` was given: the file must exist.
    public var isExplicit: Bool

    public init(flags: DaemonSettings, configPath: String?) {
        self.flags = flags
        self.path = configPath ?? ConfigFile.defaultPath()
        self.isExplicit = configPath != nil
    }

    public func load() throws(ConfigFileError) -> ResolvedSettings {
        let file = try ConfigFile.load(path: path, required: isExplicit)
        return ResolvedSettings(file.overridden(by: flags))
    }
}
