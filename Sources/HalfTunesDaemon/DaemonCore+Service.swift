// What the service manager asks of the core: idleness (exit-when-idle), the watchdog's heartbeat, the STATUS= line.
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Nothing is pending: no task is queued, running or waiting to retry, no transfer is still stopping
    /// and no finished file is being moved into place. (Suspended tasks do not count.)
    func isIdle() -> Bool {
        !state.tasks.anyBusy   // kept by TaskTable as tasks change
    }

    /// Answers as soon as the actor gets to it: the watchdog's proof that the core is not stuck.
    func heartbeat() {}

    /// The status line for the service manager: "3 running, 2 queued, 1 waiting, 12.4 MB/s".
    func serviceStatusLine() -> String {
        let s = status()
        var parts = ["\(s.tasks[TaskState.running.rawValue] ?? 0) running",
                     "\(s.tasks[TaskState.queued.rawValue] ?? 0) queued"]
        if let waiting = s.tasks[TaskState.waiting.rawValue], waiting > 0 { parts.append("\(waiting) waiting") }
        parts.append(Self.formatRate(s.downloadRate))
        return parts.joined(separator: ", ")
    }

    /// "0 B/s", "950 B/s", "12.4 MB/s" (powers of 1000, one decimal).
    static func formatRate(_ bytesPerSecond: Double) -> String {
        let units = ["B/s", "kB/s", "MB/s", "GB/s", "TB/s"]
        var value = max(0, bytesPerSecond)
        var unit = 0
        while value >= 999.95 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        if unit == 0 { return "\(Int(value.rounded())) \(units[0])" }
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) \(units[unit])"
    }
}
