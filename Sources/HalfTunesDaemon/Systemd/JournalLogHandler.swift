import CSystemd
import Foundation
import Logging
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Log records sent to journald with structured fields: MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_FILE,
/// CODE_LINE, CODE_FUNC, and one HALFTUNES_<KEY> field per metadata key (so `task` becomes HALFTUNES_TASK,
/// `session` HALFTUNES_SESSION, `url` HALFTUNES_URL: `journalctl -u halftunesd HALFTUNES_TASK=7`).
/// A record journald does not take is written to stderr instead, never dropped silently.
struct JournalLogHandler: LogHandler {
    static let identifier = "halftunesd"

    let control: LogLevelControl
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    private var ownLevel: Logger.Level?

    init(control: LogLevelControl, metadataProvider: Logger.MetadataProvider?) {
        self.control = control
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
        let merged = LogLine.merge(metadata, metadataProvider, event.metadata)
        let text = LogLine.text(event.message, merged)
        let priority = LogLine.priority(event.level)
        var fields = [
            "MESSAGE=" + text,
            "PRIORITY=\(priority)",
            "SYSLOG_IDENTIFIER=" + Self.identifier,
            "CODE_FILE=" + event.file,
            "CODE_LINE=\(event.line)",
            "CODE_FUNC=" + event.function,
        ]
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            fields.append(Self.fieldName(forMetadataKey: key) + "=" + value.description)
        }
        // libsystemd drops records silently (and returns 0) when journald's socket is missing.
        let result = access(Self.journalSocket, F_OK) == 0 ? Self.send(fields) : -ENOENT
        if result < 0 {
            Self.reportFallbackOnce(reason: String(cString: strerror(-result)))
            LogLine.writeToStderr(LogLine.prefixed(text, priority: priority))
        }
    }

    static let journalSocket = "/run/systemd/journal/socket"
    private static let fellBack = NIOLockedValueBox(false)

    private static func reportFallbackOnce(reason: String) {
        let first = fellBack.withLockedValue { done in defer { done = true }; return !done }
        guard first else { return }
        LogLine.writeToStderr(LogLine.prefixed(
            "journald does not take log records (\(journalSocket): \(reason)); writing them to stderr",
            priority: LogLine.priority(.warning)))
    }

    /// HALFTUNES_ and the key in upper case with anything but A-Z and 0-9 turned into `_`
    /// (journal field names allow only those), at most 64 characters.
    static func fieldName(forMetadataKey key: String) -> String {
        let body = key.uppercased().unicodeScalars.map { scalar -> Character in
            let v = scalar.value
            return (v >= 65 && v <= 90) || (v >= 48 && v <= 57) ? Character(scalar) : "_"
        }
        return String(("HALFTUNES_" + String(body)).prefix(64))
    }

    /// One journal record through sd_journal_sendv; returns its result (a negative errno on failure).
    static func send(_ fields: [String]) -> Int32 {
        var bytes: [UInt8] = []
        var spans: [(start: Int, count: Int)] = []
        for field in fields {
            let utf8 = Array(field.utf8)
            spans.append((bytes.count, utf8.count))
            bytes += utf8
        }
        return bytes.withUnsafeMutableBytes { raw -> Int32 in
            guard let base = raw.baseAddress else { return -EINVAL }
            var vectors = spans.map { iovec(iov_base: base + $0.start, iov_len: $0.count) }
            return sd_journal_sendv(&vectors, Int32(vectors.count))
        }
    }
}

/// Chooses where the daemon's logs go and installs the swift-log backend (once per process).
public enum DaemonLogging {
    public enum Destination: String, Sendable {
        case journal, stderr
    }

    /// journald when `$JOURNAL_STREAM` names the file stderr is connected to (systemd set it up and stderr
    /// was not redirected since); otherwise stderr lines, with `<N>` priority prefixes when not a terminal.
    @discardableResult
    public static func bootstrap(control: LogLevelControl,
                                 environment: [String: String] = ProcessInfo.processInfo.environment) -> Destination {
        let destination: Destination = stderrIsJournalStream(environment["JOURNAL_STREAM"]) ? .journal : .stderr
        let isTerminal = isatty(STDERR_FILENO) == 1
        LoggingSystem.bootstrap({ (_: String, provider: Logger.MetadataProvider?) -> any LogHandler in
            switch destination {
            case .journal: return JournalLogHandler(control: control, metadataProvider: provider)
            case .stderr: return StderrLogHandler(control: control, isTerminal: isTerminal, metadataProvider: provider)
            }
        }, metadataProvider: nil)
        return destination
    }

    /// `$JOURNAL_STREAM` is "DEVICE:INODE" of the journal stream systemd connected stdout/stderr to.
    static func stderrIsJournalStream(_ value: String?) -> Bool {
        guard let value else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var st = stat()
        guard fstat(STDERR_FILENO, &st) == 0 else { return false }
        return UInt64(st.st_dev) == device && UInt64(st.st_ino) == inode
    }
}
