// The core's state's vocabulary: every input the runner feeds, every action it carries out, and their values.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    enum Input: Equatable {
        /// A `task.create` that passed the runner's checks (DaemonState+Admission.swift): answered `admitted`
        /// (its lifecycle, first events and queue place; counted against the caps until `created`) or
        /// `createRefused`. The state completes the admitted row (`admittedRows`); the runner journals a batch's
        /// rows in one write, then feeds `created`. A create from resume data is `admitted` with the ranges it
        /// continues from (its row has them, with the token's validators), or from byte 0 with its token's partial
        /// removed (`removePartial`) when that is gone.
        case admitting(NewTask)
        /// The batch's admitted creates will not be created (their journal write could not be submitted): the
        /// partials resume data brought them go (`removePartial`).
        case admissionsWithdrawn
        /// The batch's admitted rows (`admittedRows`) were submitted to the journal, which gave them ids: these,
        /// in the same order. Their tasks, built from the admissions, join the state, taking their destinations,
        /// places and counts at once; they start nothing until `createsJournaled` (`inserting`).
        case created([TaskRecord])
        /// The rows of tasks created `inserting` were written (`failed: false`): the queued ones may start. Or
        /// the insert failed: the tasks leave the state as if never created (their resume data's partial, if
        /// any, is removed); the journal holds nothing of them, nor of their events (`lostEvents`, per session),
        /// which no longer count as unacknowledged.
        case createsJournaled([Int64], failed: Bool, lostEvents: [String: Int] = [:])
        /// A lifecycle input for one task (`task.resume`, `task.suspend`, `task.cancel`). `extra` events go just
        /// before `didComplete`. Its state machine may refuse it: then the only action is `refused`. A cancel that
        /// asks for resume data (`keepPartial: true`) may be refused by the state (`resumeDataRefused`), or become one
        /// without it (no validator to continue against); one that keeps it goes on with `resumeDataStopped`.
        case task(Int64, TaskStateMachine.Input, extra: [EventPayload] = [])
        /// A lifecycle input for a finished task the journal alone holds (read back in `state`): its state machine
        /// answers as it would (a refusal is the only action), and nothing changes.
        case finishedTask(Int64, TaskStateMachine, TaskStateMachine.Input)
        /// Slots may be free: start queued tasks while the limits allow, fairly between users.
        case grantSlots
        /// The configured daemon-wide limits (file and flags: at start and on every reload); `daemon.setLimits`'s
        /// win over them (DaemonState+Limits.swift). Slots are granted within the limits in effect.
        case limitsConfigured(DaemonLimits)
        /// At start: the journal's settings as read (`daemon.setLimits` values by `Limit` name); a value that is
        /// not a number in its limit's range is not used (the configured one stays in effect).
        case limitsRestored(stored: [String: String])
        /// A `daemon.setLimits` call is about to write its values: answered `limitsTicket`, its place among such
        /// writes, which `limitsWritten` brings back.
        case limitsSetting
        /// The call's values were journaled: each takes effect unless a later call's already did.
        case limitsWritten(DaemonSetLimitsParams, ticket: UInt64)
        /// The retry timer fired: every waiting task whose time has come retries.
        case retryTimerFired
        /// The once-a-second tick: pending tasks whose resource deadline has passed fail (read from the
        /// deadline index, not a walk over the tasks).
        case clockTick
        /// A completion's result from off the core: a digest, the name the runner chose, how a move went.
        case completion(Int64, attempt: Int, CompletionMachine.Input)
        /// `recoverPublish`'s report: `recovery`, what the file system shows of the task's journaled publish intent,
        /// and the partial's length (nil: it is gone; its durable bytes count).
        case recoveredCompletion(Int64, PublishRecovery, totalBytes: Int64?)
        /// A task's attempt ended (`jitterSample`, 0..<1, spreads the retry times of transient failures).
        case attemptEnded(Int64, AttemptOutcome, jitterSample: Double)
        /// What a task's attempt in flight reports (DaemonState+Progress.swift).
        case attemptProgress(Int64, Progress)
        /// A task's row changed outside its lifecycle (`task.move`, `task.update`): journaled, and slots granted.
        case edited(Int64, TaskEdit)
        /// `session.open` (DaemonState+Sessions.swift, `opening`): answered `sessionOpen` (reattached,
        /// reconfiguring with a ticket, opened, or refused), then `writeSession` when a row must be written.
        case sessionOpening(SessionRecord, reconfigure: Bool)
        /// A session's new configuration was journaled (`ticket`: the one `sessionOpen(.reconfiguring)` gave): a
        /// new `maxConcurrent` applies at once. A configuration is taken only if no later ticket's was, so two
        /// reconfigurations that resume out of order leave the one the journal wrote last (nil: taken as it
        /// comes); a session no longer active keeps its own.
        case sessionConfigured(String, SessionConfiguration, ticket: UInt64? = nil)
        /// `session.invalidate` (DaemonState+Sessions.swift): its tasks are canceled as asked, and it takes
        /// nothing new.
        case sessionInvalidating(String, cancelTasks: Bool)
        /// A new session's row could not be written (`createdAt`: only if it is still that session): it leaves the
        /// state with its tasks; its subscribers are let go.
        case sessionRemoved(String, createdAt: Double? = nil)
        /// The runner carried out `finishInvalidation`: the session's journal rows were deleted with
        /// `deletedTokens` resume data tokens (they no longer count for its owner), and it leaves the state as
        /// `sessionRemoved` does; nil: the journal could not be read or written, and it stays invalidating (the next
        /// start, or anything else that finds it done, asks again).
        case invalidationFinished(String, deletedTokens: Int?)
        /// The session's journaled events through `lastSeq` (`count` of them) were stored.
        case eventsJournaled(session: String, lastSeq: Int64, count: Int)
        /// The session's events through `through` were acknowledged and `pruned` from the journal.
        case eventsAcknowledged(session: String, through: Int64, pruned: Int, droppedBodies: [Int64])
        /// Recovery: a journaled session with its unacknowledged events (fed before its tasks).
        case sessionRestored(ManagedSession)
        /// Recovery, before the tasks: the tasks that ran in each of the daemon's last `CrashHistory.crashesToQuarantine`
        /// crashes. Such a task, if pending, is restored failed (`quarantined`), never started again.
        case crashesRead(quarantine: Set<Int64>)
        /// Recovery: a journaled unfinished task's row (or one whose publish a crash interrupted), as the journal
        /// holds it, in any order: the task is built from it, owned by its session's user, and keeps its place in
        /// the queue; tasks queued later take places after every journaled one. A row of a session the state does
        /// not have is left alone. `partialLength`: the partial file's length on disk, when `partialMayBeShort` said
        /// to look (nil: not looked at, or no file); durable ranges past it were lost (a disk that lost writes, a
        /// file cut) and are dropped, so the transfer resumes from what is there.
        case taskRestored(TaskRecord, partialLength: Int64? = nil)
        /// Recovery: how many finished tasks (in the journal only) each session has, per state.
        case finishedTasksCounted([String: [TaskState: Int]])
        /// Recovery fed every session and task: invalidations that were waiting for nothing more finish.
        case restoreFinished
        /// Finished tasks of a session were deleted from the journal (their retention passed).
        case finishedTasksDeleted(String, [TaskState: Int])
        /// Shutdown began: nothing starts and nothing retries from now on; every attempt in flight stops (each
        /// ends with a checkpoint, its end fed as `attemptEnded` as usual).
        case shutdownBegan
        /// The daemon's proxy rules (at start, and when a reload changed them): with each session's own settings
        /// they tell which proxy a task's first request goes through, counted per uid by `grantSlots`.
        case proxyRulesChanged(ProxyRules)
        /// Shutdown's grace period is over (or every attempt ended before it): the rows of tasks whose attempts
        /// have still not ended (a write stuck on the disk) are written with the durable ranges the state has.
        case shutdownGraceEnded
        /// The extra connections in use to `host` (beyond one per running task) are now `extras`: fewer may
        /// let a task queued for the host start.
        case connectionsChanged(host: String, extras: Int)
        /// The network or power conditions changed (DaemonState+Conditions.swift).
        case conditionsChanged(SystemConditions, serial: Int)
        /// The session's live subscribers are now `count` (subscribed, or a connection left): with none, waiting
        /// events start its launch unit.
        case subscribersChanged(String, count: Int)
        /// An agent of `uid` connected (`agent.register`): that user's launches that waited for one start.
        case agentRegistered(UInt32)
        /// The agent of `uid` went away (or was replaced): the launches it was starting or watching wait again.
        case agentLeft(UInt32)
        /// The service manager answered the start of the session's launch unit `unit` (nil: started).
        case launchStartAnswered(String, unit: String, error: String?)
        /// The session's started launch unit ended (its service `Result` and main exit status).
        case launchUnitEnded(String, unit: String, result: String, exitStatus: Int32)
        /// The session's launch record (`recordLaunch`) could not be journaled: the state writes it again later
        /// (DaemonState+Launch.swift), as it has it then, while the journal still takes writes.
        case launchRecordWriteFailed(String, journalTakesWrites: Bool)
        /// At start: the resume data each uid keeps, as the journal holds it.
        case resumeDataChanged(uid: UInt32, kept: Int)
        /// Resume data tokens of `session` were taken from the journal (expired: `by` < 0); its owner's count
        /// follows. Nothing for a session gone meanwhile (its tokens went with it). A `task.cancel`'s own token is
        /// counted by `resumeTokenWritten`, a redeemed one by `resumeTokenRedeemed`, one kept again by
        /// `keepResumeToken` (and `resumeTokenNotKept`).
        case resumeTokensChanged(session: String, by: Int)
        /// A task's row (`journal`) or checkpoint could not be journaled, as the runner saw it (facts only): the
        /// state has the row written again later and decides which of its events go out live
        /// (DaemonState+RowRewrites.swift).
        case rowWriteFailed(RowWriteFailure)
        /// The partial of resume data admitted at a task.create (`Admission.resumed`) could not be moved to the new
        /// task's (`into`): the task starts from byte 0, and the token's partial goes.
        case resumePartialNotMoved(partial: String, into: String)
        /// A resume data token was taken from the journal for a task.create of the batch being checked (fed after
        /// the batch's last wait, before its first `admitting`): used by an admitted create, else kept again when the
        /// batch ends (`keepResumeToken`).
        case resumeTokenRedeemed(RedeemedToken)
        /// A `keepResumeToken` could not be written: nothing will ever name its partial, which goes.
        case resumeTokenNotKept(owner: UInt32, partial: String)
        /// The transfer of a task canceled keeping resume data stopped (or none was in flight): `durable`, the
        /// stopped attempt's ranges (nil: none was in flight); `partialLength`, the partial's length now (nil:
        /// gone); `token`, a new random token. Answered `writeResumeToken`, or the partial's `removePartial`.
        case resumeDataStopped(Int64, durable: ByteRanges?, partialLength: Int64?, token: String)
        /// The `writeResumeToken` of the task was written (or `failed`: its partial goes).
        case resumeTokenWritten(Int64, failed: Bool)
        /// A sweep (`sweepRetention`) ended; `backlog`: it stopped at its budget with finished tasks left to delete
        /// (the next tick sweeps again); `deletedAny`: it deleted rows, whose pages go back (`releaseFreePages`).
        case retentionSwept(backlog: Bool, deletedAny: Bool = false)
        /// The expiry of old resume data (`pruneResumeData`) failed to read or delete what expired (the runner
        /// logged why; what it took before the failure is fed as `resumeTokensChanged`): tried again in
        /// `resumeDataPruneRetry` seconds, not at the next hourly expiry.
        case resumeDataExpiryFailed
        /// The first response named a download the client named no file for (the runner chose the free path).
        case responseNamed(Int64, destination: String, suggestedFilename: String)
    }

    /// What an attempt in flight reports, in order.
    enum Progress: Sendable, Equatable {
        /// A download's response was accepted.
        case started(ResponseStart)
        /// Response body bytes (a download's totals are positions in the file).
        case received(delta: Int64, total: Int64, expected: Int64?)
        /// An upload's file was opened: this attempt sends `bytes` bytes.
        case bodyOpened(bytes: Int64)
        /// Part of an upload's body was sent.
        case sent(delta: Int64, total: Int64, expected: Int64?)
        /// A download's bytes in these ranges were fsynced: journal them (`checkpoint`).
        case checkpointed(ByteRanges)
        /// The attempt leased the HTTP client of this proxy for one of its requests (reported once per proxy): a
        /// redirect hop or a segment may go through another proxy than its first request's, and until the attempt
        /// ends it counts against its owner's proxies as the engine counts it.
        case proxyLeased(ProxyServer)
    }

    enum Action: Equatable {
        /// `admitting`'s answer: the new task may be created so (the caller journals it and feeds `created`; with
        /// `resumed`, it first moves the resume data's partial into place).
        case admitted(Admission)
        /// `admitting`'s answer: the new task is refused (the caller answers with it); nothing changed.
        case createRefused(CreateRefusal)
        /// The task's state machine refused the `task` input: nothing changed (the caller answers with it).
        case refused(Refused)
        /// A `task.resume` while shutting down is refused: nothing changed (answered `shuttingDown`).
        case refusedWhileShuttingDown(task: Int64)
        /// A suspend or cancel of a task whose file is being moved into place: nothing changed; the runner feeds
        /// it again once the move has ended (`completionEnded`), and it then acts on the state the move left.
        case heldWhileMoving(task: Int64)
        /// A `task.cancel` asking for resume data is refused: its owner keeps the most allowed; nothing changed.
        case resumeDataRefused(ResumeDataRefusal)
        /// Journal the task's row with these events in one transaction, then deliver them live (the row's durable
        /// ranges are the state's: every checkpoint passes through `checkpointed` first).
        case journal(TaskRecord, [EventPayload])
        /// Journal a download's durable ranges after an fsync (with the response's validators, length and final
        /// URL, once a response gave them), in the journal's order with the task's other writes.
        case checkpoint(Int64, durable: ByteRanges, head: CheckpointHead?)
        /// Deliver a live event without a seq to the session's subscribers: progress (never journaled), or the
        /// events of a row the journal would not take (`rowWriteFailed`).
        case deliver(session: String, task: Int64, EventPayload)
        /// Start an attempt of the task (it is `running` and holds a slot).
        case startAttempt(Int64)
        /// The task's own bandwidth limit changed while its attempt is in flight: the attempt follows `rate`
        /// (bytes per second, 0: none) within `RateLimiter.maximumWaitSlice`.
        case setBandwidth(Int64, rate: Int64)
        /// Stop the task's attempt in flight (its outcome comes back as an input).
        case stopAttempt(Int64)
        /// Remove the task's partial file (nothing is writing it).
        case removePartial(path: String)
        /// Wake the retry timer at this time instead (the state emits it only when no timer is set for this time
        /// or earlier).
        case armRetryTimer(at: Double)
        /// Compute the digest of the task's partial off the core; feed it back as `completion(.digestComputed)`.
        case computeDigest(Int64, attempt: Int, path: String)
        /// Choose a free name to publish at: `preferred` (the journaled location, else the destination) unless it
        /// exists or is in `avoiding`, else a free `name (n).ext` of `destination` that no other task holds (it looks
        /// at the file system); feed it back as `completion(.nameChosen)`.
        case chooseName(Int64, attempt: Int, preferred: String, destination: String, avoiding: Set<String>)
        /// A download's first response names its file (`candidate`, in the directory reserved at create): make it a
        /// free path that no other task holds (it looks at the file system; the server's name never replaces a
        /// file) and feed it back as `responseNamed`; `reserved` (the name reserved at create) when none is free.
        case chooseResponseName(Int64, candidate: String, suggested: String, reserved: String)
        /// Sync the journal (the intent), then move the partial to `location` off the core, giving the file
        /// `metadata` (its origin, referrer and modification time); feed the outcome back as `completion(.moveEnded)`.
        case move(Int64, attempt: Int, partial: String, location: String, replacing: Bool, partialIsDurable: Bool,
                  metadata: PublishMetadata)
        /// A restored task's publish intent was journaled before the daemon stopped: look at the file system
        /// (`FilePublisher.recover`: is `partial` at `location` already?) and the partial's length, and feed
        /// `recoveredCompletion`.
        case recoverPublish(Int64, partial: String, location: String)
        /// Tell `to` of a finished task, once the `journal` action just before it (its row with `didComplete`) is
        /// durable, and never if that write failed.
        case notify(AgentNotice, to: NoticeRecipient)
        /// The task's completion ended (published at `location`, or failed): whoever waits for its move goes on.
        case completionEnded(Int64, location: String?, error: TaskError?)
        /// `limitsSetting`'s answer: the caller writes its values, then feeds `limitsWritten` with this ticket.
        case limitsTicket(UInt64)
        /// The daemon-wide bandwidth in effect changed (bytes per second, 0: none): running transfers follow it.
        case setGlobalBandwidth(rate: Int64)
        /// `sessionOpening`'s answer: the caller answers with it (and carries out the `writeSession` after it).
        case sessionOpen(SessionOpening)
        /// Journal the session's row (submitted: in the journal's order before anything later actions submit); the
        /// runner hands the write's outcome back to the caller that fed the input (`run`'s result).
        case writeSession(SessionRecord)
        /// Journal the resume data of a canceled task (`resumeDataStopped`'s answer); the runner hands the write's
        /// outcome back to the caller, who answers with the resume data (of `owner`) and feeds `resumeTokenWritten`.
        case writeResumeToken(ResumeTokenRecord, owner: UInt32)
        /// A cancel's answer: the canceled task's partial is kept for resume data; the caller (`task.cancel`) waits
        /// for its transfer to stop, measures the partial, and feeds `resumeDataStopped`.
        case makeResumeData(Int64)
        /// Journal again a token redeemed for a create that was refused (submitted after the batch's insert); a write
        /// that fails is fed back as `resumeTokenNotKept`.
        case keepResumeToken(RedeemedToken)
        /// The session left the state: tell its subscribers (`didBecomeInvalid`) and let them go, so none of them
        /// is left registered for an identifier opened again later.
        case releaseSubscribers(session: String)
        /// Delete this invalidated session (its tasks have finished and no transfer of it is stopping): its
        /// resume data, its journal rows; then feed `invalidationFinished` (its subscribers are let go:
        /// `releaseSubscribers`). Asked once per session until that outcome is fed.
        case finishInvalidation(session: String)
        /// Journal the session's launch record (`sessions.launch`; nil clears it).
        case recordLaunch(session: String, SessionLaunchRecord?)
        /// Ask the service manager to start the session's launch unit (after `failures` failed starts in a row);
        /// feed its answer as `launchStartAnswered`.
        case startUnit(session: String, unit: String, failures: Int)
        /// Watch the started unit until it ends; feed `launchUnitEnded`.
        case watchUnit(session: String, unit: String)
        /// Ask the agent of `uid` to start the session's launch unit in that user's manager and watch it; its
        /// reports come back as `launchStartAnswered` and `launchUnitEnded`.
        case askAgent(uid: UInt32, session: String, unit: String)
        /// Delete the finished tasks these sweeps allow from the journal, within the runner's budget; feed
        /// `finishedTasksDeleted` per batch and `retentionSwept` at the end.
        case sweepRetention([RetentionSweep])
        /// Give the journal's free pages back to the file system (many rows went at once).
        case releaseFreePages
        /// `host` may now have `extras` extra connections in all (split downloads; `HostConnections.setAllowance`,
        /// which asks the holders to shed what is above it): after any input that changed the host's running or
        /// queued tasks, or the per-host limit, and so its allowance (`allowancesChanged`).
        case hostAllowance(String, extras: Int)
        /// Delete the resume data created before `createdBefore` (`Caps.resumeDataLifetime` ago), with its partial
        /// files; feed `resumeTokensChanged` for each token taken.
        case pruneResumeData(createdBefore: Double)
    }

    /// What `task.update` and `task.move` change in a task's row (nil: unchanged).
    struct TaskEdit: Equatable, Sendable {
        var priority: TaskPriority?
        /// Bytes per second; 0 removes the task's own limit.
        var bandwidthLimit: Int64?
        /// Before every other task of its priority, or behind all of them.
        var move: TaskMoveParams.Position?
        /// A finished task's state as the runner read it from the journal (a finished task leaves memory):
        /// the state refuses the edit from it. Ignored for a task in memory, whose own state counts.
        var finished: TaskState? = nil
    }

    /// An input a task's state machine refuses in its state.
    struct Refused: Error, Equatable {
        let task: Int64
        let transition: TaskStateMachine.IllegalTransition
    }
}
