import Logging

/// The settings in effect: built-in defaults, overridden by the configuration file, overridden by flags.
public struct ResolvedSettings: Sendable, Equatable {
    public var socket: String
    public var stateDirectory: String
    public var downloadsDirectory: String
    public var maxConcurrent: Int
    public var logLevel: Logger.Level
    /// nil: never exit for idleness.
    public var exitWhenIdle: Double?
    public var checkpointInterval: Double
    public var maxPendingOutput: Int
    public var clientTimeout: Double

    public static let defaultMaxConcurrent = 6
    public static let defaultLogLevel = Logger.Level.info
    public static let defaultCheckpointInterval = 1.0
    public static let defaultMaxPendingOutput = 8 << 20
    public static let defaultClientTimeout = 60.0

    public init(_ s: DaemonSettings) {
        socket = s.socket ?? DefaultPaths.socketPath()
        stateDirectory = s.stateDirectory ?? DefaultPaths.stateDirectory()
        downloadsDirectory = s.downloadsDirectory ?? DefaultPaths.downloadsDirectory()
        maxConcurrent = s.maxConcurrent ?? Self.defaultMaxConcurrent
        logLevel = s.logLevel ?? Self.defaultLogLevel
        exitWhenIdle = s.exitWhenIdle.flatMap { $0 > 0 ? $0 : nil }
        checkpointInterval = s.checkpointInterval ?? Self.defaultCheckpointInterval
        maxPendingOutput = s.maxPendingOutput ?? Self.defaultMaxPendingOutput
        clientTimeout = s.clientTimeout ?? Self.defaultClientTimeout
    }

    public var daemonConfiguration: DaemonConfiguration {
        var config = DaemonConfiguration(socketPath: socket, stateDirectory: stateDirectory,
                                         downloadsDirectory: downloadsDirectory, maxConcurrent: maxConcurrent)
        config.checkpointInterval = checkpointInterval
        config.maxPendingOutputBytes = maxPendingOutput
        config.clientTimeout = clientTimeout
        return config
    }

    /// The same values as settings (exit-when-idle 0 for never).
    public var asSettings: DaemonSettings {
        var s = DaemonSettings()
        s.socket = socket
        s.stateDirectory = stateDirectory
        s.downloadsDirectory = downloadsDirectory
        s.maxConcurrent = maxConcurrent
        s.logLevel = logLevel
        s.exitWhenIdle = exitWhenIdle ?? 0
        s.checkpointInterval = checkpointInterval
        s.maxPendingOutput = maxPendingOutput
        s.clientTimeout = clientTimeout
        return s
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
