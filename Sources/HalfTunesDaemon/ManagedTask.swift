// The state's values for a task and a session (ManagedTask, ManagedSession), and the runner's for an attempt in flight.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

/// One task as the daemon holds it: the journaled row, its lifecycle, and the transfer when running.
struct ManagedTask: Equatable {
    var record: TaskRecord
    /// The uid of the session's owner (fixed: a session never changes hands).
    let owner: UInt32
    var machine: TaskStateMachine
    var bytesReceived: Int64
    /// The proxy its next attempt's first request goes through (nil: direct), under its session's rules now
    /// (`ProxyUse.first`, kept current by `DaemonState` as those change): the queue holds it back while its owner's
    /// attempts already go through as many proxies as one uid may use (`uidMaxProxies`). Here, between 8-byte
    /// fields: no padding.
    var firstProxy: ProxyRef?
    /// An attempt was started and has not ended yet (the runner holds it: `DaemonCore.attempts`); a new one
    /// never starts before the old one has ended.
    var attemptInFlight = false
    /// What to do with the partial data once the transfer has stopped (after cancel).
    var discardPartialWhenStopped = false
    /// Whether its partial file may exist: false only for a task created in this run that has not started an
    /// attempt and brought no resume data's partial (`DaemonState`'s `created`), so a cancel has no file to
    /// remove; true for a restored one (a crash may have left a file its row does not know of).
    var partialMayExist = true
    /// Uploads: progress of the current attempt.
    var bytesSent: Int64?
    var bytesExpectedToSend: Int64?
    /// A `running` download whose transfer ended and which is being verified or published: it holds no
    /// transfer slot (`TaskTable.running` leaves it out).
    var completing = false
    /// A `queued` task whose `earliestBeginDate` has not come yet: it is not in the queue until then
    /// (`DaemonState.deferIfEarly`, `TaskTable.dueBegins`).
    var deferredUntil: Double?
    /// Its row is still being inserted (`task.create` submits the insert and goes on): a queued one stays out of
    /// the queue, so nothing is transferred for a task the journal may never hold, until `createsJournaled`.
    var inserting = false
    /// Whether it stays out of the queue while `queued` (waiting for its begin date or for its row).
    var outOfQueue: Bool { deferredUntil != nil || inserting }
    /// The per-host limit's key (`HostKey`).
    var hostKey: String { HostKey.of(record.url) }
    /// Whether it keeps its response body in memory while it runs, up to its `maxResponseBytes` (a data task):
    /// the per-uid budget of those counts it (`QueuePlanner.maxDataBytesPerUID`).
    var isData: Bool { record.kind == TaskKind.data.rawValue }
    /// The most its running transfer keeps in memory (a data task's body cap; 0 for the others: a download
    /// keeps nothing, an upload 64 KiB of its answer).
    var dataBytes: Int64 { isData ? Int64(ResponseLimit.data(maxBytes: record.maxResponseBytes).maxBytes) : 0 }

    var id: Int64 { record.id! }

    mutating func syncRecord(now: Double) {
        record.state = machine.state
        record.waitingReason = machine.waitingReason
        record.nextAttemptAt = machine.nextAttemptAt
        record.error = machine.error
        record.updatedAt = now
    }
}

extension ManagedTask {
    /// The task a journal row describes: the one place a task is rebuilt from its row (recovery, and a finished
    /// task read for a client). A finished data task or upload shows what it received, or sent, as journaled.
    init(row: TaskRecord, owner: UInt32) {
        let machine = TaskStateMachine(state: row.state, waitingReason: row.waitingReason,
                                       nextAttemptAt: row.nextAttemptAt, error: row.error,
                                       resourceDeadline: row.resourceDeadline)
        self.init(record: row, owner: owner, machine: machine, bytesReceived: row.bytesDurable)
        guard row.state.isTerminal else { return }
        if row.kind == TaskKind.data.rawValue || row.kind == TaskKind.upload.rawValue {
            bytesReceived = row.response?.bodyBytes ?? 0
        }
        if row.kind == TaskKind.upload.rawValue, row.state == .completed {
            bytesSent = row.bytesDurable // journaled at completion
            bytesExpectedToSend = row.bytesDurable
        }
    }
}

struct ManagedSession: Equatable {
    var record: SessionRecord
    var lastEventSeq: Int64
    /// Journaled events not acknowledged yet (kept as events are journaled and acknowledged; the caps read it).
    var pendingEvents: Int
    /// Connections subscribed to its events now (the runner holds their outboxes).
    var subscribers = 0
    /// The ticket of the latest reconfiguration taken (`sessionConfigured`). Tickets come from one serial of the
    /// state (`DaemonState.configTicketSerial`), and a session opened takes the serial as it is then: a
    /// reconfiguration of an earlier session of the same identifier (invalidated and removed meanwhile) is never
    /// taken by the new one.
    var configApplied: UInt64 = 0
    /// Its deletion was asked for (`finishInvalidation`) and its outcome (`invalidationFinished`) is not in yet:
    /// it is not asked again meanwhile.
    var deleting = false
}
