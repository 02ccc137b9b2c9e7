import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Replays the journal: re-attaches every session and task, finishes interrupted publishes, puts
    /// running and queued tasks back in the queue (in their old order), re-arms retry timers, and
    /// drops expired resume data. Runs before the control socket accepts anyone.
    func recover() throws {
        CrashPoints.stop(CrashPoints.recoverStart)
        let began = ContinuousClock.now
        loadLimits()
        let pending = try journal.eventCounts()
        for row in try journal.loadSessions() {
            let s = ManagedSession(record: row, lastEventSeq: try journal.lastEventSeq(session: row.identifier),
                                   pendingEvents: pending[row.identifier] ?? 0)
            feedAndRun(.sessionRestored(s))
        }
        // The tasks table is read on a thread of its own while the state is rebuilt from what it has read: the
        // two take about as long. What the restored tasks ask for (journal writes, the retry timer, finishing
        // an interrupted publish) is carried out once the scan is over, since it holds the journal meanwhile.
        let scan = journal.scanTasks()
        var deferred: [DaemonState.Action] = [], publishing: [Int64] = []
        var resumed = 0
        while let batch = try scan.next() {
            for row in batch {
                guard let id = row.id, let session = state.sessions[row.session] else { continue }
                // Only a task with durable bytes can have lost some (a stat of every partial file was a quarter
                // of a restart with 100,000 tasks that never started): the state keeps what is on disk.
                let length = DaemonState.partialMayBeShort(row) ? PartialFile.length(path: row.partialPath) : nil
                let actions = feed(.taskRestored(ManagedTask(row: row, owner: session.record.uid), partialLength: length))
                if let kept = state.tasks[id]?.record.durableRanges, kept != row.durableRanges {
                    logger.warning("partial data shorter than journaled; resuming from what is on disk",
                                   metadata: ["task": "\(id)", "journaled": "\(row.durableRanges)", "onDisk": "\(kept)"])
                }
                if !row.state.isTerminal, row.bytesDurable > 0 {
                    diskLedger.set(row.partialPath, uid: session.record.uid, bytes: state.tasks[id]?.record.bytesDurable ?? 0)
                }
                if !actions.isEmpty { resumed += 1 }
                deferred.append(contentsOf: actions)
                if row.phase == .publishing { publishing.append(id) }
            }
        }
        let read = ContinuousClock.now
        feedAndRun(.finishedTasksCounted(scan.finishedCounts))
        run(deferred)
        for id in publishing { recoverCompletion(id) }
        for (uid, count) in (try? journal.resumeTokenCounts()) ?? [:] {
            feedAndRun(.resumeDataChanged(uid: uid, kept: count, inFlight: 0))
        }
        feedAndRun(.restoreFinished) // expires old resume data, which the counts above include
        chargeResumeDataPartials()
        housekeeping = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: 1_000_000_000)
                await self?.tick()
            }
        }
        let done = ContinuousClock.now
        logger.info("journal replayed", metadata: ["sessions": "\(state.sessions.count)", "tasks": "\(state.tasks.count)",
                                                   "resumed": "\(resumed)", "readSeconds": "\(Self.seconds(read - began))",
                                                   "afterSeconds": "\(Self.seconds(done - read))"])
        pump()
    }

    /// A duration as seconds with millisecond precision, for logs.
    static func seconds(_ d: Duration) -> String {
        let ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
        return "\(ms / 1000).\(String(ms % 1000 + 1000).dropFirst())"
    }

    /// Once a second: fail pending tasks whose resource timeout has passed (from the deadline index, without a
    /// walk over the tasks); hourly, expire resume data.
    func tick() {
        guard !state.shuttingDown else { return }
        let now = clock()
        feedAndRun(.clockTick)
        // Clients made for proxies nobody has used for a minute are closed.
        let idle = clients.takeIdle(now: now)
        if !idle.isEmpty {
            Task.detached { for client in idle { try? await client.shutdown() } }
        }
    }

    /// Stops every transfer with a checkpoint, leaving tasks in their journaled states so they continue
    /// on the next start. Returns within the configured grace period.
    func shutdown() async {
        feedAndRun(.shutdownBegan)
        launcher.close()
        housekeeping?.cancel()
        retryWake?.task.cancel()
        retryWake = nil
        let runtimes = attempts.values.map(\.runtime)
        for runtime in runtimes { runtime.stop() }
        let grace = configuration.shutdownGrace
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for runtime in runtimes { _ = await runtime.outcome() }
            }
            group.addTask { try? await Task.sleep(nanoseconds: UInt64(grace * 1e9)) }
            await group.next()
            group.cancelAll()
        }
        // A file being moved into place finishes moving, and the journal says so.
        for id in Array(state.completions.keys) { await waitUntilMoved(id) }
        // The rows of attempts still in flight carry their durable lengths (`writeRow`).
        for runtime in runtimes {
            guard let t = state.tasks[runtime.taskID], attempts[runtime.taskID]?.runtime === runtime else { continue }
            _ = try? writeRow(t.record, events: [])
        }
        let unfinished = attempts.count
        let written = journal.writeCounts
        logger.info("transfers checkpointed", metadata: ["stopped": "\(runtimes.count - unfinished)",
                                                         "unfinished": "\(unfinished)",
                                                         "journalTransactions": "\(written.transactions)",
                                                         "journalWrites": "\(written.writes)"])
    }
}
