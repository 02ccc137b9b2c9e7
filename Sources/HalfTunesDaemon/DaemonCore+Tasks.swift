import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    func createTask(_ p: TaskCreateParams, caller: Caller) throws(RPCError) -> TaskInfo {
        guard !shuttingDown else { throw RPCError(.shuttingDown, "halftunesd is shutting down") }
        let s = try session(p.session, for: caller)
        try checkCapsForNewTask(in: s)
        guard s.record.state == .active else {
            throw RPCError(.sessionInvalidated, "Session '\(p.session)' is being invalidated and accepts no new tasks")
        }
        try validateHeaders(p.headers ?? [:])
        try validateControls(p)
        let exchange = try validateExchange(p, caller: caller)
        if let d = p.description, d.utf8.count > 4096 {
            throw RPCError.invalidParams("description is longer than 4096 bytes")
        }

        var resume: ResumeTokenRecord?
        var urlString = p.url
        if let data = p.resumeData {
            let decoded = try ResumeData.decode(data, key: resumeKey)
            guard decoded.uid == s.record.uid else { throw RPCError(.invalidResumeData, ResumeData.refusal) }
            if let given = p.url, given != decoded.url {
                throw RPCError.invalidParams("url does not match the resume data's URL (\(decoded.url)); omit url")
            }
            guard let token = try journaled({ try journal.takeResumeToken(decoded.token) }) else {
                throw RPCError(.invalidResumeData,
                               "This resume data was already used, has expired, or is not from this daemon")
            }
            resume = token
            urlString = token.url
        }
        guard let urlString else { throw RPCError.invalidParams("url is required (or resumeData)") }
        let url: URL
        do {
            url = try Destination.validate(url: urlString)
        } catch {
            if let resume { PartialFile.remove(path: resume.partialPath) }
            throw error
        }
        if let exchange { return try createExchangeTask(p, exchange, url: urlString, in: s) }
        let directory = s.record.configuration.destinationDirectory ?? downloadRoots.defaultDirectory(for: s.record.uid)
        var explicit = p.destination
        if explicit == nil, let resume, !FileManager.default.fileExists(atPath: resume.destination),
           !tasks.isReserved(resume.destination) {
            explicit = resume.destination // the cancelled task's destination, when still free
        }
        let destination: String
        do {
            try downloadRoots.confine(directory, uid: s.record.uid, creating: true)
            if let explicit, !explicit.isEmpty { // confined before anything about the path is revealed
                let path = Destination.normalize(explicit.hasPrefix("/") ? explicit : directory + "/" + explicit)
                try downloadRoots.confine((path as NSString).deletingLastPathComponent, uid: s.record.uid)
            }
            destination = try Destination.resolve(explicit: explicit, url: url, directory: directory,
                                                  isReserved: { tasks.isReserved($0) }, overwrite: p.overwrite == true)
            try downloadRoots.confine((destination as NSString).deletingLastPathComponent, uid: s.record.uid)
        } catch {
            if let resume { try? journal.insertResumeToken(resume) } // not used up by a refused request
            throw error
        }
        let now = clock()
        var record = TaskRecord(
            session: p.session, kind: "download", url: urlString, state: .suspended,
            destination: destination, partialPath: Destination.partialPath(for: destination),
            headers: p.headers ?? [:], description: p.description, createdAt: now, updatedAt: now,
            resourceDeadline: now + (s.record.configuration.resourceTimeout ?? SessionConfiguration.defaultResourceTimeout))
        applyControls(p, to: &record)
        record.overwrite = p.overwrite == true
        if let resume {
            adoptResumeData(resume, into: &record)
        }
        return try insertNewTask(record, start: p.start == true)
    }

    /// Journals a new task with its first events, queues it when started, and tells subscribers.
    func insertNewTask(_ record: TaskRecord, start: Bool) throws(RPCError) -> TaskInfo {
        var record = record
        let now = record.createdAt
        let (machine, actions) = TaskStateMachine.created(start: start,
                                                          resourceDeadline: record.resourceDeadline)
        record.state = machine.state
        if actions.contains(.enqueue) {
            record.queueOrder = nextQueueOrder
            nextQueueOrder += 1
        }
        let payloads = actions.compactMap(Self.payload(for:))
        let events = payloads.map { Event(seq: nil, session: record.session, task: nil, time: Timestamp.format(now), payload: $0) }
        let (stored, storedEvents) = try journaled { try journal.insertTask(record, events: events) }
        let managed = ManagedTask(record: stored, owner: sessions[stored.session]?.record.uid ?? 0, machine: machine,
                                  bytesReceived: stored.bytesDurable)
        tasks[stored.id!] = managed // queued when started: TaskTable puts it in the queue
        broadcast(storedEvents)
        logger.info("task created", metadata: ["task": "\(stored.id!)", "session": "\(record.session)", "url": "\(record.url)",
                                               "kind": "\(record.kind)"])
        pump()
        return info(tasks[stored.id!]!)
    }

    /// Moves kept partial data into place for a task created from resume data; on any problem the task
    /// simply starts from zero (like URLSession when resume data cannot be used).
    private func adoptResumeData(_ token: ResumeTokenRecord, into record: inout TaskRecord) {
        guard let length = PartialFile.length(path: token.partialPath), length > 0,
              PartialFile.move(from: token.partialPath, to: record.partialPath)
        else {
            logger.notice("resume data's partial data is gone; starting from zero", metadata: ["url": "\(token.url)"])
            PartialFile.remove(path: token.partialPath)
            return
        }
        record.bytesDurable = min(length, token.bytes)
        record.bytesExpected = token.bytesExpected
        record.etag = token.etag
        record.lastModified = token.lastModified
    }

    func resumeTask(_ id: Int64, caller: Caller) throws(RPCError) -> TaskInfo {
        guard !shuttingDown else { throw RPCError(.shuttingDown, "halftunesd is shutting down") }
        _ = try task(id, for: caller) // only the owner (or root) may
        try apply(.resume, to: id)
        pump()
        return info(try task(id, for: caller))
    }

    /// Pauses the task. Returns once its transfer has stopped, so `bytesDurable` in the answer is
    /// final: everything received was fsynced and journaled, and a resume continues exactly there.
    func suspendTask(_ id: Int64, caller: Caller) async throws(RPCError) -> TaskInfo {
        _ = try task(id, for: caller) // only the owner (or root) may
        await waitUntilMoved(id)
        let actions = try apply(.suspend, to: id)
        pump()
        if actions.contains(.stopTransfer), let runtime = tasks[id]?.runtime { _ = await runtime.outcome() }
        return info(try task(id, for: caller))
    }

    func cancelTask(_ id: Int64, produceResumeData: Bool, caller: Caller) async throws(RPCError) -> TaskCancelResult {
        _ = try task(id, for: caller) // only the owner (or root) may
        await waitUntilMoved(id)
        let before = try task(id, for: caller)
        let canKeep = produceResumeData && Validators(etag: before.record.etag, lastModified: before.record.lastModified).ifRangeValue != nil
        try apply(.cancel(keepPartial: canKeep), to: id)
        pump()
        var resumeData: String?
        if canKeep {
            // Wait for the transfer to stop so the durable length is final. The runtime has it at once;
            // the task's row gets it only when the core has handled the transfer's end, maybe later.
            var durable: Int64?
            if let runtime = tasks[id]?.runtime {
                _ = await runtime.outcome()
                durable = runtime.durableBytes
            }
            resumeData = try makeResumeData(for: id, durable: durable)
        }
        return TaskCancelResult(task: info(try task(id, for: caller)), resumeData: resumeData)
    }

    private func makeResumeData(for id: Int64, durable: Int64?) throws(RPCError) -> String? {
        guard let r = tasks[id]?.record ?? (try? journal.loadTask(id)) ?? nil else { return nil }
        let bytes = min(max(r.bytesDurable, durable ?? 0), PartialFile.length(path: r.partialPath) ?? 0)
        guard bytes > 0 else {
            PartialFile.remove(path: r.partialPath)
            return nil
        }
        let token = ResumeData.newToken()
        let row = ResumeTokenRecord(token: token, session: r.session, url: r.url, partialPath: r.partialPath,
                                    destination: r.destination, bytes: bytes, bytesExpected: r.bytesExpected,
                                    etag: r.etag, lastModified: r.lastModified, createdAt: clock())
        try journaled { try journal.insertResumeToken(row) }
        let owner = sessions[r.session]?.record.uid ?? UInt32.max
        return ResumeData(token: token, url: r.url, bytes: bytes, uid: owner).encoded(key: resumeKey)
    }

    func getTask(_ id: Int64, caller: Caller) throws(RPCError) -> TaskInfo { info(try task(id, for: caller)) }

    /// One page of the caller's tasks by id: up to `limit` after `cursor` (the last id of the page before).
    /// The ids are kept in order by `TaskTable`, so a page costs what it reads, not a sort of every task.
    func listTasks(_ p: TaskListParams, caller: Caller) throws(RPCError) -> TaskListResult {
        if let s = p.session { _ = try session(s, for: caller) }
        let limit = p.limit ?? TaskListParams.maxLimit
        guard (1...TaskListParams.maxLimit).contains(limit) else {
            throw RPCError.invalidParams("limit must be 1 to \(TaskListParams.maxLimit) (got \(limit)); follow nextCursor for more")
        }
        var after = Int64.min
        if let cursor = p.cursor {
            guard let id = Int64(cursor), id >= 0 else {
                throw RPCError.invalidParams("cursor '\(cursor)' is not a nextCursor task.list returned; list again without it")
            }
            after = id
        }
        // The journal holds every task, finished or not: a page is read through its primary key, and the
        // unfinished tasks on it are described from memory (their progress is there).
        let scope: [String]? = p.session.map { [$0] }
            ?? (caller.uid == 0 ? nil : sessions.values.filter { $0.record.uid == caller.uid }.map(\.record.identifier))
        let ids = try journaled { try journal.taskIDs(after: after, sessions: scope, state: p.state, limit: limit + 1) }
        var page: [ManagedTask] = []
        for id in ids.prefix(limit) {
            guard let t = tasks[id] ?? finishedTask(id), caller.mayAccess(owner: t.owner) else { continue }
            page.append(t)
        }
        let more = ids.count > limit
        return TaskListResult(tasks: infos(page).map(\.withoutResponseBody),
                              nextCursor: more ? ids.prefix(limit).last.map(String.init) : nil)
    }

    // MARK: - Applying lifecycle inputs

    /// Feeds an input to a task's state machine, carries out its actions and journals the result with
    /// its events in one transaction. `extra` events go just before `didComplete`.
    @discardableResult
    func apply(_ input: TaskStateMachine.Input, to id: Int64, extra: [EventPayload] = [],
               update: (inout TaskRecord) -> Void = { _ in }) throws(RPCError) -> [TaskStateMachine.Action] {
        guard var t = tasks[id] else {
            // A finished task lives in the journal only: it refuses every input as its state machine would.
            guard var finished = finishedTask(id)?.machine else { throw RPCError.unknownTask(id) }
            do {
                _ = try finished.handle(input, now: clock())
            } catch {
                throw RPCError.illegalStateChange(task: id, from: error.state, action: error.input)
            }
            return [] // an input a finished task ignores
        }
        if completions[id]?.machine.isMoving == true {
            // Its file is being moved into place: suspend and cancel wait for that (`waitUntilMoved`), a session
            // invalidation lets it finish; the move's outcome ends the completion before it is applied.
            return []
        }
        t.machine.backoff = backoff(forSession: t.record.session) // the session's current retry policy
        let now = clock()
        let actions: [TaskStateMachine.Action]
        do {
            actions = try t.machine.handle(input, now: now)
        } catch {
            throw RPCError.illegalStateChange(task: id, from: error.state, action: error.input)
        }
        if actions.isEmpty { return actions }
        var payloads: [EventPayload] = []
        var startNow = false
        for action in actions {
            switch action {
            case .enqueue:
                enqueue(&t)
            case .dequeue:
                break // TaskTable takes it out of the queue with its state
            case .startTransfer:
                startNow = true
            case .stopTransfer:
                t.runtime?.stop()
            case .scheduleRetry(let at):
                t.retryTimer?.cancel()
                t.retryTimer = scheduleRetry(id, at: at)
            case .cancelRetry:
                t.retryTimer?.cancel()
                t.retryTimer = nil
            case .discardPartial:
                if t.runtime != nil {
                    t.discardPartialWhenStopped = true
                } else {
                    PartialFile.remove(path: t.record.partialPath)
                }
                t.record.bytesDurable = 0
            case .keepPartialForResumeData:
                t.discardPartialWhenStopped = false
            case .emitStateChanged, .emitComplete:
                if case .emitComplete = action { payloads.append(contentsOf: extra) }
                if let payload = Self.payload(for: action) { payloads.append(payload) }
            }
        }
        update(&t.record)
        payloads = payloads.map { $0.carrying(t.record.response) }
        t.syncRecord(now: now)
        if let runtime = t.runtime, !t.discardPartialWhenStopped, !t.machine.state.isTerminal {
            t.record.bytesDurable = runtime.durableBytes
        }
        tasks[id] = t
        commit(id, payloads)
        leaveCompletionIfStopped(id)
        if startNow { startTransfer(id) }
        if t.machine.state.isTerminal, sessions[t.record.session]?.record.state == .invalidating {
            finishInvalidationIfDone(t.record.session)
        }
        evictIfFinished(id)
        return actions
    }

    static func payload(for action: TaskStateMachine.Action) -> EventPayload? {
        switch action {
        case let .emitStateChanged(from, to, reason): return .stateChanged(state: to, previous: from, reason: reason)
        case let .emitComplete(error): return .didComplete(error: error)
        default: return nil
        }
    }

    private func scheduleRetry(_ id: Int64, at: Double) -> Task<Void, Never> {
        let delay = max(0, at - clock())
        return Task { [weak self] in
            try? await Task.sleep(nanoseconds: UInt64(delay * 1e9))
            guard !Task.isCancelled, let self else { return }
            await self.retryDue(id)
        }
    }

    func retryDue(_ id: Int64) {
        guard !shuttingDown, let t = tasks[id], t.machine.state == .waiting else { return }
        tasks[id]?.retryTimer = nil
        _ = try? apply(.retryDue, to: id)
        pump()
    }
}
