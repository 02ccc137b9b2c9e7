import HalfTunesCore
import HalfTunesEngine
import HalfTunesProtocol
import Logging

/// Everything the flags and the configuration file can set. Every field is optional: a value that is
/// nil was not given here, so another source (or the built-in default) decides.
public struct DaemonSettings: Sendable, Equatable {
    public var socket: String?
    /// Group (name or number) of the socket file halftunesd binds itself.
    public var socketGroup: String?
    public var stateDirectory: String?
    public var downloadsDirectory: String?
    public var maxConcurrent: Int?
    /// Transfers running at once to one host (scheme, host, port).
    public var maxConnectionsPerHost: Int?
    /// Bytes per second across all transfers; 0 = unlimited.
    public var bandwidthLimit: Int64?
    public var logLevel: Logger.Level?
    /// Seconds without clients or pending tasks after which a socket-activated daemon exits; 0 = never.
    public var exitWhenIdle: Double?
    public var checkpointInterval: Double?
    /// Free space downloads leave on their file system: `auto`, bytes or a percentage.
    public var minFreeSpace: FreeSpaceFloor?
    /// Free space the journal's calls leave on the state directory's file system (nil: `minFreeSpace`).
    public var stateMinFreeSpace: FreeSpaceFloor?
    /// Bytes each other user's partial files may hold: `unlimited`, bytes or a percentage.
    public var maxDiskPerUID: DiskLimit?
    /// Bytes the journal may hold for each other user: `unlimited`, bytes or a percentage of the state file system.
    public var maxJournalPerUID: DiskLimit?
    public var maxPendingOutput: Int?
    /// Unsent output all of one uid's connections may hold together.
    public var maxOutputPerUID: Int?
    /// Requests read and not yet answered that all of one uid's connections may hold together.
    public var maxInputPerUID: Int?
    /// Seconds a client may leave the daemon's output unread before it is disconnected.
    public var clientTimeout: Double?
    /// Control connections one uid may hold at once.
    public var maxConnectionsPerUID: Int?
    /// Unfinished tasks one session may hold.
    public var maxTasksPerSession: Int?
    /// Unacknowledged events past which a session accepts no new tasks.
    public var maxPendingEvents: Int?
    /// Sessions one uid may hold.
    public var maxSessionsPerUID: Int?
    public var maxTasksPerUID: Int?
    public var maxPendingEventsPerUID: Int?
    /// Resume-data partials one uid may keep at once.
    public var maxResumeDataPerUID: Int?
    /// PEM certificate authorities trusted besides the system's.
    public var caFile: String?
    /// `direct` or a proxy URL (checked), for every request of sessions without their own.
    public var proxy: String?
    /// Hosts that skip the proxy (a checked `no_proxy`-style list).
    public var proxyBypass: String?
    /// The netrc file (an absolute path) or `none`.
    public var netrc: String?

    public init() {}

    /// These settings with every value that `other` sets replaced by `other`'s.
    public func overridden(by other: DaemonSettings) -> DaemonSettings {
        var merged = self
        for key in SettingKey.allCases { key.copy(from: other, to: &merged) }
        return merged
    }

    /// The value of `key` as text (as it would be written in the file), or nil if unset.
    public func text(for key: SettingKey) -> String? {
        switch key {
        case .socket: return socket
        case .socketGroup: return socketGroup
        case .stateDir: return stateDirectory
        case .downloadsDir: return downloadsDirectory
        case .maxConcurrent: return maxConcurrent.map(String.init)
        case .maxConnectionsPerHost: return maxConnectionsPerHost.map(String.init)
        case .bandwidthLimit: return bandwidthLimit.map(String.init)
        case .logLevel: return logLevel?.rawValue
        case .exitWhenIdle: return exitWhenIdle.map { "\($0)" }
        case .checkpointInterval: return checkpointInterval.map { "\($0)" }
        case .minFreeSpace: return minFreeSpace?.description
        case .stateMinFreeSpace: return stateMinFreeSpace?.description
        case .maxDiskPerUID: return maxDiskPerUID?.description
        case .maxJournalPerUID: return maxJournalPerUID?.description
        case .maxPendingOutput: return maxPendingOutput.map(String.init)
        case .maxOutputPerUID: return maxOutputPerUID.map(String.init)
        case .maxInputPerUID: return maxInputPerUID.map(String.init)
        case .clientTimeout: return clientTimeout.map { "\($0)" }
        case .maxConnectionsPerUID: return maxConnectionsPerUID.map(String.init)
        case .maxTasksPerSession: return maxTasksPerSession.map(String.init)
        case .maxPendingEvents: return maxPendingEvents.map(String.init)
        case .maxSessionsPerUID: return maxSessionsPerUID.map(String.init)
        case .maxTasksPerUID: return maxTasksPerUID.map(String.init)
        case .maxPendingEventsPerUID: return maxPendingEventsPerUID.map(String.init)
        case .maxResumeDataPerUID: return maxResumeDataPerUID.map(String.init)
        case .caFile: return caFile
        case .proxy: return proxy
        case .proxyBypass: return proxyBypass
        case .netrc: return netrc
        }
    }
}

/// A setting's value could not be used; `message` completes "<key> ...".
public struct SettingValueError: Error, Sendable, Equatable {
    public var message: String
}

/// The settings, named as in the configuration file; each flag is `--` followed by the same name.
public enum SettingKey: String, CaseIterable, Sendable {
    case socket
    case socketGroup = "socket-group"
    case stateDir = "state-dir"
    case downloadsDir = "downloads-dir"
    case maxConcurrent = "max-concurrent"
    case maxConnectionsPerHost = "max-connections-per-host"
    case bandwidthLimit = "bandwidth-limit"
    case logLevel = "log-level"
    case exitWhenIdle = "exit-when-idle"
    case checkpointInterval = "checkpoint-interval"
    case minFreeSpace = "min-free-space"
    case stateMinFreeSpace = "state-min-free-space"
    case maxDiskPerUID = "max-disk-per-uid"
    case maxJournalPerUID = "max-journal-per-uid"
    case maxPendingOutput = "max-pending-output"
    case maxOutputPerUID = "max-output-per-uid"
    case maxInputPerUID = "max-input-per-uid"
    case clientTimeout = "client-timeout"
    case maxConnectionsPerUID = "max-connections-per-uid"
    case maxTasksPerSession = "max-tasks-per-session"
    case maxPendingEvents = "max-pending-events"
    case maxSessionsPerUID = "max-sessions-per-uid"
    case maxTasksPerUID = "max-tasks-per-uid"
    case maxPendingEventsPerUID = "max-pending-events-per-uid"
    case maxResumeDataPerUID = "max-resume-data-per-uid"
    case caFile = "ca-file"
    case proxy
    case proxyBypass = "proxy-bypass"
    case netrc

    public var flag: String { "--" + rawValue }

    /// Whether a changed value takes effect on SIGHUP (the others need a restart).
    public var appliesOnReload: Bool {
        switch self {
        case .logLevel, .maxConcurrent, .maxConnectionsPerHost, .bandwidthLimit, .exitWhenIdle, .proxy, .proxyBypass:
            return true
        default: return false
        }
    }

    /// Parses and checks `text` as this setting's value and stores it in `settings`.
    public func assign(_ text: String, to settings: inout DaemonSettings) throws(SettingValueError) {
        switch self {
        case .socket: settings.socket = try Self.absolutePath(text)
        case .socketGroup:
            guard SocketGroup.gid(of: text) != nil else {
                throw SettingValueError(message: "must name an existing group or be a group number (got '\(text)')\(Self.commentHint(text))")
            }
            settings.socketGroup = text
        case .stateDir: settings.stateDirectory = try Self.absolutePath(text)
        case .downloadsDir:
            let path = try Self.absolutePath(text)
            // Every user's personal directory lies below it, and a root of "/" confines nothing.
            guard Destination.normalize(path) != "/" else {
                throw SettingValueError(message: "must be a directory below /, not the root directory itself (got '\(text)')")
            }
            settings.downloadsDirectory = path
        case .maxConcurrent: settings.maxConcurrent = try Self.integer(text, in: 1...1000)
        case .maxConnectionsPerHost: settings.maxConnectionsPerHost = try Self.integer(text, in: 1...1000)
        case .bandwidthLimit:
            guard let rate = ByteRate.parse(text), ByteRate.problem(with: rate) == nil else {
                throw SettingValueError(message: "must be 0 (unlimited) or a rate of at least 1k, in bytes per second with "
                    + "an optional k, M or G suffix (powers of 1024), e.g. 512k or 2M (got '\(text)')\(Self.commentHint(text))")
            }
            settings.bandwidthLimit = rate
        case .logLevel:
            guard let level = Logger.Level(rawValue: text.lowercased()) else {
                throw SettingValueError(message: "must be one of trace, debug, info, notice, warning, error, critical (got '\(text)')")
            }
            settings.logLevel = level
        case .exitWhenIdle:
            settings.exitWhenIdle = try Self.seconds(text, allowZero: true, max: 7 * 24 * 3600)
        case .checkpointInterval:
            settings.checkpointInterval = try Self.seconds(text, allowZero: false, max: 60)
        case .minFreeSpace, .stateMinFreeSpace:
            guard let floor = FreeSpaceFloor.parse(text) else {
                throw SettingValueError(message: "must be auto (1G or 5% of the file system, whichever is less), 0 (none), a "
                    + "size with an optional k, M, G or T suffix (powers of 1024), e.g. 2G, or a percentage up to 50, "
                    + "e.g. 10% (got '\(text)')\(Self.commentHint(text))")
            }
            if self == .minFreeSpace { settings.minFreeSpace = floor } else { settings.stateMinFreeSpace = floor }
        case .maxDiskPerUID, .maxJournalPerUID:
            let (files, example) = self == .maxDiskPerUID ? ("downloads", "20%") : ("state directory's", "5%")
            guard let limit = DiskLimit.parse(text) else {
                throw SettingValueError(message: "must be unlimited, a size above 0 with an optional k, M, G or T suffix (powers "
                    + "of 1024), e.g. 50G, or a percentage of the \(files) file system up to 100, e.g. \(example) (got "
                    + "'\(text)')\(Self.commentHint(text))")
            }
            if self == .maxDiskPerUID { settings.maxDiskPerUID = limit } else { settings.maxJournalPerUID = limit }
        case .maxPendingOutput: settings.maxPendingOutput = try Self.integer(text, in: 4096...(1 << 40))
        case .maxOutputPerUID: settings.maxOutputPerUID = try Self.integer(text, in: 4096...(1 << 40))
        case .maxInputPerUID: settings.maxInputPerUID = try Self.integer(text, in: 4096...(1 << 40))
        case .clientTimeout: settings.clientTimeout = try Self.seconds(text, allowZero: false, max: 24 * 3600)
        case .maxConnectionsPerUID: settings.maxConnectionsPerUID = try Self.integer(text, in: 1...100_000)
        case .maxTasksPerSession: settings.maxTasksPerSession = try Self.integer(text, in: 1...10_000_000)
        case .maxPendingEvents: settings.maxPendingEvents = try Self.integer(text, in: 1...100_000_000)
        case .maxSessionsPerUID: settings.maxSessionsPerUID = try Self.integer(text, in: 1...1_000_000)
        case .maxTasksPerUID: settings.maxTasksPerUID = try Self.integer(text, in: 1...100_000_000)
        case .maxPendingEventsPerUID: settings.maxPendingEventsPerUID = try Self.integer(text, in: 1...1_000_000_000)
        case .maxResumeDataPerUID: settings.maxResumeDataPerUID = try Self.integer(text, in: 0...1_000_000)
        case .caFile: settings.caFile = try Self.absolutePath(text)
        case .proxy:
            do {
                let server = try ProxyRules.setting(text)
                settings.proxy = server?.url(redacted: false) ?? ProxyRules.directKeyword
            } catch {
                throw SettingValueError(message: "must be 'direct' or a proxy URL (http://[user:password@]host:port, "
                    + "socks5://host:port or socks5h://host:port): \(error.message)")
            }
        case .proxyBypass:
            do {
                settings.proxyBypass = try ProxyBypass.parse(text).text
            } catch {
                throw SettingValueError(message: "must be a list of host names, IP addresses or CIDR ranges like "
                    + "no_proxy's: \(error.message)")
            }
        case .netrc:
            settings.netrc = text == ResolvedSettings.noNetrc ? text : try Self.absolutePath(text)
        }
    }

    func copy(from source: DaemonSettings, to target: inout DaemonSettings) {
        switch self {
        case .socket: if let v = source.socket { target.socket = v }
        case .socketGroup: if let v = source.socketGroup { target.socketGroup = v }
        case .stateDir: if let v = source.stateDirectory { target.stateDirectory = v }
        case .downloadsDir: if let v = source.downloadsDirectory { target.downloadsDirectory = v }
        case .maxConcurrent: if let v = source.maxConcurrent { target.maxConcurrent = v }
        case .maxConnectionsPerHost: if let v = source.maxConnectionsPerHost { target.maxConnectionsPerHost = v }
        case .bandwidthLimit: if let v = source.bandwidthLimit { target.bandwidthLimit = v }
        case .logLevel: if let v = source.logLevel { target.logLevel = v }
        case .exitWhenIdle: if let v = source.exitWhenIdle { target.exitWhenIdle = v }
        case .checkpointInterval: if let v = source.checkpointInterval { target.checkpointInterval = v }
        case .minFreeSpace: if let v = source.minFreeSpace { target.minFreeSpace = v }
        case .stateMinFreeSpace: if let v = source.stateMinFreeSpace { target.stateMinFreeSpace = v }
        case .maxDiskPerUID: if let v = source.maxDiskPerUID { target.maxDiskPerUID = v }
        case .maxJournalPerUID: if let v = source.maxJournalPerUID { target.maxJournalPerUID = v }
        case .maxPendingOutput: if let v = source.maxPendingOutput { target.maxPendingOutput = v }
        case .maxOutputPerUID: if let v = source.maxOutputPerUID { target.maxOutputPerUID = v }
        case .maxInputPerUID: if let v = source.maxInputPerUID { target.maxInputPerUID = v }
        case .clientTimeout: if let v = source.clientTimeout { target.clientTimeout = v }
        case .maxConnectionsPerUID: if let v = source.maxConnectionsPerUID { target.maxConnectionsPerUID = v }
        case .maxTasksPerSession: if let v = source.maxTasksPerSession { target.maxTasksPerSession = v }
        case .maxPendingEvents: if let v = source.maxPendingEvents { target.maxPendingEvents = v }
        case .maxSessionsPerUID: if let v = source.maxSessionsPerUID { target.maxSessionsPerUID = v }
        case .maxTasksPerUID: if let v = source.maxTasksPerUID { target.maxTasksPerUID = v }
        case .maxPendingEventsPerUID: if let v = source.maxPendingEventsPerUID { target.maxPendingEventsPerUID = v }
        case .maxResumeDataPerUID: if let v = source.maxResumeDataPerUID { target.maxResumeDataPerUID = v }
        case .caFile: if let v = source.caFile { target.caFile = v }
        case .proxy: if let v = source.proxy { target.proxy = v }
        case .proxyBypass: if let v = source.proxyBypass { target.proxyBypass = v }
        case .netrc: if let v = source.netrc { target.netrc = v }
        }
    }

    private static func commentHint(_ text: String) -> String {
        text.contains("#") ? "; comments must be on a line of their own" : ""
    }

    private static func absolutePath(_ text: String) throws(SettingValueError) -> String {
        guard text.hasPrefix("/") else {
            throw SettingValueError(message: "must be an absolute path (got '\(text)')")
        }
        guard !text.utf8.contains(0) else { throw SettingValueError(message: "must not contain a NUL byte") }
        return text
    }

    private static func integer(_ text: String, in range: ClosedRange<Int>) throws(SettingValueError) -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw SettingValueError(message: "must be an integer from \(range.lowerBound) to \(range.upperBound) (got '\(text)')\(commentHint(text))")
        }
        return value
    }

    private static func seconds(_ text: String, allowZero: Bool, max: Double) throws(SettingValueError) -> Double {
        guard let value = Double(text), value.isFinite, allowZero ? value >= 0 : value > 0, value <= max else {
            let low = allowZero ? "from 0" : "greater than 0"
            throw SettingValueError(message: "must be a number of seconds \(low) up to \(Int(max)) (got '\(text)')\(commentHint(text))")
        }
        return value
    }
}
