// task.create's admission: the state's checks of a new task (shutting down, the caps, its session taking tasks, the disk share), its lifecycle, first events and queue place.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// What one session and one uid may hold before `task.create` (or a new session) is refused (the
    /// configuration's).
    struct Caps: Equatable, Sendable {
        var maxSessionsPerUID = 1000
        var maxTasksPerSession = 10_000
        var maxTasksPerUID = 100_000
        var maxPendingEventsPerSession = 100_000
        var maxPendingEventsPerUID = 1_000_000
        /// Resume data a uid keeps or is making (`task.cancel` asking for more is refused).
        var maxResumeDataPerUID = 200
        /// How long resume data is kept before it expires with its partial file (7 days; not a setting yet).
        var resumeDataLifetime: Double = 7 * 24 * 3600
    }

    /// A new task that passed the runner's checks (its parameters, URL and destination), asking to be admitted
    /// (`admitting`).
    struct NewTask: Equatable, Sendable {
        /// Its row as the runner built it from the request: what the state decides (its state, deadline, queue
        /// place, what resume data continues) the state writes into it.
        var row: TaskRecord
        /// `start`: queued at once (else suspended, as a `URLSessionTask` is created).
        var start: Bool
        /// An upload's file length when it was created.
        var bytesExpectedToSend: Int64? = nil
        /// The owner's share of the disk (`max-disk-per-uid`, read from the runner's ledger, which follows the
        /// partial files); nil: no limit for the owner. Checked for a new download only (an upload or a data task
        /// writes no file), and not for one from resume data, whose bytes are counted already.
        var disk: DiskShare? = nil
        /// A download created from resume data (its token redeemed): what it kept, and where.
        var resume: ResumeOffer? = nil

        var session: String {
            get { row.session }
            set { row.session = newValue }
        }

        /// A download's destination: reserved from its admission on, so a later create of the batch avoids it.
        var destination: String? { row.kind == TaskKind.download.rawValue ? row.destination : nil }
    }

    /// The bytes a redeemed resume data token kept, offered to a new download (its partial moves to the new
    /// task's once admitted).
    struct ResumeOffer: Equatable, Sendable {
        /// The token, redeemed in this batch (`resumeTokenRedeemed`): admitted, it is used up. Its durable ranges,
        /// validators and partial file are what the new task continues from.
        var token: ResumeTokenRecord
        /// The token's partial file's length on disk now (nil: gone).
        var partialLength: Int64?
    }

    /// What a uid's unfinished downloads and kept resume data hold on disk, and the most they may.
    struct DiskShare: Equatable, Sendable {
        var held: Int64
        var limit: Int64
    }

    /// A new task admitted (`admitted`): its lifecycle, its queue place (nil: not queued), and its first events,
    /// to be journaled with its row (`admitted.rows` has the row; `created` takes it into the state).
    struct Admission: Equatable, Sendable {
        var machine: TaskStateMachine
        var queueOrder: Int64?
        /// When it fails if not finished: its session's `resourceTimeout` from now.
        var resourceDeadline: Double
        var events: [EventPayload]
        /// Its session's uid: the task's owner.
        var owner: UInt32
        /// Created from resume data whose partial is there: the ranges it continues from (the token's, clipped to
        /// the partial's length, with the token's validators in its row), once the runner moved the token's
        /// partial to the new task's (`resumePartialNotMoved` if it cannot). Nil: it starts from byte 0 (no resume
        /// data, or its partial is gone: `removePartial` follows).
        var resumed: ByteRanges? = nil
    }

    /// An admitted create's row, to be journaled when the batch is (`admittedRows`), with what its task is built
    /// from once the journal gave it an id (`created`).
    struct AdmittedRow: Equatable, Sendable {
        var record: TaskRecord
        var machine: TaskStateMachine
        var owner: UInt32
        var events: [EventPayload]
        var bytesExpectedToSend: Int64?
    }

    /// Why a new task was not admitted (`createRefused`; the runner answers it as `shuttingDown`,
    /// `sessionInvalidated` or `limitExceeded`).
    enum CreateRefusal: Equatable, Sendable {
        case shuttingDown
        case sessionInvalidated(String)
        /// The session holds `held` unfinished tasks, the most `max-tasks-per-session` allows.
        case sessionTasks(String, held: Int, max: Int)
        /// The uid holds `held` unfinished tasks across its sessions (`max-tasks-per-uid`).
        case ownerTasks(UInt32, held: Int, max: Int)
        /// The session holds `held` unacknowledged events (`max-pending-events`).
        case sessionEvents(String, held: Int, max: Int)
        /// The uid holds `held` unacknowledged events across its sessions (`max-pending-events-per-uid`).
        case ownerEvents(UInt32, held: Int, max: Int)
        /// A new download while the uid's partial files hold all that `max-disk-per-uid` allows: it could not
        /// write a byte.
        case diskFull(UInt32, held: Int64, limit: Int64)
    }

    /// The creates admitted and not yet `created` (or withdrawn): the later creates of the same batch are
    /// checked as if they were created already.
    struct Admitted: Equatable, Sendable {
        var destinations: Set<String> = []
        var tasksBySession: [String: Int] = [:]
        var tasksByUID: [UInt32: Int] = [:]
        var eventsBySession: [String: Int] = [:]
        var eventsByUID: [UInt32: Int] = [:]
        /// The partial files resume data brought them (removed if they are withdrawn).
        var partials: [String] = []
        /// Their rows, in the order they were admitted: the batch's insert (the runner journals them).
        var rows: [AdmittedRow] = []
        /// The resume data tokens redeemed for the batch's creates and not used up by an admitted one: when the batch
        /// ends (`created`, `admissionsWithdrawn`) they are kept again (`keepResumeToken`).
        var redeemed: [String: RedeemedToken] = [:]

        var isEmpty: Bool { tasksBySession.isEmpty }
    }

    /// A path a task holds, or a create admitted in this batch (a new download's name avoids both).
    func isReserved(_ path: String) -> Bool {
        tasks.isReserved(path) || admitted.destinations.contains(path)
    }

    /// `admitting`: the caps count the creates admitted before it in the batch. An admitted task takes the next
    /// place at the back of the queue when it starts at once (the state moves past it now: a place is never
    /// handed out twice, even when its insert fails).
    mutating func admit(_ new: NewTask, now: Double) -> [Action] {
        if let refusal = refusal(of: new) { return [.createRefused(refusal)] }
        guard let s = sessions[new.session] else { return [.createRefused(.sessionInvalidated(new.session))] } // not reached
        let timeout = s.record.configuration.resourceTimeout ?? SessionConfiguration.defaultResourceTimeout
        let deadline = now + timeout
        let (machine, lifecycle) = TaskStateMachine.created(start: new.start, resourceDeadline: deadline)
        let events = lifecycle.compactMap(Self.payload(for:))
        let queueOrder = lifecycle.contains(.enqueue) ? takeQueueOrder() : nil
        let owner = s.record.uid
        if let destination = new.destination { admitted.destinations.insert(destination) }
        admitted.tasksBySession[new.session, default: 0] += 1
        admitted.tasksByUID[owner, default: 0] += 1
        admitted.eventsBySession[new.session, default: 0] += events.count
        admitted.eventsByUID[owner, default: 0] += events.count
        var admission = Admission(machine: machine, queueOrder: queueOrder, resourceDeadline: deadline, events: events,
                                  owner: owner)
        var row = new.row
        row.state = machine.state
        row.resourceDeadline = deadline
        if let queueOrder { row.queueOrder = queueOrder }
        var actions: [Action] = []
        if let resume = new.resume {
            admitted.redeemed[resume.token.token] = nil // used up, whatever the partial holds
            // Resume data whose partial is gone or empty: the task starts from byte 0 (as URLSession does with resume
            // data it cannot use), and whatever is left of the partial goes.
            if let length = resume.partialLength, length > 0 {
                let token = resume.token
                admission.resumed = token.ranges.clipped(to: length)
                row.durableRanges = token.ranges.clipped(to: length)
                row.bytesExpected = token.bytesExpected
                row.etag = token.etag
                row.lastModified = token.lastModified
                admitted.partials.append(row.partialPath)
            } else {
                actions.append(.removePartial(path: resume.token.partialPath))
            }
        }
        admitted.rows.append(AdmittedRow(record: row, machine: machine, owner: owner, events: events,
                                         bytesExpectedToSend: new.bytesExpectedToSend))
        return [.admitted(admission)] + actions
    }

    /// `resumePartialNotMoved`: the admitted create whose path was to receive `partial` starts from byte 0, as
    /// one whose resume data's partial is gone; the token's partial goes.
    mutating func resumePartialNotMoved(_ partial: String, into: String, actions: inout [Action]) {
        admitted.partials.removeAll { $0 == into } // nothing of it there to remove if the batch is withdrawn
        if let index = admitted.rows.firstIndex(where: { $0.record.partialPath == into }) {
            admitted.rows[index].record.durableRanges = ByteRanges()
            admitted.rows[index].record.bytesExpected = nil
            admitted.rows[index].record.etag = nil
            admitted.rows[index].record.lastModified = nil
        }
        actions.append(.removePartial(path: partial))
    }

    /// `created`: the batch's rows as the journal stored them (with their ids), in the order they were admitted:
    /// each becomes a task from its admission (its lifecycle, owner, an upload's length), `inserting` until the
    /// insert's outcome (`createsJournaled`).
    func createdTasks(_ stored: [TaskRecord]) -> [ManagedTask] {
        zip(admitted.rows, stored).map { admitted, record in
            var t = ManagedTask(record: record, owner: admitted.owner, machine: admitted.machine,
                                bytesReceived: record.bytesDurable)
            t.bytesExpectedToSend = admitted.bytesExpectedToSend
            t.inserting = true
            return t
        }
    }

    /// The batch's tasks join the state (a queued one joins the queue with its state, or waits for its date), the
    /// batch ends (its admitted creates now counted as tasks; the tokens of refused ones kept again, after the
    /// batch's own actions), and slots are granted.
    mutating func join(_ created: [ManagedTask], now: Double, into actions: inout [Action]) {
        let brought = Set(admitted.partials) // the resume data partials moved into the batch's tasks' paths
        var kept: [Action] = []
        batchEnded(into: &kept)
        for var t in created {
            t = withFirstProxy(t)
            t.partialMayExist = !t.record.durableRanges.isEmpty || brought.contains(t.record.partialPath)
            if t.record.queueOrder >= nextQueueOrder { nextQueueOrder = t.record.queueOrder + 1 } // its place is taken
            Self.deferIfEarly(&t, now: now)
            tasks[t.id] = t
            if t.machine.state == .queued, !mayTransfer(session: t.record.session) { regate(t.id, now: now, into: &actions) }
        }
        grantSlots(limits, now: now, into: &actions)
        actions.append(contentsOf: kept)
    }

    /// `admissionsWithdrawn`: the batch's admitted creates will not be journaled (their submission failed). Their
    /// places stay taken (a place is never handed out twice); the partials resume data brought them go.
    mutating func withdrawAdmissions(into actions: inout [Action]) {
        for path in admitted.partials { actions.append(.removePartial(path: path)) }
        batchEnded(into: &actions)
    }

    /// A resume data token taken from the journal, with its owner: the uid its resume data was made for, which its
    /// count follows whatever happens to its session meanwhile.
    struct RedeemedToken: Equatable, Sendable {
        var record: ResumeTokenRecord
        var owner: UInt32
    }

    /// `resumeTokenRedeemed`: the token was taken from the journal for a create of this batch; its owner keeps one
    /// fewer. A token whose URL this daemon refuses can never be used: it is used up now, with its partial (the
    /// create is refused by the runner's check of the URL). Any other is kept again if no create is admitted with
    /// it (`batchEnded`).
    mutating func resumeTokenRedeemed(_ token: RedeemedToken, into actions: inout [Action]) {
        Self.add(-1, to: &resumeDataKept, token.owner)
        guard (try? Destination.validate(url: token.record.url)) != nil else {
            return actions.append(.removePartial(path: token.record.partialPath))
        }
        admitted.redeemed[token.record.token] = token
    }

    /// The batch is over (its creates `created`, or withdrawn, or none admitted): the tokens redeemed for creates
    /// that were refused are kept again, counted for their owner at once (`resumeTokenNotKept` if the write fails),
    /// after the batch's tasks are in the state and their insert submitted.
    mutating func batchEnded(into actions: inout [Action]) {
        for token in admitted.redeemed.values.sorted(by: { $0.record.token < $1.record.token }) {
            Self.add(1, to: &resumeDataKept, token.owner)
            actions.append(.keepResumeToken(token))
        }
        admitted = Admitted()
    }

    private func refusal(of new: NewTask) -> CreateRefusal? {
        guard !shuttingDown else { return .shuttingDown }
        guard let s = sessions[new.session] else { return .sessionInvalidated(new.session) } // gone meanwhile
        let (identifier, uid) = (s.record.identifier, s.record.uid)
        let unfinished = tasks.unfinished(session: identifier) + admitted.tasksBySession[identifier, default: 0]
        guard unfinished < caps.maxTasksPerSession else {
            return .sessionTasks(identifier, held: unfinished, max: caps.maxTasksPerSession)
        }
        let owned = tasks.unfinished(owner: uid) + admitted.tasksByUID[uid, default: 0]
        guard owned < caps.maxTasksPerUID else { return .ownerTasks(uid, held: owned, max: caps.maxTasksPerUID) }
        let pending = s.pendingEvents + admitted.eventsBySession[identifier, default: 0]
        guard pending < caps.maxPendingEventsPerSession else {
            return .sessionEvents(identifier, held: pending, max: caps.maxPendingEventsPerSession)
        }
        let ownerPending = (pendingEventsByUID[uid] ?? 0) + admitted.eventsByUID[uid, default: 0]
        guard ownerPending < caps.maxPendingEventsPerUID else {
            return .ownerEvents(uid, held: ownerPending, max: caps.maxPendingEventsPerUID)
        }
        guard s.record.state == .active else { return .sessionInvalidated(identifier) }
        if new.destination != nil, new.resume == nil, let disk = new.disk, disk.held >= disk.limit {
            return .diskFull(uid, held: disk.held, limit: disk.limit)
        }
        return nil
    }
}
