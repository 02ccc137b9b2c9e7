import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// The rest of the core's inputs, with no I/O: an attempt's progress, sessions and their events, edits of a
/// task's row, recovery and shutdown.
@Suite("DaemonState: progress, sessions, events, recovery")
struct DaemonStateProgressTests {
    typealias T = DaemonStateTests
    static let limits = DaemonStateTests.limits

    static func start(_ offset: Int64, discarded: Int64 = 0, reason: String? = nil) -> ResponseStart {
        ResponseStart(status: offset > 0 ? 206 : 200, offset: offset, discardedBytes: discarded, reason: reason,
                      expectedTotal: 1000, validators: Validators(etag: "\"v1\"", lastModified: nil),
                      finalURL: "http://127.0.0.1:9/final")
    }

    static func delivered(_ actions: [DaemonState.Action]) -> [EventPayload] {
        actions.compactMap { if case let .deliver(_, _, payload) = $0 { payload } else { nil } }
    }

    /// A running download: its response head joins the row, journaled only with something to tell; its bytes
    /// are told live and count as progress; reports of an attempt no longer in flight are dropped.
    @Test func aDownloadsProgressIsKeptAndToldLive() throws {
        var state = T.state()
        var first = T.task(1, session: "a", owner: 1)
        first.record.bytesDurable = 300
        #expect(try T.resumeAll(&state, [first, T.task(2, session: "a", owner: 1)]) == [1, 2])
        #expect(state.tasks[1]?.attemptInFlight == true && state.tasks[1]?.bytesReceived == 300)
        #expect(state.tasks.isStopping(1)) // a new attempt never starts before this one has ended

        // Task 1 resumes at its offset: told with the row; task 2 starts fresh: nothing to journal.
        var actions = state.handle(.attemptProgress(1, .started(Self.start(300))), now: 1)
        #expect(T.journaled(actions, 1) == [.didResumeAtOffset(offset: 300, expectedTotalBytes: 1000, discardedBytes: nil, reason: nil)])
        #expect(state.tasks[1]?.record.etag == "\"v1\"" && state.tasks[1]?.record.currentURL == "http://127.0.0.1:9/final")
        #expect(state.handle(.attemptProgress(2, .started(Self.start(0))), now: 1).isEmpty)
        #expect(state.tasks[2]?.record.bytesExpected == 1000)

        actions = state.handle(.attemptProgress(1, .received(delta: 200, total: 500, expected: 1000)), now: 2)
        #expect(Self.delivered(actions) == [.didWriteData(bytesWritten: 200, totalBytesWritten: 500, totalBytesExpectedToWrite: 1000)])
        #expect(state.tasks[1]?.bytesReceived == 500)
        // A body that ends with no new byte tells nothing.
        #expect(state.handle(.attemptProgress(1, .received(delta: 0, total: 500, expected: 1000)), now: 2).isEmpty)

        // The attempt ended; a report that was still on its way is stale and changes nothing.
        _ = state.handle(.task(1, .suspend), now: 3)
        _ = state.handle(.attemptEnded(1, .stopped(durableBytes: 500), jitterSample: 0), now: 3)
        #expect(state.tasks[1]?.attemptInFlight == false && state.tasks[1]?.record.bytesDurable == 500)
        #expect(state.handle(.attemptProgress(1, .received(delta: 100, total: 600, expected: 1000)), now: 4).isEmpty)
        #expect(state.tasks[1]?.bytesReceived == 500)
    }

    /// The durable ranges are the state's: a checkpoint of the attempt in flight becomes the row's ranges and is
    /// journaled with the response's head once there is one; the same ranges again, or a report of an attempt no
    /// longer in flight, change nothing; every row written after carries them.
    @Test func aCheckpointIsTheStatesAndIsJournaled() throws {
        var state = T.state()
        #expect(try T.resumeAll(&state, [T.task(1, session: "a", owner: 1)]) == [1])
        let first = ByteRanges(prefix: 100)
        // What the row has already (a truncation of an empty file before any response): nothing to journal.
        #expect(state.handle(.attemptProgress(1, .checkpointed(ByteRanges())), now: 1).isEmpty)
        _ = state.handle(.attemptProgress(1, .started(Self.start(0))), now: 1)
        let head = CheckpointHead(etag: "\"v1\"", lastModified: nil, bytesExpected: 1000,
                                          currentURL: "http://127.0.0.1:9/final")
        #expect(state.handle(.attemptProgress(1, .checkpointed(first)), now: 2)
            == [.checkpoint(1, durable: first, head: head)])
        #expect(state.tasks[1]?.record.durableRanges == first)
        #expect(state.handle(.attemptProgress(1, .checkpointed(first)), now: 3).isEmpty)
        // A split download's ranges, with a gap.
        let split = ByteRanges([0..<200, 500..<600])
        #expect(state.handle(.attemptProgress(1, .checkpointed(split)), now: 3)
            == [.checkpoint(1, durable: split, head: head)])
        // The suspend's row carries them.
        let actions = state.handle(.task(1, .suspend), now: 4)
        let rows = actions.compactMap { if case let .journal(record, _) = $0 { record } else { nil } }
        #expect(!rows.isEmpty && rows.allSatisfy { $0.durableRanges == split })
        _ = state.handle(.attemptEnded(1, .stopped(durable: split), jitterSample: 0), now: 5)
        #expect(state.handle(.attemptProgress(1, .checkpointed(ByteRanges(prefix: 900))), now: 6).isEmpty)
        #expect(state.tasks[1]?.record.durableRanges == split)
    }

    /// Two reconfigurations of one session written in order but resuming out of order: the state keeps the one
    /// written last.
    @Test func theReconfigurationWrittenLastIsKept() throws {
        var state = T.state()
        func reconfiguring(_ maxConcurrent: Int) throws -> UInt64 {
            let record = SessionRecord(identifier: "a", uid: 1, configuration: SessionConfiguration(maxConcurrent: maxConcurrent),
                                       state: .active, createdAt: 0)
            let actions = state.handle(.sessionOpening(record, reconfigure: true), now: 0)
            guard case .sessionOpen(.reconfiguring(let ticket))? = actions.first else { throw UnexpectedActions(actions) }
            #expect(actions.dropFirst().first == .writeSession(record)) // the row with the new configuration
            return ticket
        }
        let first = try reconfiguring(3)
        let second = try reconfiguring(7)
        _ = state.handle(.sessionConfigured("a", SessionConfiguration(maxConcurrent: 7), ticket: second), now: 1)
        _ = state.handle(.sessionConfigured("a", SessionConfiguration(maxConcurrent: 3), ticket: first), now: 2)
        #expect(state.sessions["a"]?.record.configuration.maxConcurrent == 7)
        let third = try reconfiguring(2)
        _ = state.handle(.sessionConfigured("a", SessionConfiguration(maxConcurrent: 2), ticket: third), now: 4)
        #expect(state.sessions["a"]?.record.configuration.maxConcurrent == 2)
    }

    /// A server that sent the whole file instead of the rest: the restart from zero is journaled with its
    /// reason.
    @Test func aRestartFromZeroIsJournaledWithItsReason() throws {
        var state = T.state()
        var t = T.task(1, session: "a", owner: 1)
        t.record.bytesDurable = 300
        _ = try T.resumeAll(&state, [t])
        let actions = state.handle(.attemptProgress(1, .started(Self.start(0, discarded: 300, reason: "resourceChanged"))), now: 1)
        #expect(T.journaled(actions, 1) == [.didResumeAtOffset(offset: 0, expectedTotalBytes: 1000, discardedBytes: 300, reason: "resourceChanged")])
        #expect(state.tasks[1]?.bytesReceived == 0)
        // The row carries the new version's validators with no range of the old version's bytes.
        let rows = actions.compactMap { if case let .journal(record, _) = $0 { record } else { nil } }
        #expect(rows.count == 1 && rows.allSatisfy { $0.durableRanges.isEmpty && $0.etag == "\"v1\"" })
        // The empty checkpoint that follows the truncation has nothing left to journal.
        #expect(state.handle(.attemptProgress(1, .checkpointed(ByteRanges())), now: 2).isEmpty)
    }

    /// A resume with gaps (an earlier split attempt): the offset told and `bytesReceived` are the sum of the
    /// kept ranges, like the progress totals that follow, not where the first range ends.
    @Test func aResumeWithGapsCountsEveryKeptByte() throws {
        var state = T.state()
        var t = T.task(1, session: "a", owner: 1)
        t.record.durableRanges = ByteRanges([0..<300, 600..<800])
        _ = try T.resumeAll(&state, [t])
        #expect(state.tasks[1]?.bytesReceived == 500)
        var start = Self.start(300)
        start.keptBytes = 500
        let actions = state.handle(.attemptProgress(1, .started(start)), now: 1)
        #expect(T.journaled(actions, 1) == [.didResumeAtOffset(offset: 500, expectedTotalBytes: 1000, discardedBytes: nil, reason: nil)])
        #expect(state.tasks[1]?.bytesReceived == 500)
    }

    /// Bytes received after failures reset the retry budget, as `madeProgress` does.
    @Test func receivedBytesResetTheFailureCount() throws {
        var state = T.state()
        _ = try T.resumeAll(&state, [T.task(1, session: "a", owner: 1)])
        _ = state.handle(.attemptEnded(1, T.transient(), jitterSample: 0), now: 1)
        #expect(state.tasks[1]?.machine.consecutiveFailures == 1)
        let at = try #require(state.tasks[1]?.machine.nextAttemptAt)
        #expect(T.started(state.handle(.retryTimerFired, now: at)) == [1])
        _ = state.handle(.attemptProgress(1, .received(delta: 10, total: 10, expected: nil)), now: at + 1)
        #expect(state.tasks[1]?.machine.consecutiveFailures == 0)
    }

    /// An upload's body progress is told live; a data task's response bytes are counted, never told.
    @Test func uploadAndDataProgress() throws {
        var state = T.state()
        var upload = T.task(1, session: "a", owner: 1)
        upload.record.kind = TaskKind.upload.rawValue
        var data = T.task(2, session: "a", owner: 1)
        data.record.kind = TaskKind.data.rawValue
        data.record.bytesDurable = 77 // never an offset for a data task: it starts from byte 0
        _ = try T.resumeAll(&state, [upload, data])
        #expect(state.tasks[1]?.bytesSent == 0 && state.tasks[2]?.bytesReceived == 0)
        #expect(state.handle(.attemptProgress(1, .bodyOpened(bytes: 4096)), now: 1).isEmpty)
        #expect(state.tasks[1]?.bytesExpectedToSend == 4096)
        let actions = state.handle(.attemptProgress(1, .sent(delta: 1024, total: 1024, expected: nil)), now: 1)
        #expect(Self.delivered(actions) == [.didSendBodyData(bytesSent: 1024, totalBytesSent: 1024, totalBytesExpectedToSend: 4096)])
        #expect(state.handle(.attemptProgress(2, .received(delta: 50, total: 50, expected: 90)), now: 1).isEmpty)
        #expect(state.tasks[2]?.bytesReceived == 50 && state.tasks[2]?.record.bytesExpected == 90)
    }

    /// finishTasksAndInvalidate cancels the suspended tasks and lets pending ones finish; invalidateAndCancel
    /// cancels every unfinished task. Once removed, the session takes its tasks, counts and events with it.
    @Test func invalidationCancelsWhatItMustAndRemovalForgetsTheSession() throws {
        for cancelAll in [false, true] {
            var state = T.state()
            _ = state.join([T.task(1, session: "a", owner: 1), T.task(2, session: "a", owner: 1),
                                           T.task(3, session: "b", owner: 2)], now: 0)
            _ = state.handle(.task(2, .resume), now: 0)
            _ = state.handle(.eventsJournaled(session: "a", lastSeq: 9, count: 3), now: 0)
            let actions = state.handle(.sessionInvalidating("a", cancelTasks: cancelAll), now: 1)
            #expect(state.sessions["a"]?.record.state == .invalidating)
            #expect(actions.first == state.sessions["a"].map { .writeSession($0.record) }, "its row before its tasks' ends")
            #expect(T.completionError(actions, 1)?.code == TaskErrorCode.sessionInvalidated)
            #expect(state.tasks.unfinished(session: "a") == (cancelAll ? 0 : 1))
            if !cancelAll { #expect(state.tasks[2]?.machine.state == .running) } // started, and it finishes
            #expect(state.tasks[3]?.machine.state == .suspended) // another session's task is left alone

            // Its running task (left to finish without cancelAll) goes with it: its host's allowance with it.
            #expect(state.handle(.sessionRemoved("a"), now: 2) == [.releaseSubscribers(session: "a")]
                        + (cancelAll ? [] : [.hostAllowance("http://127.0.0.1:9", extras: 0)]))
            #expect(state.sessions["a"] == nil && state.tasks.ids(session: "a").isEmpty)
            #expect(state.tasks.counts(session: "a").isEmpty && state.pendingEventsByUID[1] == nil)
            #expect(state.sessions["b"] != nil && state.tasks[3] != nil)
        }
    }

    /// Journaled events count as unacknowledged per session and per owner until acknowledged; an
    /// acknowledgement drops the delivered response bodies it names.
    @Test func eventsAreCountedUntilAcknowledged() throws {
        var state = T.state()
        var data = T.task(1, session: "a", owner: 1)
        data.record.response = TaskResponse(status: 200, body: "aGk=", bodyBytes: 2, truncated: false)
        _ = state.join([data], now: 0)
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 5, count: 1), now: 0)
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 7, count: 2), now: 0)
        _ = state.handle(.eventsJournaled(session: "b", lastSeq: 2, count: 1), now: 0)
        #expect(state.sessions["a"]?.lastEventSeq == 7 && state.sessions["a"]?.pendingEvents == 3)
        #expect(state.pendingEventsByUID[1] == 3 && state.pendingEventsByUID[2] == 1)

        _ = state.handle(.eventsAcknowledged(session: "a", through: 6, pruned: 2, droppedBodies: [1]), now: 1)
        #expect(state.sessions["a"]?.record.ackedThrough == 6 && state.sessions["a"]?.pendingEvents == 1)
        #expect(state.pendingEventsByUID[1] == 1 && state.tasks[1]?.record.response?.body == nil)
        // An older acknowledgement never moves the mark back.
        _ = state.handle(.eventsAcknowledged(session: "a", through: 3, pruned: 0, droppedBodies: []), now: 1)
        #expect(state.sessions["a"]?.record.ackedThrough == 6)
        _ = state.handle(.eventsAcknowledged(session: "a", through: 7, pruned: 1, droppedBodies: []), now: 1)
        #expect(state.pendingEventsByUID[1] == nil)
    }


    /// Opening a session and changing its configuration: a higher `maxConcurrent` starts queued tasks at once.
    @Test func aSessionsNewConfigurationAppliesAtOnce() throws {
        var state = DaemonState()
        let one = SessionConfiguration(maxConcurrent: 1)
        _ = state.handle(.sessionOpening(SessionRecord(identifier: "a", uid: 1, configuration: one, state: .active,
                                                       createdAt: 0), reconfigure: false), now: 0)
        #expect(try T.resumeAll(&state, [T.task(1, session: "a", owner: 1), T.task(2, session: "a", owner: 1)]) == [1])
        let actions = state.handle(.sessionConfigured("a", SessionConfiguration(maxConcurrent: 2)), now: 1)
        #expect(T.started(actions) == [2])
    }

    /// `task.move`/`task.update` edit the row (stamped with the time) and may let a task start.
    @Test func anEditChangesTheRowAndGrantsSlots() throws {
        var state = T.state()
        let limits = DaemonState.SlotLimits(maxConcurrent: 1, maxConnectionsPerHost: 8)
        _ = try T.resumeAll(&state, [T.task(1, session: "a", owner: 1), T.task(2, session: "a", owner: 1),
                                     T.task(3, session: "a", owner: 1)], limits: limits)
        let edited = state.handle(.edited(3, DaemonState.TaskEdit(priority: .high)), now: 5)
        #expect(state.tasks[3]?.record.priority == .high && state.tasks[3]?.record.updatedAt == 5)
        #expect(edited == [.journal(state.tasks[3]!.record, [])], "the edited row is journaled; no slot is free")
        let suspended = state.handle(.task(1, .suspend), now: 6) // its slot is free at once
        #expect(T.started(suspended) == [3]) // the higher priority goes first
        let ended = state.handle(.attemptEnded(1, .stopped(durableBytes: 0), jitterSample: 0), now: 6)
        #expect(T.started(ended).isEmpty)
    }

    /// `task.move`: the state chooses the new place, before every task of its priority or behind all of them.
    @Test func aMoveTakesThePlaceTheStateChooses() throws {
        var state = T.state()
        let none = DaemonState.SlotLimits(maxConcurrent: 0, maxConnectionsPerHost: 8)
        _ = try T.resumeAll(&state, [T.task(1, session: "a", owner: 1), T.task(2, session: "a", owner: 1),
                                     T.task(3, session: "a", owner: 1)], limits: none)
        #expect(state.tasks.queue.position(of: 3, running: [:], lastServed: [:]) == 3)
        _ = state.handle(.edited(3, DaemonState.TaskEdit(move: .front)), now: 1)
        #expect(state.tasks.queue.position(of: 3, running: [:], lastServed: [:]) == 1 && state.tasks[3]!.record.queueOrder < 0)
        _ = state.handle(.edited(1, DaemonState.TaskEdit(move: .back)), now: 2)
        #expect([3, 2, 1].map { state.tasks.queue.position(of: $0, running: [:], lastServed: [:]) } == [1, 2, 3])
    }

    /// What an edit may change is the state's: a running task is not moved, a finished one (still stopping) is
    /// neither moved nor updated, and a refusal changes nothing; a new bandwidth limit reaches an attempt in flight
    /// as an action, and none goes to a task without one.
    @Test func editsAreRefusedOrCarriedOutByTheState() throws {
        var state = T.state()
        let limits = DaemonState.SlotLimits(maxConcurrent: 1, maxConnectionsPerHost: 8)
        #expect(try T.resumeAll(&state, [T.task(1, session: "a", owner: 1), T.task(2, session: "a", owner: 1)], limits: limits) == [1])
        let before = state
        let refused = DaemonState.Refused(task: 1, transition: .init(state: .running, input: "move"))
        #expect(state.handle(.edited(1, DaemonState.TaskEdit(move: .front)), now: 1) == [.refused(refused)])
        #expect(state.tasks[1] == before.tasks[1] && state.tasks.queue.position(of: 2, running: [:], lastServed: [:]) == 1)

        let updated = state.handle(.edited(1, DaemonState.TaskEdit(bandwidthLimit: 65_536)), now: 2)
        #expect(updated == [.journal(state.tasks[1]!.record, []), .setBandwidth(1, rate: 65_536)], "its attempt follows")
        #expect(state.handle(.edited(1, DaemonState.TaskEdit(bandwidthLimit: 0)), now: 3).last == .setBandwidth(1, rate: 0))
        let queued = state.handle(.edited(2, DaemonState.TaskEdit(bandwidthLimit: 65_536)), now: 4)
        #expect(queued == [.journal(state.tasks[2]!.record, [])], "no attempt: the limit is in its row for the next")

        _ = state.handle(.task(1, .cancel(keepPartial: false)), now: 5) // canceled, its transfer still stopping
        #expect(state.tasks[1]?.machine.state == .canceled)
        #expect(state.handle(.edited(1, DaemonState.TaskEdit(priority: .high)), now: 6)
                == [.refused(.init(task: 1, transition: .init(state: .canceled, input: "update")))])
        #expect(state.tasks[1]?.record.priority == .normal)
    }

    /// An edit of a finished task the journal alone holds is refused by the state, from the state the runner read
    /// it in; an edit of a task neither in memory nor read is the caller's to answer (no action), and nothing changes.
    @Test func anEditOfAFinishedTaskInTheJournalOnlyIsRefusedByTheState() throws {
        var state = T.state()
        _ = try T.resumeAll(&state, [T.task(1, session: "a", owner: 1)], limits: DaemonState.SlotLimits(maxConcurrent: 1, maxConnectionsPerHost: 8))
        let before = state
        #expect(state.handle(.edited(7, DaemonState.TaskEdit(priority: .high, finished: .completed)), now: 1)
                == [.refused(.init(task: 7, transition: .init(state: .completed, input: "update")))])
        #expect(state.handle(.edited(7, DaemonState.TaskEdit(move: .front, finished: .canceled)), now: 2)
                == [.refused(.init(task: 7, transition: .init(state: .canceled, input: "move")))])
        #expect(state.handle(.edited(8, DaemonState.TaskEdit(priority: .high)), now: 3) == [])
        #expect(state.tasks[1] == before.tasks[1] && state.tasks.count == before.tasks.count)
        // A task in memory is judged by its own state, whatever the edit says it was read in.
        #expect(state.handle(.edited(1, DaemonState.TaskEdit(bandwidthLimit: 1024, finished: .completed)), now: 4)
                == [.journal(state.tasks[1]!.record, []), .setBandwidth(1, rate: 1024)])
    }

    /// A finished task the journal alone holds: the state answers an input as its machine would (refused, or
    /// ignored), and nothing changes.
    @Test func aFinishedTaskInTheJournalOnlyIsAnsweredByTheState() throws {
        var state = T.state()
        _ = try T.resumeAll(&state, [T.task(1, session: "a", owner: 1)], limits: DaemonState.SlotLimits(maxConcurrent: 1, maxConnectionsPerHost: 8))
        let before = state
        let completed = TaskStateMachine(state: .completed)
        #expect(state.handle(.finishedTask(9, completed, .resume), now: 1)
                == [.refused(.init(task: 9, transition: .init(state: .completed, input: "resume")))])
        #expect(state.handle(.finishedTask(9, TaskStateMachine(state: .canceled), .cancel(keepPartial: false)), now: 1).first
                == .refused(.init(task: 9, transition: .init(state: .canceled, input: "cancel"))))
        #expect(state.handle(.finishedTask(9, completed, .retryDue), now: 1).isEmpty, "a stale timer: ignored")
        #expect(state.tasks[9] == nil && state.tasks[1] == before.tasks[1] && state.tasks.count == before.tasks.count)
    }

    /// The hosts whose allowance of extra connections may have changed are the last input's: a start changes
    /// its host, the next input starts afresh, and a new per-host limit changes every host with a transfer.
    @Test func eachInputLeavesTheHostsItChanged() throws {
        var state = T.state()
        let limits = DaemonState.SlotLimits(maxConcurrent: 4, maxConnectionsPerHost: 8)
        _ = try T.resumeAll(&state, [T.task(1, session: "a", owner: 1, host: "h1"), T.task(2, session: "a", owner: 1, host: "h2")],
                            limits: limits)
        _ = state.handle(.task(2, .suspend), now: 1)
        #expect(state.tasks.changedHosts == [state.tasks[2]!.hostKey])
        _ = state.handle(.grantSlots, now: 2)
        #expect(state.tasks.changedHosts.isEmpty)
        _ = state.handle(.limitsChanged(limits), now: 3)
        #expect(state.tasks.changedHosts.isEmpty, "the same limits: no host has another allowance")
        _ = state.handle(.limitsChanged(DaemonState.SlotLimits(maxConcurrent: 4, maxConnectionsPerHost: 2)), now: 4)
        #expect(state.tasks.changedHosts == [state.tasks[1]!.hostKey])
    }

    /// Recovery puts tasks back in the queue at their journaled places, whatever order they are fed in, and
    /// tasks queued afterwards go behind every one of them; a suspended one waits for nothing, one being published
    /// for the runner's look at its file; finished tasks are counted per session.
    @Test func recoveryKeepsTheOldOrder() throws {
        var state = DaemonState()
        let session = ManagedSession(record: SessionRecord(identifier: "a", uid: 1, configuration: .init(), state: .active,
                                                           createdAt: 0), lastEventSeq: 4, pendingEvents: 2)
        _ = state.handle(.sessionRestored(session), now: 0)
        #expect(state.pendingEventsByUID[1] == 2)
        func row(_ id: Int64, _ taskState: TaskState, order: Int64) -> ManagedTask {
            var t = T.task(id, session: "a", owner: 1)
            t.record.state = taskState
            t.record.queueOrder = order
            t.machine = TaskStateMachine(state: taskState)
            return t
        }
        var publishing = row(4, .running, order: 0)
        publishing.record.phase = .publishing
        // Fed out of order: the running task (20) was queued after the queued one (10).
        let rows = [row(2, .running, order: 20), row(3, .suspended, order: 40), publishing, row(1, .queued, order: 10)]
        var restarted = 0
        var asked: [DaemonState.Action] = []
        for t in rows {
            let actions = state.handle(.taskRestored(t.record), now: 1)
            if !actions.isEmpty { restarted += 1 }
            if t.id == 4 { asked = actions }
        }
        // Two have something to do: the running one (it is queued again, and journaled so), and the one being
        // published, whose file the runner looks at (`recoverPublish`, the state's since step 69).
        #expect(restarted == 2)
        #expect(asked == [.recoverPublish(4, partial: "/d/.4.partial", location: "/d/4")])
        #expect(state.tasks[1]?.record.queueOrder == 10 && state.tasks[2]?.record.queueOrder == 20)
        #expect(state.tasks[2]?.machine.state == .queued)
        #expect(state.takeQueueOrder() == 41)
        #expect(state.tasks[3]?.machine.state == .suspended && state.tasks[4]?.machine.state == .running)
        _ = state.handle(.finishedTasksCounted(["a": [.completed: 3], "gone": [.failed: 2]]), now: 1)
        #expect(state.tasks.count(in: .completed) == 3 && state.tasks.count(in: .failed) == 0)
        // (Task 4, still `running` until its publish is finished, holds a slot until recovery finishes it.)
        let three = DaemonState.SlotLimits(maxConcurrent: 3, maxConnectionsPerHost: 8)
        #expect(T.started(state.handle(.limitsChanged(three), now: 2)) == [1, 2])
        _ = state.handle(.shutdownBegan, now: 3)
        #expect(state.shuttingDown)
    }

    /// A sweep covers the sessions that have finished tasks in the journal, each with its own retention as the
    /// cutoff, and keeps the finished tasks still in memory (an unfinished one has no finished row to keep).
    @Test func retentionSweepsFollowEachSessionsRetention() throws {
        var state = DaemonState()
        for (name, keep) in [("day", nil), ("none", 0.0), ("idle", 60.0)] as [(String, Double?)] {
            let record = SessionRecord(identifier: name, uid: 1, configuration: SessionConfiguration(finishedTaskRetention: keep),
                                       state: .active, createdAt: 0)
            _ = state.handle(.sessionRestored(ManagedSession(record: record, lastEventSeq: 0, pendingEvents: 0)), now: 0)
        }
        _ = state.handle(.taskRestored(T.task(7, session: "none", owner: 1).record), now: 0)
        _ = state.handle(.taskRestored(T.task(8, session: "none", owner: 1).record), now: 0)
        _ = state.handle(.limitsChanged(DaemonState.SlotLimits(maxConcurrent: 4, maxConnectionsPerHost: 4)), now: 0)
        #expect(T.started(state.handle(.task(8, .resume), now: 0)) == [8])
        _ = state.handle(.task(8, .cancel(keepPartial: false)), now: 0) // canceled, its transfer still stopping
        #expect(state.tasks[8]?.machine.state == .canceled && state.tasks[8]?.attemptInFlight == true)
        _ = state.handle(.finishedTasksCounted(["day": [.completed: 2], "none": [.failed: 1]]), now: 0)
        let sweeps = state.retentionSweeps(now: 100_000).sorted { $0.session < $1.session }
        #expect(sweeps == [RetentionSweep(session: "day", before: 100_000 - 86_400, keeping: []),
                           RetentionSweep(session: "none", before: 100_000, keeping: [8])])
        _ = state.handle(.attemptEnded(8, .stopped(durableBytes: 0), jitterSample: 0), now: 1) // its transfer stopped: it leaves memory
        #expect(state.tasks[8] == nil && state.retentionSweeps(now: 100_000, only: "none").first?.keeping == [])
        #expect(state.retentionSweeps(now: 5, only: "idle").isEmpty, "no finished task: nothing to sweep")
        _ = state.handle(.finishedTasksDeleted("day", [.completed: 2]), now: 1)
        #expect(state.retentionSweeps(now: 5).map(\.session) == ["none"])
    }
}
