import HalfTunesKit

/// Human-readable descriptions of tasks and events.
enum TaskText {
    /// "Task 7 queued: https://… → /path".
    static func headline(_ task: TaskInfo) -> String {
        "Task \(task.id) \(task.state.rawValue): \(task.url) → \(task.location ?? task.destination)"
    }

    /// Progress so far: "45.3% of 12.4 MB", "3.1 MB of unknown size", or "12.4 MB" when complete.
    static func progress(_ task: TaskInfo) -> String {
        if task.state == .completed { return Formatting.bytes(task.bytesReceived) }
        return Formatting.progress(received: task.bytesReceived, expected: task.bytesExpected)
    }

    /// What the task is doing, and why it is not running when it is not.
    static func explanation(_ task: TaskInfo, now: Double = Timestamp.now()) -> String {
        switch task.state {
        case .running:
            return "running, \(progress(task))"
        case .queued:
            var text = "queued: " + (task.queuePosition.map { "position \($0) in the queue" } ?? "waiting for a transfer slot")
            if task.priority != .normal { text += " (\(task.priority.rawValue) priority)" }
            if let hold = task.hold { text += "; \(hold.message)" }
            return text
        case .waiting:
            var text = "waiting"
            if let reason = task.waitingReason { text += ": \(reason.message)" }
            if let next = task.nextAttemptAt {
                let when = Formatting.parseTimestamp(next).map { " (\(Formatting.relative($0, now: now)))" } ?? ""
                text += "; next attempt at \(next)\(when)"
            }
            return text
        case .suspended:
            return "paused; `halftunesctl resume \(task.id)` to continue"
        case .completed:
            return "completed: \(task.location ?? task.destination)"
        case .failed:
            return "failed: \(task.error.map(errorText) ?? "no reason recorded")"
        case .canceled:
            return "canceled"
        }
    }

    /// "message (code, HTTP 404)".
    static func errorText(_ error: TaskError) -> String {
        let http = error.httpStatus.map { ", HTTP \($0)" } ?? ""
        return "\(error.message) (\(error.code)\(http))"
    }

    /// One progress line: "  7 [=====>    ]  45.3% of 12.4 MB  3.2 MB/s  ETA 12s  name".
    static func progressLine(_ task: TaskInfo, bytesPerSecond: Double?, width: Int) -> String {
        let fraction = Formatting.fraction(task.bytesReceived, of: task.bytesExpected)
        var text = "\(task.id) \(Formatting.progressBar(fraction: fraction, width: max(10, min(30, width / 4)))) "
        switch task.state {
        case .running:
            text += progress(task)
            if let rate = bytesPerSecond {
                text += "  \(Formatting.rate(rate))"
                if let eta = Formatting.eta(received: task.bytesReceived, expected: task.bytesExpected,
                                            bytesPerSecond: rate) { text += "  ETA \(eta)" }
            }
        default:
            text += "\(progress(task))  \(explanation(task))"
        }
        return text + "  " + (task.description ?? lastComponent(task.destination))
    }

    /// One line for an event: "#12 task 7 stateChanged: running (was queued)".
    static func eventLine(_ event: Event) -> String {
        if case .didFinishEvents = event.payload { return "— replay done —" }
        var text = event.seq.map { "#\($0) " } ?? ""
        if !event.time.isEmpty { text += "\(event.time) " }
        if let task = event.task { text += "task \(task) " }
        text += "\(event.type)"
        let detail = eventDetail(event.payload)
        return detail.isEmpty ? text : "\(text): \(detail)"
    }

    static func eventDetail(_ payload: EventPayload) -> String {
        switch payload {
        case let .stateChanged(state, previous, reason):
            var text = state.rawValue
            if let previous { text += " (was \(previous.rawValue))" }
            if let reason { text += " — \(errorText(reason))" }
            return text
        case let .didWriteData(_, total, expected):
            return Formatting.progress(received: total, expected: expected)
        case let .didResumeAtOffset(offset, expected, discarded, reason):
            var text = offset == 0 ? "started from the beginning" : "resumed at \(Formatting.bytes(offset))"
            if let expected { text += " of \(Formatting.bytes(expected))" }
            if let discarded, discarded > 0 { text += ", discarded \(Formatting.bytes(discarded)) of partial data" }
            if let reason { text += " (\(reason))" }
            return text
        case let .didSendBodyData(_, total, expected):
            return "sent " + Formatting.progress(received: total, expected: expected)
        case let .didFinishDownloading(location):
            return location
        case let .didComplete(error, _):
            return error.map(errorText) ?? "success"
        case let .didFinishEvents(through):
            return "through #\(through)"
        case .didBecomeInvalid:
            return "the session is invalidated"
        }
    }

    static func lastComponent(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }
}
