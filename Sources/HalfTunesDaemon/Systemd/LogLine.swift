import Logging
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// The daemon-wide log level, shared by every log handler so SIGHUP can change it at run time.
public final class LogLevelControl: Sendable {
    private let box: NIOLockedValueBox<Logger.Level>

    public init(_ level: Logger.Level) { box = NIOLockedValueBox(level) }

    public var level: Logger.Level {
        get { box.withLockedValue { $0 } }
        set { box.withLockedValue { $0 = newValue } }
    }
}

/// What the daemon's log handlers share: level handling, metadata merging and line formatting.
enum LogLine {
    /// syslog(3) priorities, as journald and `<N>` stderr prefixes use them.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    /// The handler's metadata, then the provider's, then the call's (later ones win).
    static func merge(_ handler: Logger.Metadata, _ provider: Logger.MetadataProvider?,
                      _ call: Logger.Metadata?) -> Logger.Metadata {
        var merged = handler
        if let provided = provider?.get(), !provided.isEmpty { merged.merge(provided) { _, new in new } }
        if let call, !call.isEmpty { merged.merge(call) { _, new in new } }
        return merged
    }

    /// "message key=value key=value" with keys sorted; values with spaces are quoted.
    static func text(_ message: Logger.Message, _ metadata: Logger.Metadata) -> String {
        guard !metadata.isEmpty else { return message.description }
        let pairs = metadata.sorted { $0.key < $1.key }.map { key, value -> String in
            let v = value.description
            return v.contains(where: { $0 == " " || $0 == "\t" }) || v.isEmpty ? "\(key)=\"\(v)\"" : "\(key)=\(v)"
        }
        return message.description + " " + pairs.joined(separator: " ")
    }

    /// Writes all of `text` to stderr (never through buffered stdio, so nothing waits in a buffer).
    static func writeToStderr(_ text: String) {
        var bytes = Array(text.utf8)
        if bytes.last != UInt8(ascii: "\n") { bytes.append(UInt8(ascii: "\n")) }
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    /// `<N>` before every line of `text`, as journald and syslog-aware readers of stderr expect.
    static func prefixed(_ text: String, priority: Int) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { "<\(priority)>\($0)" }.joined(separator: "\n")
    }
}

/// Plain lines on stderr: on a terminal "time level message key=value", otherwise "<N>message key=value"
/// (a syslog priority prefix that journald and syslog understand; they add the time themselves).
struct StderrLogHandler: LogHandler {
    let control: LogLevelControl
    let isTerminal: Bool
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    private var ownLevel: Logger.Level?

    init(control: LogLevelControl, isTerminal: Bool, metadataProvider: Logger.MetadataProvider?) {
        self.control = control
        self.isTerminal = isTerminal
        self.metadataProvider = metadataProvider
    }

    var logLevel: Logger.Level {
        get { ownLevel ?? control.level }
        set { ownLevel = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let text = LogLine.text(event.message, LogLine.merge(metadata, metadataProvider, event.metadata))
        if isTerminal {
            let level = event.level.rawValue
            LogLine.writeToStderr("\(Self.timestamp()) \(level)\(String(repeating: " ", count: max(1, 9 - level.count)))\(text)")
        } else {
            LogLine.writeToStderr(LogLine.prefixed(text, priority: LogLine.priority(event.level)))
        }
    }

    /// Local time, "2025-01-31 12:34:56.789".
    static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = ts.tv_sec
        var parts = tm()
        localtime_r(&t, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let millis = Int(ts.tv_nsec / 1_000_000)
        let ms = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(ms)"
    }
}
