// The end of an attempt as an input of the core's state: `AttemptVerdict` decides, the state carries it out.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// Every kind ends here, as `AttemptVerdict` decides: a download's durable length is recorded whatever
    /// happened; a complete download goes on to verification and publishing (`beginCompletion`); a 2xx response
    /// completes an upload or data task with it; a permanent failure fails the task (with the response when one
    /// arrived); a transient one makes it wait and retry (with jitter), a download from its durable offset and
    /// anything else from byte 0. Then the freed slot goes to the next task.
    mutating func attemptEnded(_ id: Int64, _ outcome: AttemptOutcome, jitterSample: Double, limits: SlotLimits,
                               now: Double, into actions: inout [Action]) {
        proxies.attemptEnded(id) // its clients were released before its end was reported
        guard var t = tasks[id] else {
            grantSlots(limits, now: now, into: &actions) // a task held for one of its proxies may start
            return
        }
        let kind = TaskKind(rawValue: t.record.kind) ?? .download
        let verdict = AttemptVerdict.of(outcome, kind: kind, stillRunning: !shuttingDown && t.machine.state == .running,
                                        jitterSample: jitterSample)
        t.attemptInFlight = false
        if let durable = verdict.durable {
            t.record.durableRanges = durable
            if t.discardPartialWhenStopped {
                actions.append(.removePartial(path: t.record.partialPath))
                t.record.durableRanges = ByteRanges()
            }
        }
        t.discardPartialWhenStopped = false
        let row: TaskRecord? = if case .record = verdict.next { t.record.written() } else { nil }
        tasks[id] = t
        switch verdict.next {
        case .record:
            if let row { actions.append(.journal(row, [])) }
            evict(id)
        case .beginCompletion(let total):
            beginCompletion(id, total: total, now: now, into: &actions)
        case .complete(let response):
            let upload = kind == .upload
            if upload, let total = t.bytesExpectedToSend { tasks[id]?.bytesSent = total }
            let sent = tasks[id]?.bytesSent
            _ = try? apply(.completed, to: id, update: { record in
                record.response = response
                if upload, let sent { record.bytesDurable = sent } // an upload's bytes sent, kept with the task
            }, now: now, into: &actions)
        case let .fail(input, keepResponse):
            _ = try? apply(input, to: id, update: { record in
                if let keepResponse { record.response = keepResponse }
            }, now: now, into: &actions)
        }
        invalidationDone(t.record.session, into: &actions)
        grantSlots(limits, now: now, into: &actions)
    }
}
