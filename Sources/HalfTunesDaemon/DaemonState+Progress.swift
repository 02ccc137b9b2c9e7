// A running attempt's progress as inputs of the core's state: the response head, bytes received and sent.
import Foundation
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// A download's response was accepted: its validators, length and final URL join the task's row. The row
    /// is journaled now only with a `didResumeAtOffset` to tell (a fresh start's head reaches the journal with
    /// the first checkpoint, or with the row when the attempt ends).
    /// A download the client named no file for takes its name from this first response: at once when it is the
    /// name reserved at create, else once the runner made it a free path (`chooseResponseName`, answered
    /// `responseNamed`; its row follows the started one's).
    mutating func responseStarted(_ id: Int64, _ start: ResponseStart, into actions: inout [Action]) {
        if tasks[id]?.attemptInFlight == true, let name = responseName(id, start) {
            if name.candidate == name.current {
                responseNamed(id, destination: name.current, suggested: name.suggested, into: &actions)
            } else {
                actions.append(.chooseResponseName(id, candidate: name.candidate, suggested: name.suggested,
                                                   reserved: name.current))
            }
        }
        guard var t = tasks[id], t.attemptInFlight else { return }
        t.bytesReceived = start.keptBytes // a sum, like the progress totals that follow
        t.record.etag = start.validators.etag
        t.record.lastModified = start.validators.lastModified
        t.record.bytesExpected = start.expectedTotal
        t.record.currentURL = start.finalURL
        // A response from byte 0 that discarded kept bytes comes after the file was truncated: nothing of the
        // version before is durable, and the row never pairs its ranges with this version's validators.
        if start.offset == 0, start.discardedBytes > 0 { t.record.durableRanges = ByteRanges() }
        let restarted = start.discardedBytes > 0 || start.reason != nil
        let row: TaskRecord? = restarted || start.keptBytes > 0 ? t.record.written() : nil
        tasks[id] = t
        if let row, restarted {
            actions.append(.journal(row, [.didResumeAtOffset(offset: 0, expectedTotalBytes: start.expectedTotal,
                                                             discardedBytes: start.discardedBytes, reason: start.reason)]))
        } else if let row {
            actions.append(.journal(row, [.didResumeAtOffset(offset: start.keptBytes, expectedTotalBytes: start.expectedTotal,
                                                             discardedBytes: nil, reason: nil)]))
        }
    }

    /// Response body bytes arrived. A download's are kept, so they count as progress against the retry budget
    /// and are told live (`didWriteData`); an upload's or data task's response is counted and reported with its
    /// completion.
    mutating func received(_ id: Int64, delta: Int64, total: Int64, expected: Int64?, now: Double,
                           into actions: inout [Action]) {
        guard var t = tasks[id], t.attemptInFlight else { return }
        t.bytesReceived = total
        guard t.record.kind == TaskKind.download.rawValue else {
            if let expected { t.record.bytesExpected = expected }
            tasks[id] = t
            return
        }
        if delta > 0, t.machine.consecutiveFailures > 0 { _ = try? t.machine.handle(.madeProgress, now: now) }
        tasks[id] = t
        guard t.machine.state == .running, delta > 0 else { return }
        actions.append(.deliver(session: t.record.session, task: id,
                                .didWriteData(bytesWritten: delta, totalBytesWritten: total,
                                              totalBytesExpectedToWrite: expected ?? t.record.bytesExpected)))
    }

    /// A download's bytes in `durable` were fsynced: they are the task's durable ranges from now on (every row
    /// written after this carries them), and they are journaled. Nothing when they are what the row has.
    mutating func checkpointed(_ id: Int64, _ durable: ByteRanges, into actions: inout [Action]) {
        guard var t = tasks[id], t.attemptInFlight, t.record.kind == TaskKind.download.rawValue,
              durable != t.record.durableRanges else { return }
        t.record.durableRanges = durable
        tasks[id] = t
        let head = t.record.currentURL.map {
            CheckpointHead(etag: t.record.etag, lastModified: t.record.lastModified,
                                   bytesExpected: t.record.bytesExpected, currentURL: $0)
        }
        actions.append(.checkpoint(id, durable: durable, head: head))
    }

    /// An upload's file was opened (`bytes` to send) or part of it was sent (told live: `didSendBodyData`).
    mutating func sent(_ id: Int64, delta: Int64, total: Int64, expected: Int64?, into actions: inout [Action]) {
        guard var t = tasks[id], t.attemptInFlight else { return }
        t.bytesSent = total
        if let expected { t.bytesExpectedToSend = expected }
        tasks[id] = t
        guard t.machine.state == .running, delta > 0 else { return }
        actions.append(.deliver(session: t.record.session, task: id,
                                .didSendBodyData(bytesSent: delta, totalBytesSent: total,
                                                 totalBytesExpectedToSend: expected ?? t.bytesExpectedToSend)))
    }

    /// `responseNamed`: the row takes the name (journaled, with `didChangeDestination` when the path is not the one
    /// reserved at create) and its suggested filename; a later response renames nothing.
    mutating func responseNamed(_ id: Int64, destination: String, suggested: String, into actions: inout [Action]) {
        guard var t = tasks[id], t.record.nameFromResponse, t.attemptInFlight else { return }
        t.record.nameFromResponse = false // settled: a later response does not rename it
        t.record.suggestedFilename = suggested
        let changed = destination != t.record.destination
        t.record.destination = destination
        let row = t.record.written()
        tasks[id] = t // the reserved destinations follow
        actions.append(.journal(row, changed ? [.didChangeDestination(destination: destination,
                                                                         suggestedFilename: suggested)] : []))
    }

    /// For a download the client named no file for, the name its first response suggests — Content-Disposition's
    /// filename, else the last path segment of the URL after redirects — and the path it would take in the same
    /// directory (`candidate`; the runner makes it a free one). nil when the task's name is settled.
    func responseName(_ id: Int64, _ start: ResponseStart) -> (candidate: String, suggested: String, current: String)? {
        guard let t = tasks[id], t.record.nameFromResponse else { return nil }
        let current = t.record.destination
        let fromURL = URL(string: start.finalURL).map(Destination.suggestedName) ?? (current as NSString).lastPathComponent
        let suggested = start.contentDisposition.flatMap { ContentDisposition.filename($0) } ?? fromURL
        return ((current as NSString).deletingLastPathComponent + "/" + suggested, suggested, current)
    }
}
