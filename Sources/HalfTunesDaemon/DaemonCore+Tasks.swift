// The task methods of the RPC surface: resume, suspend, cancel (with resume data), get and list.
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    func resumeTask(_ id: Int64, caller: Caller) async throws(RPCError) -> TaskInfo {
        guard !state.shuttingDown else { throw RPCError(.shuttingDown, "halftunesd is shutting down") }
        _ = try await task(id, for: caller) // only the owner (or root) may
        if let now = try await apply(.resume, to: id) { return info(now) }
        return info(try await task(id, for: caller))
    }

    /// Pauses the task. Returns once its transfer has stopped, so `bytesDurable` in the answer is
    /// final: everything received was fsynced and journaled, and a resume continues exactly there.
    func suspendTask(_ id: Int64, caller: Caller) async throws(RPCError) -> TaskInfo {
        _ = try await task(id, for: caller) // only the owner (or root) may
        await waitUntilMoved(id)
        try await apply(.suspend, to: id)
        if let runtime = attempts[id]?.runtime { _ = await runtime.outcome() } // stopping: wait for its end
        return info(try await task(id, for: caller))
    }

    func cancelTask(_ id: Int64, produceResumeData: Bool, caller: Caller) async throws(RPCError) -> TaskCancelResult {
        _ = try await task(id, for: caller) // only the owner (or root) may
        await waitUntilMoved(id)
        let before = try await task(id, for: caller)
        let canKeep = produceResumeData && Validators(etag: before.record.etag, lastModified: before.record.lastModified).ifRangeValue != nil
        if canKeep {
            // Resume data keeps a partial file until redeemed or expired: a user keeps a bounded number of them.
            // Refused before anything is canceled, so nothing is lost.
            let kept = state.resumeDataHeld(by: before.owner)
            guard kept < configuration.maxResumeDataPerUID else {
                throw RPCError(.limitExceeded, "uid \(before.owner) already keeps \(kept) partial files as resume data, the most "
                    + "allowed (max-resume-data-per-uid \(configuration.maxResumeDataPerUID)); the task was not canceled. "
                    + "Resume some (task.create with resumeData) or cancel without resume data; resume data also "
                    + "expires after 7 days")
            }
        }
        if canKeep { feedAndRun(.resumeDataChanged(uid: before.owner, kept: 0, inFlight: 1)) }
        defer { if canKeep { feedAndRun(.resumeDataChanged(uid: before.owner, kept: 0, inFlight: -1)) } }
        let after = try await apply(.cancel(keepPartial: canKeep), to: id)
        var resumeData: String?
        if canKeep {
            // Wait for the transfer to stop so the durable ranges are final. The runtime has them at once;
            // the task's row gets them only when the core has handled the transfer's end, maybe later.
            var durable: ByteRanges?
            if let runtime = attempts[id]?.runtime {
                _ = await runtime.outcome()
                durable = runtime.durableRanges
            }
            resumeData = try await makeResumeData(for: id, durable: durable)
        }
        // Without resume data nothing was awaited since `apply`: its answer is the task as it is.
        if !canKeep, let after { return TaskCancelResult(task: info(after), resumeData: nil) }
        return TaskCancelResult(task: info(try await task(id, for: caller)), resumeData: resumeData)
    }

    /// `durable`: the ranges of the attempt that just stopped, newer than the row's (which they replace: after a
    /// restart from zero the row's older ranges are no longer in the file).
    private func makeResumeData(for id: Int64, durable: ByteRanges?) async throws(RPCError) -> String? {
        let known = state.tasks[id]
        guard let r = try await (known != nil ? known : finishedTask(id))?.record else { return nil }
        let ranges = (durable ?? r.durableRanges).clipped(to: PartialFile.length(path: r.partialPath) ?? 0)
        let bytes = ranges.count
        guard bytes > 0 else {
            discardPartial(r.partialPath)
            return nil
        }
        let token = ResumeData.newToken()
        let row = ResumeTokenRecord(token: token, session: r.session, url: r.url, partialPath: r.partialPath,
                                    destination: r.destination, ranges: ranges, bytesExpected: r.bytesExpected,
                                    etag: r.etag, lastModified: r.lastModified, createdAt: clock())
        do throws(RPCError) {
            try await journaling { try $0.insertResumeToken(row) }
        } catch {
            discardPartial(r.partialPath) // no token will ever name it
            throw error
        }
        let owner = state.sessions[r.session]?.record.uid ?? UInt32.max
        feedAndRun(.resumeDataChanged(uid: owner, kept: 1, inFlight: 0))
        return ResumeData(token: token, url: r.url, bytes: bytes, uid: owner).encoded(key: resumeKey)
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
    func listTasks(_ p: TaskListParams, caller: Caller) async throws(RPCError) -> TaskListResult {
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
        // its finished tasks, in the same read, off the actor), and the unfinished tasks on it are described from
        // memory (their progress is there).
        let scope: [String]? = p.session.map { [$0] }
            ?? (caller.uid == 0 ? nil : state.sessions.values.filter { $0.record.uid == caller.uid }.map(\.record.identifier))
        let (from, state) = (after, p.state)
        let page = try await nonblocking { try $0.taskPage(after: from, sessions: scope, state: state, limit: limit + 1) }
        let ids = page.ids.prefix(limit)
        // A task unfinished when the page was read and finished since is in neither: read again (rare).
        let finishedSince = ids.filter { self.state.tasks[$0] == nil && page.finished[$0] == nil }
        let lateIDs = Array(finishedSince)
        let late = lateIDs.isEmpty ? [:] : try await nonblocking { try $0.loadTasks(ids: lateIDs) }
        var list: [ManagedTask] = []
        for id in ids {
            guard let t = self.state.tasks[id] ?? (page.finished[id] ?? late[id]).flatMap(finishedTask),
                  caller.mayAccess(owner: t.owner) else { continue }
            if let wanted = p.state, t.machine.state != wanted { continue } // changed while the page was read
            list.append(t)
        }
        let more = page.ids.count > limit
        return TaskListResult(tasks: infos(list).map(\.withoutResponseBody),
                              nextCursor: more ? ids.last.map(String.init) : nil)
    }

    /// Runs journal reads off the actor (`Journal.reading`): the actor serves other calls meanwhile. State read
    /// before the `await` may have changed after it.
    func nonblocking<T: Sendable>(_ query: @escaping @Sendable (Journal) throws -> T) async throws(RPCError) -> T {
        do {
            return try await journal.reading(query)
        } catch {
            logger.error("journal read failed: \(error)")
            throw RPCError(.ioError, "The journal could not be read (\(error))")
        }
    }
}
