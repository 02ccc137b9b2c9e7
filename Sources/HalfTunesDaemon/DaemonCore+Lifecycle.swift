// The core's life: recovery, shutdown, the daemon-wide limits, and what the service manager asks of it.
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import Logging
import NIOConcurrencyHelpers

extension DaemonCore {
    /// Replays the journal: re-attaches every session and task, finishes interrupted publishes, puts
    /// running and queued tasks back in the queue (in their old order), re-arms retry timers, and
    /// drops expired resume data. Runs before the control socket accepts anyone.
    func recover(crashRecord: CrashRecord? = nil) async throws {
        CrashPoints.stop(CrashPoints.recoverStart)
        let began = ContinuousClock.now
        if let crashRecord {
            self.crashRecord = crashRecord
            let history = crashRecord.history
            for crash in history.entries {
                logger.warning("halftunesd stopped on a fatal signal earlier", metadata: [
                    "signal": "\(crash.signal)", "boot": "\(crash.bootID)",
                    "tasks": "\(crash.tasks.sorted().map(String.init).joined(separator: ","))"])
            }
            let quarantine = history.quarantined
            if !quarantine.isEmpty {
                logger.error("these tasks ran in each of the last \(CrashHistory.crashesToQuarantine) crashes; they fail as quarantined instead of starting again",
                             metadata: ["tasks": "\(quarantine.sorted().map(String.init).joined(separator: ","))"])
            }
            feedAndRun(.crashesRead(quarantine: quarantine))
        }
        try await loadLimits()
        feedAndRun(.proxyRulesChanged(configuration.proxyRules))
        // Every read here is awaited (`Journal.reading`, the scan's `next()`): the actor never blocks a thread,
        // not even before anything is served.
        let sessions = try await journal.reading { journal in
            let pending = try journal.eventCounts()
            return try journal.loadSessions().map { row in
                ManagedSession(record: row, lastEventSeq: try journal.lastEventSeq(session: row.identifier),
                               pendingEvents: pending[row.identifier] ?? 0)
            }
        }
        for s in sessions { feedAndRun(.sessionRestored(s)) }
        // The tasks table is read on a thread of its own while the state is rebuilt from what it has read: the
        // two take about as long. What the restored tasks ask for (journal writes, the retry timer, finishing
        // an interrupted publish) is carried out once the scan is over, since it holds the journal meanwhile.
        let scan = journal.scanTasks()
        var deferred: [DaemonState.Action] = []
        var resumed = 0
        while let batch = try await scan.next() {
            for row in batch {
                // Only a task with durable bytes can have lost some (a stat of every partial file was a quarter
                // of a restart with 100,000 tasks that never started): the state keeps what is on disk.
                let length = DaemonState.partialMayBeShort(row) ? PartialFile.length(path: row.partialPath) : nil
                let actions = feed(.taskRestored(row, partialLength: length))
                if !actions.isEmpty { resumed += 1 }
                deferred.append(contentsOf: actions) // a quarantined task's, too: it failed and left the state at once
                guard let id = row.id, let t = state.tasks[id] else { continue } // not taken, or finished at once
                if t.record.durableRanges != row.durableRanges {
                    logger.warning("partial data shorter than journaled; resuming from what is on disk",
                                   metadata: ["task": "\(id)", "journaled": "\(row.durableRanges)", "onDisk": "\(t.record.durableRanges)"])
                }
                if !t.record.state.isTerminal, t.record.bytesDurable > 0 { // the ledger follows what the state kept
                    diskLedger.set(t.record.partialPath, uid: t.owner, bytes: t.record.bytesDurable)
                }
            }
        }
        let read = ContinuousClock.now
        feedAndRun(.finishedTasksCounted(scan.finishedCounts))
        run(deferred)
        // Read as the rest of recovery is: a journal that cannot say what resume data it keeps stops the start
        // (the caps and the disk ledger would count none of it).
        for (uid, count) in try await journal.reading({ try $0.resumeTokenCounts() }) {
            feedAndRun(.resumeDataChanged(uid: uid, kept: count))
        }
        feedAndRun(.restoreFinished) // expires old resume data, which the counts above include
        try await chargeResumeDataPartials()
        await settled() // invalidations ended and resume data expired before anything is served
        timers.housekeeping = Task { [weak self] in
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
        let now = clock()
        feedAndRun(.clockTick) // nothing once shutting down (the state's rule)
        // Clients made for proxies nobody has used for a minute are closed.
        let idle = clients.takeIdle(now: now)
        if !idle.isEmpty {
            Task.detached { for client in idle { try? await client.shutdown() } }
        }
    }

    /// Stops every transfer with a checkpoint, leaving tasks in their journaled states so they continue
    /// on the next start. Returns within the configured grace period. What stops and what is written is the
    /// state's (`shutdownBegan`, `shutdownGraceEnded`); here it is carried out and waited for.
    func shutdown() async {
        let runtimes = attempts.values.map(\.runtime)
        let reports = attempts.values.compactMap(\.reports)
        feedAndRun(.shutdownBegan) // stops every attempt in flight
        await settled() // the journal work under way ends before the journal closes
        services.launcher.close()
        services.notifications.close()
        timers.housekeeping?.cancel()
        timers.retryWake?.cancel()
        timers.retryWake = nil
        let grace = configuration.shutdownGrace
        // Each attempt's end, and every report before it (its last checkpoint) handled by the state, within the
        // grace period: an attempt that does not stop in time (a write stuck on the disk) is not waited for.
        let stopped = Task {
            for runtime in runtimes { _ = await runtime.outcome() }
            for report in reports { await report.value }
        }
        await Self.wait(atMost: grace, for: stopped)
        // A file being moved into place finishes moving, and the journal says so.
        for id in Array(state.completions.keys) { await moveEnded(id) }
        feedAndRun(.shutdownGraceEnded) // the rows of attempts still in flight carry their durable ranges
        feeding.inputLog?.writeReport()
        feeding.inputLog = nil // the inputs of the last moments (an attempt that outlived the grace) are not replayed
        let unfinished = attempts.count
        let written = journal.writeCounts
        logger.info("transfers checkpointed", metadata: ["stopped": "\(runtimes.count - unfinished)",
                                                         "unfinished": "\(unfinished)",
                                                         "journalTransactions": "\(written.transactions)",
                                                         "journalWrites": "\(written.writes)"])
    }
}

extension DaemonCore {
    /// Waits until `work` ends or `seconds` pass, whichever comes first; work that goes on is not waited for (a
    /// task group would wait for it: awaiting a task's value does not stop at a cancellation).
    static func wait(atMost seconds: Double, for work: Task<Void, Never>) async {
        let waiter = NIOLockedValueBox<CheckedContinuation<Void, Never>?>(nil)
        let resume: @Sendable () -> Void = { waiter.withLockedValue { $0?.resume(); $0 = nil } }
        var timer: Task<Void, Never>?
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiter.withLockedValue { $0 = continuation }
            Task { await work.value; resume() }
            timer = Task { try? await Task.sleep(nanoseconds: UInt64(Seconds.nanoseconds(seconds))); resume() }
        }
        timer?.cancel()
    }
}

// MARK: - Daemon-wide limits: configured (file, flags, reloads), overridden by daemon.setLimits (journaled), applied live.

extension DaemonCore {
    /// The limits in effect (the state's: DaemonState+Limits.swift).
    var limits: DaemonLimits { state.effectiveLimits }

    /// At start: the configured limits, then the journaled `daemon.setLimits` values over them. Read as the rest of
    /// recovery is: a journal that cannot say which limits were set stops the start (running with the configured
    /// ones instead would quietly undo what a user set, and the next `daemon.setLimits` would write over it).
    func loadLimits() async throws {
        feedAndRun(.limitsConfigured(DaemonLimits(maxConcurrent: configuration.maxConcurrent,
                                                  maxConnectionsPerHost: configuration.maxConnectionsPerHost,
                                                  bandwidthLimit: configuration.bandwidthLimit)))
        let stored: [String: String]
        do {
            stored = try await journal.reading { try $0.settings() }
        } catch {
            throw DaemonError.journal("the limits set with daemon.setLimits (table settings) cannot be read: \(error)")
        }
        feedAndRun(.limitsRestored(stored: stored))
        guard state.limitSources.overrides != DaemonSetLimitsParams() else { return }
        logger.info("limits set with daemon.setLimits are in effect (they win over the configuration file)",
                    metadata: limitsMetadata)
    }

    /// A reload read new configured limits; values set with `daemon.setLimits` still win.
    func setConfiguredLimits(_ configured: DaemonLimits) {
        feedAndRun(.limitsConfigured(configured))
        let masked = state.limitSources.masked
        if !masked.isEmpty {
            let keys = masked.map(\.rawValue).joined(separator: ", ")
            logger.notice("\(keys) keep the value set with daemon.setLimits (`halftunesctl limits` changes it); the configuration file's value is not used")
        }
    }

    /// `daemon.setLimits`: checks every given value, journals them, applies them to running transfers.
    /// The limits are shared by every user of the daemon, so only root and the daemon's own user may
    /// change them.
    func setLimits(_ p: DaemonSetLimitsParams, uid: UInt32) async throws(RPCError) -> DaemonLimits {
        let daemonUID = state.daemonUID // the uid the daemon runs as, as the state knows it (launches, agents)
        guard uid == 0 || uid == daemonUID else {
            throw RPCError(.permissionDenied, "Only root\(daemonUID == 0 ? "" : " and uid \(daemonUID), the daemon's user,") "
                + "may change the daemon-wide limits; they apply to every user of this daemon")
        }
        if let v = p.maxConcurrent, !DaemonState.Limit.countRange.contains(v) {
            throw RPCError.invalidParams("maxConcurrent must be from 1 to \(DaemonState.Limit.countRange.upperBound) (got \(v))")
        }
        if let v = p.maxConnectionsPerHost, !DaemonState.Limit.countRange.contains(v) {
            throw RPCError.invalidParams("maxConnectionsPerHost must be from 1 to \(DaemonState.Limit.countRange.upperBound) (got \(v))")
        }
        if let v = p.bandwidthLimit, let problem = ByteRate.problem(with: v) {
            throw RPCError.invalidParams("bandwidthLimit must be \(problem)")
        }
        var values: [String: String?] = [:]
        if let v = p.maxConcurrent { values[DaemonState.Limit.maxConcurrent.rawValue] = String(v) }
        if let v = p.maxConnectionsPerHost { values[DaemonState.Limit.maxConnectionsPerHost.rawValue] = String(v) }
        if let v = p.bandwidthLimit { values[DaemonState.Limit.bandwidthLimit.rawValue] = String(v) }
        guard !values.isEmpty else { return limits }
        let settings = values
        let answer = feed(.limitsSetting)
        guard case .limitsTicket(let ticket)? = answer.first else {
            throw RPCError(.internalError, "daemon.setLimits was given no place among the writes")
        }
        run(Array(answer.dropFirst())) // nothing else today
        try await journaling { try $0.setSettings(settings) } // written in the order of the tickets
        feedAndRun(.limitsWritten(p, ticket: ticket)) // so two calls resuming out of order still end as written
        logger.notice("limits changed", metadata: limitsMetadata)
        return limits
    }

    private var limitsMetadata: Logger.Metadata {
        ["maxConcurrent": "\(limits.maxConcurrent)", "maxConnectionsPerHost": "\(limits.maxConnectionsPerHost)",
         "bandwidthLimit": "\(limits.bandwidthLimit)"]
    }
}

// MARK: - What the service manager asks of the core: idleness (exit-when-idle), the watchdog's heartbeat, the STATUS= line.

extension DaemonCore {
    /// Nothing is pending: no task is queued, running or waiting to retry, no transfer is still stopping
    /// and no finished file is being moved into place. (Suspended tasks do not count.)
    func isIdle() -> Bool { state.isIdle }

    /// Answers as soon as the actor gets to it: the watchdog's proof that the core is not stuck.
    func heartbeat() {}

    /// The status line for the service manager: "3 running, 2 queued, 1 waiting, 12.4 MB/s".
    func serviceStatusLine() -> String {
        let s = status()
        var parts = ["\(s.tasks[TaskState.running.rawValue] ?? 0) running",
                     "\(s.tasks[TaskState.queued.rawValue] ?? 0) queued"]
        if let waiting = s.tasks[TaskState.waiting.rawValue], waiting > 0 { parts.append("\(waiting) waiting") }
        parts.append(Self.formatRate(s.downloadRate))
        return parts.joined(separator: ", ")
    }

    /// "0 B/s", "950 B/s", "12.4 MB/s" (powers of 1000, one decimal).
    static func formatRate(_ bytesPerSecond: Double) -> String {
        let units = ["B/s", "kB/s", "MB/s", "GB/s", "TB/s"]
        var value = max(0, bytesPerSecond)
        var unit = 0
        while value >= 999.95 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        if unit == 0 { return "\(Int(value.rounded())) \(units[0])" }
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) \(units[unit])"
    }
}
