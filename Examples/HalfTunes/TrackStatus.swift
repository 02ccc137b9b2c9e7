// How each track stands, from the daemon's view of its task (the app's own state only maps tracks to tasks).
import Foundation
import HalfTunesKit

enum TrackStatus {
    /// The session's tasks by id (one call for the whole list).
    static func tasks(of session: BackgroundSession) throws -> [Int64: TaskInfo] {
        Dictionary(try session.client.tasks(session: session.identifier).map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// "downloaded", "45.3% of 1.2 MB", "paused at 45.3%", "queued", … or "" when never downloaded.
    static func text(_ record: DownloadRecord?, tasks: [Int64: TaskInfo]) -> String {
        guard let record else { return "" }
        if record.resumeData != nil { return "paused" }
        guard let id = record.taskID, let info = tasks[id] else { return record.file != nil ? "downloaded" : "" }
        switch info.state {
        case .completed: return "downloaded"
        case .running: return progress(info)
        case .queued: return "queued"
        case .suspended: return "suspended"
        case .waiting: return "waiting (\(info.waitingReason?.code ?? "retry"))"
        case .failed: return "failed: \(info.error?.message ?? "unknown error")"
        case .canceled: return "canceled"
        }
    }

    /// Whether the track's task is still under way (queued, running, waiting to retry, or suspended).
    static func isActive(_ record: DownloadRecord?, tasks: [Int64: TaskInfo]) -> Bool {
        guard let id = record?.taskID, let info = tasks[id] else { return false }
        return !info.state.isTerminal
    }

    /// The tutorial's progress label: "45.3% of 1.2 MB".
    static func progress(_ info: TaskInfo) -> String {
        progress(received: info.bytesReceived, expected: info.bytesExpected)
    }

    static func progress(received: Int64, expected: Int64?) -> String {
        guard let expected, expected > 0 else { return "\(size(received))" }
        return String(format: "%.1f%% of %@", Double(received) / Double(expected) * 100, size(expected))
    }

    /// "1.2 MB" (decimal units, as ByteCountFormatter's file style).
    static func size(_ bytes: Int64) -> String {
        let units = ["bytes", "KB", "MB", "GB"]
        var value = Double(bytes), unit = 0
        while value >= 1000 && unit < units.count - 1 { value /= 1000; unit += 1 }
        return unit == 0 ? "\(bytes) bytes" : String(format: "%.1f %@", value, units[unit])
    }

    /// Where a finished preview is: what the completion said, else the task's location.
    static func file(_ record: DownloadRecord?, tasks: [Int64: TaskInfo]) -> String? {
        if let file = record?.file { return file }
        guard let id = record?.taskID, let info = tasks[id], info.state == .completed else { return nil }
        return info.location
    }
}
