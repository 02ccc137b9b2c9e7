import CSystemd
import Logging
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Tells the service manager how the daemon is doing (sd_notify): READY, STATUS, RELOADING, STOPPING and
/// WATCHDOG. Without `$NOTIFY_SOCKET` every call is a cheap no-op.
final class ServiceNotifier: Sendable {
    let isEnabled: Bool
    private let logger: Logger
    private let lastStatus = NIOLockedValueBox<String?>(nil)
    private let reportedFailure = NIOLockedValueBox(false)

    init(environment: [String: String], logger: Logger) {
        isEnabled = !(environment["NOTIFY_SOCKET"] ?? "").isEmpty
        self.logger = logger
    }

    /// Start-up is complete: the journal is replayed and the socket accepts clients.
    func ready(status: String) { send("READY=1\nSTATUS=\(status)", remembering: status) }

    /// A reload begins (the manager waits for the next READY=1).
    func reloading() {
        send("RELOADING=1\nMONOTONIC_USEC=\(Self.monotonicMicroseconds())\nSTATUS=Reloading the configuration",
             remembering: "Reloading the configuration")
    }

    func stopping(status: String) { send("STOPPING=1\nSTATUS=\(status)", remembering: status) }

    /// Sends STATUS= only when the text changed since the last one sent.
    func status(_ text: String) {
        let changed = lastStatus.withLockedValue { last in
            if last == text { return false }
            last = text
            return true
        }
        if changed { send("STATUS=\(text)", remembering: nil) }
    }

    func watchdog() { send("WATCHDOG=1", remembering: nil) }

    private func send(_ state: String, remembering status: String?) {
        guard isEnabled else { return }
        if let status { lastStatus.withLockedValue { $0 = status } }
        let result = sd_notify(0, state)
        if result < 0 {
            let first = reportedFailure.withLockedValue { reported in defer { reported = true }; return !reported }
            if first {
                logger.warning("cannot notify the service manager: \(String(cString: strerror(-result)))",
                               metadata: ["message": "\(state.split(separator: "\n").first ?? "")"])
            }
        }
    }

    /// The watchdog interval the manager asks for (WatchdogSec=, via $WATCHDOG_USEC for this process), if any.
    static func watchdogInterval() -> Double? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return Double(usec) / 1_000_000
    }

    /// CLOCK_MONOTONIC in microseconds, as RELOADING=1 wants it in MONOTONIC_USEC=.
    static func monotonicMicroseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
    }
}
