import HalfTunesKit

/// Human-readable descriptions of tasks and events.
enum TaskText {
    /// "Task 7 queued: https://… → /path", "Task 8 queued: PUT /path → https://…", "Task 9 queued: GET https://…".
    static func headline(_ task: TaskInfo) -> String {
        switch task.kind {
        case TaskKind.upload.rawValue:
            return "Task \(task.id) \(task.state.rawValue): \(task.method ?? "PUT") \(task.file ?? "?") → \(task.url)"
        case TaskKind.data.rawValue:
            return "Task \(task.id) \(task.state.rawValue): \(task.method ?? "GET") \(task.url)"
        default:
            return "Task \(task.id) \(task.state.rawValue): \(task.url) → \(task.location ?? task.destination)"
        }
    }

    static func isUpload(_ task: TaskInfo) -> Bool { task.kind == TaskKind.upload.rawValue }

    /// Progress so far: "45.3% of 12.4 MB", "3.1 MB of unknown size", or "12.4 MB" when complete; an upload's
    /// counts the bytes sent ("sent 45.3% of 12.4 MB").
    static func progress(_ task: TaskInfo) -> String {
        if isUpload(task) {
            if task.state == .completed { return "sent " + Formatting.bytes(task.bytesExpectedToSend ?? task.bytesSent ?? 0) }
            return "sent " + Formatting.progress(received: task.bytesSent ?? 0, expected: task.bytesExpectedToSend)
        }
        if task.state == .completed { return Formatting.bytes(task.bytesReceived) }
        return Formatting.progress(received: task.bytesReceived, expected: task.bytesExpected)
    }

    /// `list`'s PROGRESS, SIZE and DESTINATION: a download's file; "PUT → <url>" (the bytes sent) for an
    /// upload; "GET <url>" (the bytes received) for a data task.
    static func listColumns(_ task: TaskInfo) -> (progress: String, size: String, target: String) {
        let upload = isUpload(task)
        let done = upload ? (task.state == .completed ? task.bytesExpectedToSend ?? 0 : task.bytesSent ?? 0) : task.bytesReceived
        let total = upload ? task.bytesExpectedToSend : task.bytesExpected
        let progress = Formatting.percent(done, of: total) ?? Formatting.bytes(done)
        let size = total.map(Formatting.bytes) ?? "?"
        switch task.kind {
        case TaskKind.upload.rawValue: return (progress, size, "\(task.method ?? "PUT") → \(task.url)")
        case TaskKind.data.rawValue: return (progress, size, "\(task.method ?? "GET") \(task.url)")
        default: return (progress, size, task.location ?? task.destination)
        }
    }

    /// `show`'s lines for an upload or data task: method, file, bytes sent or received, the response.
    static func exchangeFields(_ task: TaskInfo) -> [(String, String)] {
        var fields: [(String, String)] = [("Method", task.method ?? "?")]
        if isUpload(task) {
            fields.append(("File", task.file ?? "?"))
            let expected = task.bytesExpectedToSend.map(Formatting.bytes) ?? "unknown size"
            let sent = task.bytesSent ?? (task.state == .completed ? task.bytesExpectedToSend ?? 0 : 0)
            fields.append(("Sent", "\(Formatting.bytes(sent)) of \(expected)"
                + (Formatting.percent(sent, of: task.bytesExpectedToSend).map { " (\($0))" } ?? "")
                + (task.state.isTerminal ? "" : "; every attempt (and a restart) sends from byte 0")))
        } else {
            fields.append(("Received", Formatting.progress(received: task.bytesReceived, expected: task.bytesExpected)))
        }
        if let response = task.response {
            fields.append(("Response", "HTTP \(statusLine(response))"))
            if let preview = bodyPreview(response) { fields.append(("Response body", String(preview.dropFirst(6)))) }
        }
        return fields
    }

    /// "201 Created, 12 B" (the status and the body's length).
    static func statusLine(_ response: TaskResponse) -> String {
        let reason = HTTPStatusText.reasonPhrase(response.status)
        var text = "\(response.status)" + (reason.isEmpty ? "" : " \(reason)")
        text += ", \(Formatting.bytes(response.bodyBytes)) body" + (response.truncated ? " (truncated)" : "")
        return text
    }

    /// The beginning of a response body as text (at most `limit` characters on one line), when it is text;
    /// nil when there is no body.
    static func bodyPreview(_ response: TaskResponse, limit: Int = 200) -> String? {
        guard let bytes = response.bodyBytesDecoded, !bytes.isEmpty else { return nil }
        let text = String(decoding: bytes.prefix(limit * 4), as: UTF8.self)
        let printable = text.allSatisfy { !$0.isASCII || $0 == "\n" || $0 == "\t" || ($0.asciiValue ?? 0) >= 0x20 }
        guard printable, !text.contains("\u{FFFD}") else { return "Body: \(Formatting.bytes(Int64(bytes.count))) of binary data" }
        let oneLine = text.split(whereSeparator: \.isNewline).joined(separator: " ⏎ ")
        let cut = oneLine.count > limit ? String(oneLine.prefix(limit)) + "…" : oneLine
        return "Body: " + cut
    }

    /// What the task is doing, and why it is not running when it is not.
    static func explanation(_ task: TaskInfo, now: Double = Timestamp.now()) -> String {
        switch task.state {
        case .running:
            switch task.phase {
            case .verifying?: return "running, every byte received; verifying its checksum"
            case .publishing?: return "running, every byte received; moving it into place"
            case nil: return "running, \(progress(task))"
            }
        case .queued:
            var text = "queued: " + (task.queuePosition.map { "position \($0) in the queue" } ?? "waiting for a transfer slot")
            if task.priority != .normal { text += " (\(task.priority.rawValue) priority)" }
            if let hold = task.hold { text += "; \(hold.message)" }
            return text
        case .waiting:
            if let reason = task.waitingReason, task.nextAttemptAt == nil, TaskErrorCode.conditions.contains(reason.code) {
                return "waiting for the network or power conditions: \(errorText(reason)); it continues by itself when "
                    + "they allow (see `halftunesctl status`)"
            }
            var text = "waiting"
            if let reason = task.waitingReason { text += " after a transient failure: \(errorText(reason))" }
            return text + "; " + retryText(task, now: now) + "; `halftunesctl resume \(task.id)` retries at once"
        case .suspended:
            return "paused; `halftunesctl resume \(task.id)` to continue"
        case .completed:
            if let response = task.response, task.kind != TaskKind.download.rawValue {
                return "completed: HTTP \(statusLine(response))"
            }
            return "completed: \(task.location ?? task.destination)"
        case .failed:
            return "failed: \(task.error.map(errorText) ?? "no reason recorded")"
        case .canceled:
            return "canceled"
        }
    }

    /// When a waiting task tries again: "retrying in 12s, attempt 3".
    static func retryText(_ task: TaskInfo, now: Double) -> String {
        let when: String
        if let next = task.nextAttemptAt, let at = Formatting.parseTimestamp(next) {
            when = at - now >= 0.5 ? "retrying \(Formatting.relative(at, now: now))" : "retrying now"
        } else {
            when = "retrying soon"
        }
        return "\(when), attempt \(task.attempts + 1)"
    }

    /// The STATE column of `list`: a waiting task says why and when, "waiting (serverBusy, in 12s)".
    static func shortState(_ task: TaskInfo, now: Double = Timestamp.now()) -> String {
        guard task.state == .waiting else { return task.state.rawValue }
        var detail = task.waitingReason.map { [$0.code] } ?? []
        if let next = task.nextAttemptAt, let at = Formatting.parseTimestamp(next) {
            detail.append(Formatting.relative(at, now: now))
        }
        return detail.isEmpty ? "waiting" : "waiting (\(detail.joined(separator: ", ")))"
    }

    /// "message (code, HTTP 404)".
    static func errorText(_ error: TaskError) -> String {
        let http = error.httpStatus.map { ", HTTP \($0)" } ?? ""
        return "\(error.message) (\(error.code)\(http))"
    }

    /// One progress line: "  7 [=====>    ]  45.3% of 12.4 MB  3.2 MB/s  ETA 12s  name".
    static func progressLine(_ task: TaskInfo, bytesPerSecond: Double?, width: Int) -> String {
        let done = isUpload(task) ? task.bytesSent ?? 0 : task.bytesReceived
        let total = isUpload(task) ? task.bytesExpectedToSend : task.bytesExpected
        let fraction = Formatting.fraction(done, of: total)
        var text = "\(task.id) \(Formatting.progressBar(fraction: fraction, width: max(10, min(30, width / 4)))) "
        switch task.state {
        case .running:
            text += progress(task)
            if let rate = bytesPerSecond {
                text += "  \(Formatting.rate(rate))"
                if let eta = Formatting.eta(received: done, expected: total, bytesPerSecond: rate) { text += "  ETA \(eta)" }
            }
        default:
            text += "\(progress(task))  \(explanation(task))"
        }
        return text + "  " + (task.description ?? lastComponent(isUpload(task) ? task.file ?? task.url : task.destination))
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
        case let .didChangeDestination(destination, suggested):
            return "will be saved as \(destination)" + (suggested.map { " (the server suggested \($0))" } ?? "")
        case let .didComplete(error, response):
            let http = response.map { " (HTTP \(statusLine($0)))" } ?? ""
            return (error.map(errorText) ?? "success") + http
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
