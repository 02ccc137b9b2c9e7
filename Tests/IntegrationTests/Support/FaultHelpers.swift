// Helpers for the fault tests: fast-retry sessions, waiting for a task's end, its waiting reasons and resumes.
import Foundation
import HalfTunesKit
import HalfTunesProtocol

extension HalfTunesClient {
    /// Opens `session` with fast retries (50 ms doubling to 200 ms unless `retry` says otherwise) and records
    /// its events from the start.
    func openHostileSession(_ session: String, retry: RetryPolicy = RetryPolicy(initialDelay: 0.05, maxDelay: 0.2),
                            requestTimeout: Double? = nil) throws -> EventRecorder {
        _ = try openSession(session, configuration: SessionConfiguration(requestTimeout: requestTimeout, retry: retry))
        return try EventRecorder(client: self, session: session, after: 0)
    }

    func startTask(_ url: String, session: String) throws -> TaskInfo {
        try createTask(TaskCreateParams(session: session, url: url, start: true))
    }

    /// Waits until the task is completed, failed or canceled.
    func waitForEnd(_ id: Int64, timeout: Double = 60) throws -> TaskInfo {
        try eventually("task \(id) to end", timeout: timeout) {
            let info = try self.task(id)
            return info.state.isTerminal ? info : nil
        }
    }
}

extension EventRecorder {
    /// Waits until the task's `didComplete` has been recorded, so later reads of `all` include its whole history
    /// (polling the task's state can see the end before the subscription has delivered the events).
    func waitForDidComplete(_ task: Int64, timeout: Double = 30) throws {
        try wait(for: "didComplete of task \(task)", timeout: timeout) { $0.task == task && $0.isDidComplete }
    }

    /// The reasons of the task's moves to `waiting`, in order.
    func waitingReasons(task: Int64) -> [TaskError] {
        all.compactMap { event in
            guard event.task == task, case .stateChanged(.waiting, _, let reason) = event.payload else { return nil }
            return reason
        }
    }

    /// The task's `didResumeAtOffset` events.
    func resumes(task: Int64) -> [(offset: Int64, discarded: Int64?, reason: String?)] {
        all.compactMap { event in
            guard event.task == task, case let .didResumeAtOffset(offset, _, discarded, reason) = event.payload else {
                return nil
            }
            return (offset, discarded, reason)
        }
    }
}

/// IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") of seconds since 1970.
func httpDate(_ seconds: Double) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter.string(from: Date(timeIntervalSince1970: seconds))
}

/// Runs a tool to its end; returns its exit status (its output goes nowhere).
func runTool(_ path: String, _ arguments: [String]) throws -> Int32 {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = arguments
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.run()
    p.waitUntilExit()
    return p.terminationStatus
}
