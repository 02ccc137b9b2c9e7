// The task methods of the RPC surface: create (with its controls), resume, suspend, cancel, update, get and list.
import Foundation
import HalfTunesCore
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    func resumeTask(_ id: Int64, caller: Caller) async throws(RPCError) -> TaskInfo {
        _ = try await task(id, for: caller) // only the owner (or root) may
        try checkStateSpace("task.resume")
        if let now = try await apply(.resume, to: id) { return info(now) }
        return info(try await task(id, for: caller))
    }

    /// Pauses the task. Returns once its transfer has stopped, so `bytesDurable` in the answer is
    /// final: everything received was fsynced and journaled, and a resume continues exactly there.
    func suspendTask(_ id: Int64, caller: Caller) async throws(RPCError) -> TaskInfo {
        _ = try await task(id, for: caller) // only the owner (or root) may
        try await apply(.suspend, to: id) // after the move into place under way, if any (`heldWhileMoving`)
        await attemptStopped(id) // stopping: wait for its end
        return info(try await task(id, for: caller))
    }

    /// Waits until the task's attempt in flight (if any) has ended and the core has handled everything it
    /// reported, its last checkpoint and its end included, so the task's durable ranges are final; returns the
    /// attempt's outcome (nil: none was in flight).
    @discardableResult
    func attemptStopped(_ id: Int64) async -> AttemptOutcome? {
        guard let live = attempts[id] else { return nil }
        let outcome = await live.runtime.outcome()
        await live.reports?.value
        return outcome
    }

    /// Cancels the task; with `produceResumeData`, the state decides whether its partial is kept (refused past the
    /// owner's `max-resume-data-per-uid`, none without a validator) and, once its transfer stopped, what the token
    /// holds. The answer has the resume data once its token is journaled.
    func cancelTask(_ id: Int64, produceResumeData: Bool, caller: Caller) async throws(RPCError) -> TaskCancelResult {
        _ = try await task(id, for: caller) // only the owner (or root) may
        // After the move into place under way, if any (`heldWhileMoving`).
        let (after, answer) = try await applying(.cancel(keepPartial: produceResumeData), to: id)
        guard answer.contains(.makeResumeData(id)) else {
            // Nothing was awaited since `apply`: its answer is the task as it is.
            if let after { return TaskCancelResult(task: info(after), resumeData: nil) }
            return TaskCancelResult(task: info(try await task(id, for: caller)), resumeData: nil)
        }
        // Wait for the transfer to stop so the durable ranges are final. Its outcome has them at once.
        let durable = await attemptStopped(id)?.durable
        let partial = state.tasks[id]?.record.partialPath
        let actions = feed(.resumeDataStopped(id, durable: durable, partialLength: partial.flatMap { PartialFile.length(path: $0) },
                                              token: ResumeData.newToken()))
        let written = run(actions)
        var resumeData: String?
        if case let .writeResumeToken(row, owner)? = actions.first, let written { // else nothing was kept
            let failure = await written.failure
            feedAndRun(.resumeTokenWritten(id, failed: failure != nil))
            if let failure { throw journalWriteFailed(failure) }
            resumeData = ResumeData(token: row.token, url: row.url, bytes: row.bytes, uid: owner).encoded(key: resumeKey)
        }
        return TaskCancelResult(task: info(try await task(id, for: caller)), resumeData: resumeData)
    }

    /// A finished task is read from the journal without blocking the actor.
    func getTask(_ id: Int64, caller: Caller) async throws(RPCError) -> TaskInfo {
        if let t = state.tasks[id] {
            guard caller.mayAccess(owner: t.owner) else { throw RPCError.unknownTask(id) }
            return info(t)
        }
        // Not in memory when the read was queued: finished (its row is final) or unknown.
        let record = try await nonblocking { try $0.loadTask(id) }
        guard let t = state.tasks[id] ?? record.flatMap(finishedTask), caller.mayAccess(owner: t.owner) else {
            throw RPCError.unknownTask(id)
        }
        return info(t)
    }

    /// One page of the caller's tasks by id: up to `limit` after `cursor` (the last id of the page before).
    /// The ids are kept in order by `TaskTable`, so a page costs what it reads, not a sort of every task.
    func listTasks(_ p: TaskListParams, caller: Caller) async throws(RPCError) -> TaskListText {
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
        // The journal holds every task, finished or not: a page is read through its primary key (with the rows of
        // its finished tasks and their text, in the same read, off the actor), and the unfinished tasks on it are
        // described from memory (their progress is there). A page of one unfinished state is all in memory: the
        // journal's state indexes hold finished rows only.
        let page: TaskPage
        if let wanted = p.state, !wanted.isTerminal {
            let scope: StateIDIndex.Scope = p.session.map { .session($0) } ?? (caller.uid == 0 ? .all : .owner(caller.uid))
            page = TaskPage(ids: state.tasks.ids(in: wanted, of: scope, after: after, limit: limit + 1), finished: [:])
        } else {
            let scope: [String]? = p.session.map { [$0] }
                ?? (caller.uid == 0 ? nil : Array(state.sessions.identifiers(of: caller.uid)))
            let (from, state) = (after, p.state)
            page = try await nonblocking {
                try $0.taskPage(after: from, sessions: scope, state: state, limit: limit + 1, describe: Self.listedText)
            }
        }
        let ids = page.ids.prefix(limit)
        // A task unfinished when the page was read and finished since is in neither: read again (rare).
        let finishedSince = ids.filter { self.state.tasks[$0] == nil && page.finished[$0] == nil }
        let lateIDs = Array(finishedSince)
        let late = lateIDs.isEmpty ? [:] : try await nonblocking { try $0.loadTasks(ids: lateIDs) }
        var items: [TaskListText.Item] = []
        items.reserveCapacity(ids.count)
        for id in ids {
            if let t = self.state.tasks[id] {
                guard caller.mayAccess(owner: t.owner) else { continue }
                if let wanted = p.state, t.machine.state != wanted { continue } // changed while the page was read
                items.append(.info(info(t).withoutResponseBody))
            } else if let text = page.finished[id]?.text {
                // A finished task (no longer in memory): its session's owner may see it, as `finishedTask` decides.
                guard let session = self.state.sessions[text.session], caller.mayAccess(owner: session.record.uid),
                      p.state == nil || text.state == p.state else { continue }
                items.append(.text(text))
            } else if let t = (page.finished[id]?.record ?? late[id]).flatMap(finishedTask) {
                guard caller.mayAccess(owner: t.owner) else { continue }
                if let wanted = p.state, t.machine.state != wanted { continue }
                items.append(.info(info(t).withoutResponseBody))
            }
        }
        let more = page.ids.count > limit
        return TaskListText(items: items, nextCursor: more ? ids.last.map(String.init) : nil)
    }
}

// MARK: - task.create: every check, then the journal, then memory; consecutive creates journaled in one transaction.

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
    func createTasks(_ given: [(TaskCreateParams, Caller)]) async -> [Result<TaskInfo, RPCError>] {
        var results = [Result<TaskInfo, RPCError>](repeating: .failure(RPCError(.internalError, "not created")),
                                                   count: given.count)
        // Credentials in a URL are taken out of it first (resume data names the URL without them).
        var requests = given
        var refused = Set<Int>()
        // Once per batch: a statvfs, not one per task.
        var noSpace: RPCError?
        do throws(RPCError) { try checkStateSpace("task.create") } catch { noSpace = error }
        var overShare: [UInt32: RPCError] = [:]
        for owner in Set(given.map { $0.1.uid }) {
            do throws(RPCError) { try await checkJournalShare(uid: owner) } catch { overShare[owner] = error }
        }
        for (index, (p, caller)) in given.enumerated() {
            do throws(RPCError) {
                if let noSpace { throw noSpace }
                if let over = overShare[caller.uid] { throw over }
                requests[index].0 = try TaskCredentials.normalize(p)
            } catch {
                results[index] = .failure(error)
                refused.insert(index)
            }
        }
        // Resume data is redeemed first (its token taken in the journal, awaited off the core), so that the checks
        // below run in one turn of the core, each seeing the ones before it.
        var redeemed: [Int: DaemonState.RedeemedToken] = [:]
        for (index, (p, caller)) in requests.enumerated() where p.resumeData != nil && !refused.contains(index) {
            do throws(RPCError) {
                redeemed[index] = try await redeem(p, caller: caller)
            } catch {
                results[index] = .failure(error)
            }
        }
        // From here until the batch ends nothing is awaited: the state has the batch's tokens, and keeps again those
        // no admitted create used up (`keepResumeToken` when the batch ends), after the batch's tasks are in it.
        for index in redeemed.keys.sorted() { feedAndRun(.resumeTokenRedeemed(redeemed[index]!)) } // counted by owner
        var pending: [Int] = [] // the requests admitted, in order: the state's `admitted.rows`
        for (index, (p, caller)) in requests.enumerated()
        where !refused.contains(index) && (p.resumeData == nil || redeemed[index] != nil) {
            do throws(RPCError) {
                try prepareCreate(p, caller: caller, resume: redeemed[index]?.record)
                pending.append(index)
            } catch {
                results[index] = .failure(error)
            }
        }
        guard !pending.isEmpty else {
            feedAndRun(.admissionsWithdrawn) // the batch ends with nothing admitted
            return results
        }
        let rows = state.admitted.rows.map { admitted in
            let time = Timestamp.format(admitted.record.createdAt)
            return (admitted.record, admitted.events.map {
                Event(seq: nil, session: admitted.record.session, task: nil, time: time, payload: $0)
            })
        }
        let stored: [(TaskRecord, [Event])]
        let written: WriteOutcome
        do throws(RPCError) {
            (stored, written) = try journaled { try journal.submitTasks(rows) }
        } catch {
            // Resume data already used up and its partial moved here: no task or token will ever name it.
            feedAndRun(.admissionsWithdrawn)
            for index in pending { results[index] = .failure(error) }
            return results
        }
        let actions = feed(.created(stored.map(\.0)))
        // The created events go out before any of what follows; what they feed (`eventsJournaled`) waits for
        // `created`'s actions, as any input waits for the list being carried out.
        holdingInputs { for (_, events) in stored { broadcast(events) } }
        run(actions)
        // A task that ended at once (offline in a session that does not wait for connectivity) is in the
        // journal only: it is described from the row submitted for it.
        var finished: [Int64: TaskRecord] = [:]
        for case let .journal(record, _) in actions where record.state.isTerminal { finished[record.id!] = record }

        let ids = stored.map { $0.0.id! }
        if let error = await written.failure {
            logger.error("journal write failed: \(error)")
            // Their events were sent already (in seq order, before the outcome was known) but never journaled:
            // they no longer count as waiting for an acknowledgement.
            var lost: [String: Int] = [:]
            for (record, events) in stored { lost[record.session, default: 0] += events.count }
            feedAndRun(.createsJournaled(ids, failed: true, lostEvents: lost))
            for index in pending {
                results[index] = .failure(RPCError(.ioError, "The journal could not be written (\(error)); nothing was changed"))
            }
            return results
        }
        feedAndRun(.createsJournaled(ids, failed: false))
        for (index, (record, _)) in zip(pending, stored) {
            // Counted at once toward the owner's share until it is read again: the row, and the body a data task
            // may yet keep (base64), so a burst of creates cannot pass the budget by more than the burst.
            noteJournaled(record, owner: given[index].1.uid)
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

    /// Checks one task.create and builds its row, then asks the state to admit it (`admitting`: the caps, the
    /// session taking tasks, its lifecycle and queue place; the state keeps the admitted row for the batch's
    /// insert). Changes nothing but what a resume data token needs (the token is used up, its partial data moved
    /// next to the new destination). `resume`: the token of the request's resume data, redeemed already (`redeem`)
    /// and fed to the state, which keeps it again if this create is refused.
    func prepareCreate(_ p: TaskCreateParams, caller: Caller, resume: ResumeTokenRecord?) throws(RPCError) {
        let s = try session(p.session, for: caller)
        if let destination = p.destination { try Destination.checkClientPath(destination, field: "destination") }
        if let file = p.file { try Destination.checkClientPath(file, field: "file") }
        try validateHeaders(p.headers ?? [:])
        try validateControls(p)
        let exchange = try validateExchange(p, caller: caller)
        if let d = p.description, d.utf8.count > 4096 {
            throw RPCError.invalidParams("description is longer than 4096 bytes")
        }

        let urlString = resume?.url ?? p.url
        guard let urlString else { throw RPCError.invalidParams("url is required (or resumeData)") }
        let url = try Destination.validate(url: urlString) // a token's URL refused so was used up when it was redeemed
        if let exchange {
            var record = exchangeTask(p, exchange, url: urlString)
            record.credentials = p.credentials
            try admit(record, start: p.start == true, bytesExpectedToSend: exchange.fileBytes,
                      disk: diskShare(owner: s.record.uid))
            return
        }
        let isReserved = { (path: String) in self.state.isReserved(path) } // the batch's admitted creates included
        let downloadRoots = self.downloadRoots // made once for the create: it normalizes the configured directory
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
            throw error // a redeemed token is kept again by the caller
        }
        let now = clock()
        var record = TaskRecord(
            session: p.session, kind: "download", url: urlString, state: .suspended,
            destination: destination, partialPath: Destination.partialPath(for: destination),
            headers: p.headers ?? [:], description: p.description, createdAt: now, updatedAt: now)
        applyControls(p, to: &record)
        record.overwrite = p.overwrite == true
        record.credentials = p.credentials
        // No file named by the client: the first response may name it (Content-Disposition, a redirect).
        record.nameFromResponse = explicit?.isEmpty != false
        try admit(record, start: p.start == true, disk: diskShare(owner: s.record.uid), resume: resume)
    }

    /// Feeds `admitting` for a new task's row: the state's answer is its lifecycle, first events and queue
    /// place (in the row it keeps for the batch's insert), or a refusal (this request's answer). A download from
    /// resume data (`resume`, its token redeemed already) continues from the ranges the state answers once its
    /// partial is moved into place; admitted without them, it starts from byte 0.
    private func admit(_ record: TaskRecord, start: Bool, bytesExpectedToSend: Int64? = nil,
                       disk: DaemonState.DiskShare? = nil, resume: ResumeTokenRecord? = nil) throws(RPCError) {
        let offer = resume.map { DaemonState.ResumeOffer(token: $0, partialLength: PartialFile.length(path: $0.partialPath)) }
        let new = DaemonState.NewTask(row: record, start: start, bytesExpectedToSend: bytesExpectedToSend, disk: disk,
                                      resume: offer)
        let answer = feed(.admitting(new))
        run(Array(answer.dropFirst())) // the partial of resume data that cannot be used
        switch answer.first {
        case .admitted(let admission)?:
            if let token = resume { moveResumePartial(token, admission, into: record.partialPath) }
        case .createRefused(let refusal)?:
            throw RPCError(refusal)
        default:
            throw RPCError(.internalError, "task.create was neither admitted nor refused")
        }
    }

    /// Takes the token of a request's resume data out of the journal (once: a second use finds nothing), after
    /// the checks the data itself allows: it is this daemon's, for a session of the same uid, for the same URL.
    private func redeem(_ p: TaskCreateParams, caller: Caller) async throws(RPCError) -> DaemonState.RedeemedToken {
        let s = try session(p.session, for: caller)
        let decoded = try ResumeData.decode(p.resumeData ?? "", key: resumeKey)
        guard decoded.uid == s.record.uid else { throw RPCError(.invalidResumeData, ResumeData.refusal) }
        if let given = p.url, given != decoded.url {
            throw RPCError.invalidParams("url does not match the resume data's URL (\(decoded.url)); omit url")
        }
        let name = decoded.token
        guard let token = try await journaling({ try $0.takeResumeToken(name) }) else {
            throw RPCError(.invalidResumeData, "This resume data was already used, has expired, or is not from this daemon")
        }
        // Fed to the state (`resumeTokenRedeemed`) with the batch's others, after the last wait; counted for the uid
        // the resume data was made for (its session may be gone by then).
        return DaemonState.RedeemedToken(record: token, owner: decoded.uid)
    }

    /// `keepResumeToken`: the token of a refused create is journaled again, in its turn; a write that fails goes to
    /// the state, which has its partial removed.
    func keepResumeToken(_ token: DaemonState.RedeemedToken) {
        let row = token.record
        submit({ try $0.insertResumeToken(row) },
               failing: "resume data of a refused task.create could not be kept; its partial data is removed",
               metadata: ["url": "\(row.url)"]) { _ in .resumeTokenNotKept(owner: token.owner, partial: row.partialPath) }
    }

    /// `admitted` with `resumed` ranges: moves the token's partial into place (the state's row continues from
    /// them with the token's validators). Without them (the state found the partial gone, and had it removed), or
    /// when the move fails (`resumePartialNotMoved`), the task starts from byte 0 (as URLSession does with resume
    /// data it cannot use).
    private func moveResumePartial(_ token: ResumeTokenRecord, _ admission: DaemonState.Admission, into partial: String) {
        guard admission.resumed != nil else {
            logger.notice("resume data's partial data is gone; starting from zero", metadata: ["url": "\(token.url)"])
            return
        }
        guard PartialFile.move(from: token.partialPath, to: partial) else {
            logger.notice("resume data's partial data could not be moved into place; starting from zero",
                          metadata: ["url": "\(token.url)"])
            feedAndRun(.resumePartialNotMoved(partial: token.partialPath, into: partial))
            return
        }
        diskLedger.move(from: token.partialPath, to: partial, uid: admission.owner)
    }
}

// MARK: - task.update: a task's priority and its own bandwidth limit, changed at any time without restarting it.

extension DaemonCore {
    /// Feeds an edit of `t` (`task.update`, `task.move`) and returns its actions to run; a refusal is the
    /// caller's answer (`illegalStateChange`). A finished task, which the journal alone holds, goes with the
    /// state it was read in, for the state to refuse.
    func edit(_ t: ManagedTask, _ edit: DaemonState.TaskEdit) throws(RPCError) -> [DaemonState.Action] {
        var edit = edit
        if state.tasks[t.id] == nil { edit.finished = t.machine.state }
        let actions = feed(.edited(t.id, edit))
        if case .refused(let refusal)? = actions.first {
            throw RPCError.illegalStateChange(task: t.id, from: refusal.transition.state, action: refusal.transition.input)
        }
        return actions
    }

    func updateTask(_ p: TaskUpdateParams, caller: Caller) async throws(RPCError) -> TaskInfo {
        let t = try await task(p.id, for: caller)
        if let limit = p.bandwidthLimit, let problem = ByteRate.problem(with: limit) {
            throw RPCError.invalidParams("bandwidthLimit must be \(problem)")
        }
        let actions = try edit(t, DaemonState.TaskEdit(priority: p.priority, bandwidthLimit: p.bandwidthLimit))
        let limit = state.tasks[p.id]?.record.bandwidthLimit
        logger.info("task updated", metadata: ["task": "\(p.id)", "priority": "\((p.priority ?? t.record.priority).rawValue)",
                                               "bandwidthLimit": "\(limit ?? 0)"])
        run(actions)
        return info(try await task(p.id, for: caller))
    }
}

// MARK: - A new task's controls (expected checksum, bandwidth limit, priority, begin date): checked and applied at task.create.

extension DaemonCore {
    /// task.create's checks of the issue-4 controls: checksum (downloads only), bandwidth limit.
    func validateControls(_ p: TaskCreateParams) throws(RPCError) {
        if let checksum = p.checksum {
            guard p.kind == nil || p.kind == .download else {
                throw RPCError.invalidParams("checksum applies to downloads only (this is a \(p.kind!.rawValue) task)")
            }
            if let problem = Checksum.problem(with: checksum) {
                throw RPCError.invalidParams("checksum \(problem)")
            }
        }
        if let limit = p.bandwidthLimit, let problem = ByteRate.problem(with: limit) {
            throw RPCError.invalidParams("bandwidthLimit must be \(problem)")
        }
        if let date = p.earliestBeginDate, Timestamp.parse(date) == nil {
            throw RPCError.invalidParams("earliestBeginDate must be an RFC 3339 date-time such as "
                                         + "2026-11-25T22:00:00Z or 2026-11-25T23:00:00+01:00 (got '\(date)')")
        }
        if let n = p.maxConnections {
            guard p.kind == nil || p.kind == .download else {
                throw RPCError.invalidParams("maxConnections applies to downloads only (this is a \(p.kind!.rawValue) task)")
            }
            let range = SessionConfiguration.maxConnectionsRange
            guard range.contains(n) else {
                throw RPCError.invalidParams("maxConnections must be from \(range.lowerBound) to \(range.upperBound) (got \(n))")
            }
        }
    }

    /// Stores the controls of `p` (already validated) in a new task's row.
    func applyControls(_ p: TaskCreateParams, to record: inout TaskRecord) {
        record.checksum = p.checksum.flatMap { Checksum(parsing: $0)?.description }
        record.priority = p.priority ?? .normal
        record.bandwidthLimit = p.bandwidthLimit.flatMap { $0 > 0 ? $0 : nil }
        record.maxConnections = p.maxConnections
        record.earliestBeginDate = p.earliestBeginDate.flatMap(Timestamp.parse)
    }
}
