import HalfTunesKit

/// Follows one task's events until its `didComplete`: a progress bar on a terminal, a line per state
/// change otherwise, or every event as a JSON line with --json. Returns the exit status.
struct TaskFollower {
    var task: TaskInfo
    let json: Bool
    private var meter = RateMeter()
    private var live = LiveLines()
    private var location: String?
    /// Uploads and data tasks: the response their `didComplete` carried.
    private(set) var response: TaskResponse?
    private var lastDraw = 0.0
    /// State events up to the one for the state `task` had when created are history (the subscription
    /// started before the task existed): they are not announced.
    private var caughtUp = false

    init(task: TaskInfo, json: Bool) {
        self.task = task
        self.json = json
    }

    mutating func follow(_ events: EventStream) throws -> Int32 {
        defer { events.close() }
        while let event = try events.nextEvent() {
            guard event.task == task.id else { continue }
            if json { try Console.json(event) }
            if let status = handle(event.payload) { return status }
        }
        live.clear()
        Console.error("lost the connection to halftunesd while waiting for task \(task.id); it goes on in the "
            + "daemon: `halftunesctl show \(task.id)`")
        return ExitStatus.failure
    }

    /// Applies one event; returns the exit status once the task completed.
    private mutating func handle(_ payload: EventPayload) -> Int32? {
        let now = monotonicSeconds()
        switch payload {
        case let .didWriteData(_, total, expected):
            task.bytesReceived = total
            if let expected { task.bytesExpected = expected }
            meter.add(totalBytes: total, at: now)
            if now - lastDraw >= 0.2 { drawBar(now) }
        case let .didSendBodyData(_, total, expected):
            task.bytesSent = total
            if let expected { task.bytesExpectedToSend = expected }
            meter.add(totalBytes: total, at: now)
            if now - lastDraw >= 0.2 { drawBar(now) }
        case let .didResumeAtOffset(offset, expected, _, _):
            task.bytesReceived = offset
            if let expected { task.bytesExpected = expected }
            meter.reset()
            meter.add(totalBytes: offset, at: now)
            if offset > 0 || payloadDiscarded(payload) { say("Task \(task.id) \(TaskText.eventDetail(payload))") }
        case let .stateChanged(state, _, reason):
            if !caughtUp {
                caughtUp = state == task.state
                return nil
            }
            let isNews = state != task.state
            task.state = state
            task.waitingReason = state == .waiting ? reason : nil
            task.queuePosition = nil
            task.nextAttemptAt = nil
            if state != .running { meter.reset() }
            if isNews && !state.isTerminal { say("Task \(task.id) \(stateText(state, reason: reason))") }
        case let .didFinishDownloading(path):
            location = path
        case let .didChangeDestination(destination, _):
            task.destination = destination
            say("Task \(task.id) \(TaskText.eventDetail(payload))")
        case let .didComplete(error, response):
            live.clear()
            self.response = response
            guard let error else {
                if !json, let response {
                    Console.out("Task \(task.id) completed: HTTP \(TaskText.statusLine(response))")
                } else if !json {
                    Console.out("Task \(task.id) completed: \(location ?? task.location ?? task.destination)")
                }
                return ExitStatus.ok
            }
            if !json, let response { Console.error("task \(task.id): HTTP \(TaskText.statusLine(response))") }
            if error.code == TaskErrorCode.canceled {
                Console.error("task \(task.id) was canceled")
                return ExitStatus.canceled
            }
            Console.error("task \(task.id) failed: \(TaskText.errorText(error))")
            return ExitStatus.failure
        case .didFinishEvents, .didBecomeInvalid:
            break
        }
        return nil
    }

    private func payloadDiscarded(_ payload: EventPayload) -> Bool {
        if case let .didResumeAtOffset(_, _, discarded, _) = payload { return (discarded ?? 0) > 0 }
        return false
    }

    private func stateText(_ state: TaskState, reason: TaskError?) -> String {
        switch state {
        case .waiting: return "waiting" + (reason.map { ": \($0.message); it will retry" } ?? "")
        case .suspended: return "paused; `halftunesctl resume \(task.id)` to continue"
        default: return state.rawValue
        }
    }

    /// A line above the bar on a terminal, a plain line otherwise; nothing with --json.
    private mutating func say(_ line: String) {
        guard !json else { return }
        if Console.stdoutIsTTY {
            live.printAbove(line)
            drawBar(monotonicSeconds())
        } else {
            Console.out(line)
        }
    }

    private mutating func drawBar(_ now: Double) {
        guard !json, Console.stdoutIsTTY else { return }
        lastDraw = now
        live.draw([TaskText.progressLine(task, bytesPerSecond: meter.bytesPerSecond, width: Console.width)])
    }
}
