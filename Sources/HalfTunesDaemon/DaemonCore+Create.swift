// task.create: every check, then the journal, then memory; consecutive creates journaled in one transaction.
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

/// A task.create that passed every check, ready to be journaled.
struct PendingCreate {
    var record: TaskRecord
    var machine: TaskStateMachine
    var events: [Event]
    /// Uploads: the file's length when the task was created.
    var bytesExpectedToSend: Int64?
}

/// What the earlier creates of one batch will hold once journaled, which the later ones' checks must see.
struct CreateBatch {
    var destinations: Set<String> = []
    var tasksBySession: [String: Int] = [:]
    var tasksByUID: [UInt32: Int] = [:]
    var eventsBySession: [String: Int] = [:]
    var eventsByUID: [UInt32: Int] = [:]
    /// Creates that take a place at the back of the queue.
    var queued: Int64 = 0

    mutating func add(_ create: PendingCreate, owner: UInt32) {
        if create.machine.state == .queued { queued += 1 }
        let session = create.record.session
        if create.record.kind == TaskKind.download.rawValue { destinations.insert(create.record.destination) }
        tasksBySession[session, default: 0] += 1
        tasksByUID[owner, default: 0] += 1
        eventsBySession[session, default: 0] += create.events.count
        eventsByUID[owner, default: 0] += create.events.count
    }
}

extension DaemonCore {
    func createTask(_ p: TaskCreateParams, caller: Caller) async throws(RPCError) -> TaskInfo {
        try await createTasks([(p, caller)])[0].get()
    }

    /// Consecutive task.create requests (of one connection, in order): each is checked as if the ones before
    /// it were already created, then every one that passed is journaled in ONE write (all or none), answered
    /// once that write's outcome is known. The write is submitted, not waited for: its ids and event seqs are
    /// handed out at once, so the tasks join the state (taking their destinations, places and counts) and their
    /// events go out in this turn, in seq order with everything else; they start no transfer until the rows are
    /// written (`inserting`), and leave the state again if the write fails. Meanwhile the core serves other
    /// calls. Answers come back in request order.
    func createTasks(_ requests: [(TaskCreateParams, Caller)]) async -> [Result<TaskInfo, RPCError>] {
        var results = [Result<TaskInfo, RPCError>](repeating: .failure(RPCError(.internalError, "not created")),
                                                   count: requests.count)
        var batch = CreateBatch()
        var pending: [(index: Int, create: PendingCreate)] = []
        for (index, (p, caller)) in requests.enumerated() {
            do throws(RPCError) {
                let create = try prepareCreate(p, caller: caller, batch: batch)
                batch.add(create, owner: state.sessions[create.record.session]?.record.uid ?? 0)
                pending.append((index, create))
            } catch {
                results[index] = .failure(error)
            }
        }
        guard !pending.isEmpty else { return results }
        let stored: [(TaskRecord, [Event])]
        let written: WriteOutcome
        do throws(RPCError) {
            (stored, written) = try journaled { try journal.submitTasks(pending.map { ($0.create.record, $0.create.events) }) }
        } catch {
            for (index, create) in pending {
                results[index] = .failure(error)
                // Resume data already used up and its partial moved here: no task or token will ever name it.
                if !create.record.durableRanges.isEmpty { discardPartial(create.record.partialPath) }
            }
            return results
        }
        var created: [ManagedTask] = []
        created.reserveCapacity(stored.count)
        for (create, (record, _)) in zip(pending.map(\.create), stored) {
            var managed = ManagedTask(record: record, owner: state.sessions[record.session]?.record.uid ?? 0,
                                      machine: create.machine, bytesReceived: record.bytesDurable)
            managed.bytesExpectedToSend = create.bytesExpectedToSend
            managed.inserting = true
            created.append(managed)
        }
        let actions = feed(.created(created))
        for (_, events) in stored { broadcast(events) } // the created events before any of what follows
        run(actions)
        // A task that ended at once (offline in a session that does not wait for connectivity) is in the
        // journal only: it is described from the row submitted for it.
        var finished: [Int64: TaskRecord] = [:]
        for case let .journal(record, _) in actions where record.state.isTerminal { finished[record.id!] = record }

        let ids = stored.map { $0.0.id! }
        if let error = await written.failure {
            logger.error("journal write failed: \(error)")
            feedAndRun(.createsJournaled(ids, failed: true))
            for (index, _) in pending {
                results[index] = .failure(RPCError(.ioError, "The journal could not be written (\(error)); nothing was changed"))
            }
            return results
        }
        feedAndRun(.createsJournaled(ids, failed: false))
        for ((index, _), (record, _)) in zip(pending, stored) {
            logger.info("task created", metadata: ["task": "\(record.id!)", "session": "\(record.session)",
                                                   "url": "\(record.url)", "kind": "\(record.kind)"])
            let id = record.id!
            if let t = state.tasks[id] ?? finished[id].flatMap(finishedTask) {
                results[index] = .success(info(t))
            } else if let t = try? await nonblocking({ try $0.loadTask(id) }).flatMap(finishedTask) {
                results[index] = .success(info(t)) // ended meanwhile (cancelled by another client)
            } else {
                results[index] = .failure(RPCError(.ioError, "Task \(id) was created, but could not be read back"))
            }
        }
        return results
    }

    /// Checks one task.create and builds its row, first events and lifecycle. Changes nothing but what a
    /// resume data token needs (the token is used up, its partial data moved next to the new destination).
    func prepareCreate(_ p: TaskCreateParams, caller: Caller, batch: CreateBatch) throws(RPCError) -> PendingCreate {
        guard !state.shuttingDown else { throw RPCError(.shuttingDown, "halftunesd is shutting down") }
        let s = try session(p.session, for: caller)
        try checkCapsForNewTask(in: s, batch: batch)
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
            feedAndRun(.resumeDataChanged(uid: s.record.uid, kept: -1, inFlight: 0)) // redeemed
        }
        guard let urlString else { throw RPCError.invalidParams("url is required (or resumeData)") }
        let url: URL
        do {
            url = try Destination.validate(url: urlString)
        } catch {
            if let resume { discardPartial(resume.partialPath) }
            throw error
        }
        if let exchange {
            return pendingCreate(exchangeTask(p, exchange, url: urlString, in: s), start: p.start == true, batch: batch,
                                 bytesExpectedToSend: exchange.fileBytes)
        }
        if resume == nil { try checkDiskBudget(owner: s.record.uid) } // resume data brings bytes already counted
        let isReserved = { (path: String) in self.state.tasks.isReserved(path) || batch.destinations.contains(path) }
        let directory = s.record.configuration.destinationDirectory ?? downloadRoots.defaultDirectory(for: s.record.uid)
        var explicit = p.destination
        if explicit == nil, let resume, !FileManager.default.fileExists(atPath: resume.destination),
           !isReserved(resume.destination) {
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
                                                  isReserved: isReserved, overwrite: p.overwrite == true)
            try downloadRoots.confine((destination as NSString).deletingLastPathComponent, uid: s.record.uid)
        } catch {
            if let resume { // not used up by a refused request
                do {
                    try journal.insertResumeToken(resume)
                    feedAndRun(.resumeDataChanged(uid: s.record.uid, kept: 1, inFlight: 0))
                } catch {
                    discardPartial(resume.partialPath)
                }
            }
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
        // No file named by the client: the first response may name it (Content-Disposition, a redirect).
        record.nameFromResponse = explicit?.isEmpty != false
        if let resume {
            adoptResumeData(resume, into: &record, owner: s.record.uid)
        }
        return pendingCreate(record, start: p.start == true, batch: batch)
    }

    /// The new task's lifecycle and first events (its place in the queue when it starts at once).
    /// A queued one takes the next free place behind the queue and the batch's earlier creates (the state moves
    /// past it when `created` takes it in).
    private func pendingCreate(_ record: TaskRecord, start: Bool, batch: CreateBatch,
                               bytesExpectedToSend: Int64? = nil) -> PendingCreate {
        var record = record
        let (machine, actions) = TaskStateMachine.created(start: start, resourceDeadline: record.resourceDeadline)
        record.state = machine.state
        if actions.contains(.enqueue) {
            record.queueOrder = state.nextQueueOrder + batch.queued
        }
        let time = Timestamp.format(record.createdAt)
        let events = actions.compactMap(DaemonState.payload(for:))
            .map { Event(seq: nil, session: record.session, task: nil, time: time, payload: $0) }
        return PendingCreate(record: record, machine: machine, events: events, bytesExpectedToSend: bytesExpectedToSend)
    }

    /// Moves kept partial data into place for a task created from resume data; on any problem the task
    /// simply starts from zero (like URLSession when resume data cannot be used).
    private func adoptResumeData(_ token: ResumeTokenRecord, into record: inout TaskRecord, owner: UInt32) {
        guard let length = PartialFile.length(path: token.partialPath), length > 0,
              PartialFile.move(from: token.partialPath, to: record.partialPath)
        else {
            logger.notice("resume data's partial data is gone; starting from zero", metadata: ["url": "\(token.url)"])
            discardPartial(token.partialPath)
            return
        }
        record.durableRanges = token.ranges.clipped(to: length)
        diskLedger.move(from: token.partialPath, to: record.partialPath, uid: owner)
        record.bytesExpected = token.bytesExpected
        record.etag = token.etag
        record.lastModified = token.lastModified
    }
}
