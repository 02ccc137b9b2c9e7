import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// The core's state with no I/O and a virtual clock: inputs in, actions out. Queueing, limits, retries,
/// resource deadlines and the ends of attempts, checked without a socket, a file or a wall-clock wait.
@Suite("DaemonState")
struct DaemonStateTests {
    static let limits = DaemonState.SlotLimits(maxConcurrent: 2, maxConnectionsPerHost: 8)

    /// A state with sessions "a" (uid 1) and "b" (uid 2), or the given ones.
    static func state(sessions: [(String, UInt32, SessionConfiguration)] = [("a", 1, .init()), ("b", 2, .init())],
                      limits: DaemonState.SlotLimits = limits) -> DaemonState {
        var state = DaemonState(limits: limits)
        for (name, uid, config) in sessions {
            _ = state.handle(.sessionOpening(SessionRecord(identifier: name, uid: uid, configuration: config, state: .active,
                                                           createdAt: 0), reconfigure: false), now: 0)
        }
        return state
    }

    /// A suspended download of `session`, as `task.create` journals it (the id is the journal's).
    static func task(_ id: Int64, session: String, owner: UInt32, host: String = "127.0.0.1:9",
                     deadline: Double? = nil) -> ManagedTask {
        let record = TaskRecord(id: id, session: session, url: "http://\(host)/\(id)", state: .suspended,
                                destination: "/d/\(id)", partialPath: "/d/.\(id).partial", createdAt: 0, updatedAt: 0,
                                resourceDeadline: deadline)
        return ManagedTask(record: record, owner: owner, machine: TaskStateMachine(state: .suspended, resourceDeadline: deadline),
                           bytesReceived: 0)
    }

    static func started(_ actions: [DaemonState.Action]) -> [Int64] {
        actions.compactMap { if case .startAttempt(let id) = $0 { id } else { nil } }
    }

    static func journaled(_ actions: [DaemonState.Action], _ id: Int64) -> [EventPayload] {
        actions.flatMap { action -> [EventPayload] in
            if case let .journal(record, payloads) = action, record.id == id { payloads } else { [] }
        }
    }

    /// The error of the task's `didComplete` among the journaled events (nil: none, or no error).
    static func completionError(_ actions: [DaemonState.Action], _ id: Int64) -> TaskError? {
        for payload in journaled(actions, id) {
            if case .didComplete(let error, _) = payload { return error }
        }
        return nil
    }

    static let permanent = AttemptOutcome.failed(TransferFailure(
        error: TaskError(code: TaskErrorCode.httpStatus, message: "404 Not Found", httpStatus: 404),
        isTransient: false, durableBytes: 0))

    static func transient(_ message: String = "connection refused", retryAfter: Double? = nil) -> AttemptOutcome {
        .failed(TransferFailure(error: TaskError(code: TaskErrorCode.connectionLost, message: message),
                                isTransient: true, retryAfter: retryAfter, durableBytes: 0))
    }

    /// Sets the limits, creates suspended tasks and resumes them in order (`task.resume` grants slots itself).
    static func resumeAll(_ state: inout DaemonState, _ tasks: [ManagedTask], limits: DaemonState.SlotLimits = limits,
                          now: Double = 0) throws -> [Int64] {
        _ = state.handle(.limitsChanged(limits), now: now)
        _ = state.join(tasks, now: now)
        var ids: [Int64] = []
        for t in tasks {
            ids += started(state.handle(.task(t.id, .resume), now: now))
        }
        return ids
    }

    @Test func resumeQueuesThenStartsWithinTheDaemonWideLimit() throws {
        var state = Self.state()
        let started = try Self.resumeAll(&state, (1...4).map { Self.task($0, session: "a", owner: 1) })
        #expect(started == [1, 2])
        #expect(state.tasks[1]?.machine.state == .running && state.tasks[3]?.machine.state == .queued)
        #expect(state.tasks.queue.count == 2 && state.tasks.running == [1, 2])
        // Queue orders are handed out as tasks enter the back of the queue.
        #expect(state.tasks[3]!.record.queueOrder < state.tasks[4]!.record.queueOrder)
        // Each start counts the attempt in the row it journals with its stateChanged event, before the attempt
        // begins (a crash never loses it).
        #expect(state.tasks[1]?.record.attempts == 1 && state.tasks[3]?.record.attempts == 0)
        let actions = state.handle(.task(3, .suspend), now: 1)
        #expect(Self.journaled(actions, 3) == [.stateChanged(state: .suspended, previous: .queued, reason: nil)])
        #expect(state.tasks.queue.count == 1)
    }

    /// A slot freed by one user's task goes to the other user when they run fewer transfers, whatever the
    /// order the tasks were queued in.
    @Test func slotsAreSharedFairlyBetweenUsers() throws {
        var state = Self.state()
        let first = try Self.resumeAll(&state, (1...4).map { Self.task($0, session: "a", owner: 1) })
        #expect(first == [1, 2])
        _ = state.join([Self.task(10, session: "b", owner: 2), Self.task(11, session: "b", owner: 2)], now: 0)
        _ = state.handle(.task(10, .resume), now: 0)
        _ = state.handle(.task(11, .resume), now: 0)
        // Task 1's attempt fails for a while: its slot goes to user 2 (0 running) before user 1's task 3.
        let next = state.handle(.attemptEnded(1, Self.transient(), jitterSample: 0.5), now: 1)
        #expect(Self.started(next) == [10])
        #expect(state.tasks[1]?.machine.state == .waiting)
        // User 2 suspends its task: user 2 runs none again, so its next task goes before user 1's.
        let after = state.handle(.task(10, .suspend), now: 2)
        #expect(after.contains(.stopAttempt(10)))
        #expect(Self.started(after) == [11], "the slot is free once the task is suspended")
        let freed = state.handle(.attemptEnded(10, .stopped(durableBytes: 0), jitterSample: 0.5), now: 2)
        #expect(Self.started(freed).isEmpty)
        #expect(state.tasks.runningByOwner == [1: 1, 2: 1])
    }

    /// With one slot, users running as many transfers take turns: the one served longest ago goes first,
    /// though all of user 1's tasks were queued before user 2's.
    @Test func usersRunningAsManyTakeTurns() throws {
        var state = Self.state()
        let one = DaemonState.SlotLimits(maxConcurrent: 1, maxConnectionsPerHost: 8)
        let tasks = [Self.task(1, session: "a", owner: 1), Self.task(2, session: "a", owner: 1),
                     Self.task(3, session: "b", owner: 2), Self.task(4, session: "b", owner: 2)]
        #expect(try Self.resumeAll(&state, tasks, limits: one) == [1])
        var order: [Int64] = [1]
        for now in 1...3 {
            let ended = state.handle(.attemptEnded(order.last!, Self.permanent, jitterSample: 0.5), now: Double(now))
            order += Self.started(ended)
        }
        #expect(order == [1, 3, 2, 4])
    }

    @Test func perHostAndPerSessionLimitsHoldOnlyTheirOwnTasks() throws {
        var state = Self.state(sessions: [("a", 1, SessionConfiguration(maxConcurrent: 1)), ("b", 1, .init())])
        let limits = DaemonState.SlotLimits(maxConcurrent: 10, maxConnectionsPerHost: 1)
        let tasks = [Self.task(1, session: "a", owner: 1, host: "h1"), Self.task(2, session: "a", owner: 1, host: "h2"),
                     Self.task(3, session: "b", owner: 1, host: "h1"), Self.task(4, session: "b", owner: 1, host: "h3")]
        let started = try Self.resumeAll(&state, tasks, limits: limits)
        // 2: session "a" runs its one; 3: host h1 has its one connection. Neither blocks task 4.
        #expect(started == [1, 4])
        #expect(state.tasks.runningByHost["http://h1:80"] == 1 && state.tasks.runningBySession["a"] == 1)
        // Task 1 ends for good (a permanent failure): both 2 (session free) and 3 (host free) may start.
        let next = state.handle(.attemptEnded(1, Self.permanent, jitterSample: 0.5), now: 1)
        #expect(Set(Self.started(next)) == [2, 3])
        #expect(state.tasks[1] == nil) // failed: evicted, it lives in the journal only
        #expect(state.tasks.count(in: .failed) == 1)
    }

    /// Past a user's first 8 queued tasks the pass goes lane by lane and skips a host at its limit whole
    /// (`isHeld(host:)`): 20 tasks to h1 (one connection allowed) hold neither the task to h2 behind them in the
    /// same session nor the one to h3 in another; when h1's transfer ends, its next task starts.
    @Test func aLongQueueToAHostAtItsLimitHoldsOnlyThatHost() throws {
        var state = Self.state(sessions: [("a", 1, .init()), ("b", 1, .init())])
        let limits = DaemonState.SlotLimits(maxConcurrent: 10, maxConnectionsPerHost: 1)
        var tasks = (1...20).map { Self.task(Int64($0), session: "a", owner: 1, host: "h1") }
        tasks += [Self.task(21, session: "a", owner: 1, host: "h2"), Self.task(22, session: "b", owner: 1, host: "h1"),
                  Self.task(23, session: "b", owner: 1, host: "h3")]
        #expect(try Self.resumeAll(&state, tasks, limits: limits) == [1, 21, 23])
        let next = state.handle(.attemptEnded(1, Self.permanent, jitterSample: 0.5), now: 1)
        #expect(Self.started(next) == [2])
        #expect(state.tasks.runningByHost == ["http://h1:80": 1, "http://h2:80": 1, "http://h3:80": 1])
    }

    /// Retries in virtual time: the backoff doubles, the retry timer is armed at the earliest retry, a timer
    /// that fires early starts nothing, Retry-After is a lower bound, and `maxAttempts` ends it.
    @Test func transientFailuresWaitBackOffAndRetryInVirtualTime() throws {
        let retry = RetryPolicy(initialDelay: 10, maxDelay: 100, jitter: 0, maxAttempts: 3)
        var state = Self.state(sessions: [("a", 1, SessionConfiguration(retry: retry))])
        #expect(try Self.resumeAll(&state, [Self.task(1, session: "a", owner: 1)]) == [1])

        var actions = state.handle(.attemptEnded(1, Self.transient(), jitterSample: 0.9), now: 100)
        #expect(state.tasks[1]?.machine.state == .waiting && state.tasks[1]?.machine.nextAttemptAt == 110)
        #expect(actions.contains(.armRetryTimer(at: 110)))
        #expect(Self.journaled(actions, 1).contains(.stateChanged(state: .waiting, previous: .running,
                                                                   reason: TaskError(code: TaskErrorCode.connectionLost, message: "connection refused"))))
        // Early: nothing retries, the timer is armed again for the same time.
        actions = state.handle(.retryTimerFired, now: 109.9)
        #expect(Self.started(actions).isEmpty && actions == [.armRetryTimer(at: 110)])
        actions = state.handle(.retryTimerFired, now: 110)
        #expect(Self.started(actions) == [1] && state.tasks[1]?.machine.state == .running)

        // The second failure waits twice as long; a longer Retry-After wins.
        actions = state.handle(.attemptEnded(1, Self.transient(retryAfter: 50), jitterSample: 0.5), now: 200)
        #expect(state.tasks[1]?.machine.nextAttemptAt == 250 && actions.contains(.armRetryTimer(at: 250)))
        #expect(Self.started(state.handle(.retryTimerFired, now: 250)) == [1])
        // The third in a row without progress is the last (maxAttempts 3): the task fails with the reason.
        actions = state.handle(.attemptEnded(1, Self.transient(), jitterSample: 0.5), now: 300)
        #expect(state.tasks[1] == nil && state.tasks.count(in: .failed) == 1)
        let error = try #require(Self.completionError(actions, 1))
        #expect(error.message.hasPrefix("Gave up after 3 attempts in a row"))
    }

    /// One retry timer for every waiting task: set again only for an earlier retry; after it fires, for the
    /// earliest one left; never while shutting down.
    @Test func theRetryTimerIsSetOnlyForAnEarlierRetry() throws {
        let retry = RetryPolicy(initialDelay: 10, maxDelay: 100, jitter: 0, maxAttempts: 5)
        var state = Self.state(sessions: [("a", 1, SessionConfiguration(retry: retry))],
                               limits: DaemonState.SlotLimits(maxConcurrent: 3, maxConnectionsPerHost: 8))
        let tasks = (1...3).map { Self.task($0, session: "a", owner: 1) }
        #expect(try Self.resumeAll(&state, tasks, limits: DaemonState.SlotLimits(maxConcurrent: 3, maxConnectionsPerHost: 8)) == [1, 2, 3])
        func armed(_ actions: [DaemonState.Action]) -> [Double] {
            actions.compactMap { if case .armRetryTimer(let at) = $0 { at } else { nil } }
        }
        #expect(armed(state.handle(.attemptEnded(1, Self.transient(retryAfter: 50), jitterSample: 0), now: 0)) == [50])
        #expect(armed(state.handle(.attemptEnded(2, Self.transient(retryAfter: 80), jitterSample: 0), now: 0)).isEmpty,
                "a timer set for 50 wakes first")
        #expect(armed(state.handle(.attemptEnded(3, Self.transient(), jitterSample: 0), now: 0)) == [10])
        #expect(state.retryTimerAt == 10)
        #expect(armed(state.handle(.retryTimerFired, now: 10)) == [50], "fired: set for the earliest left")
        // Task 3 retried at 10; failing again it waits twice as long, until 31: earlier than 50.
        #expect(armed(state.handle(.attemptEnded(3, Self.transient(), jitterSample: 0), now: 11)) == [31])
        _ = state.handle(.shutdownBegan, now: 12)
        #expect(armed(state.handle(.retryTimerFired, now: 50)).isEmpty)
    }

    /// Shutting down, a resume is refused (nothing would start; answered `shuttingDown`) and changes nothing;
    /// a suspend or cancel is still taken.
    @Test func aResumeWhileShuttingDownIsRefused() {
        var state = Self.state()
        _ = state.join([Self.task(1, session: "a", owner: 1), Self.task(2, session: "a", owner: 1)], now: 0)
        _ = state.handle(.shutdownBegan, now: 1)
        #expect(state.handle(.task(1, .resume), now: 2) == [.refusedWhileShuttingDown(task: 1)])
        #expect(state.tasks[1]?.machine.state == .suspended)
        #expect(!Self.journaled(state.handle(.task(2, .cancel(keepPartial: false)), now: 3), 2).isEmpty)
        #expect(state.tasks[2] == nil, "canceled: in the journal only")
    }

    /// Bytes written count as progress: the failure count starts again, so a slow but moving download never
    /// uses up its attempts.
    @Test func progressResetsTheAttemptBudget() throws {
        let retry = RetryPolicy(initialDelay: 10, maxDelay: 100, jitter: 0, maxAttempts: 2)
        var state = Self.state(sessions: [("a", 1, SessionConfiguration(retry: retry))])
        _ = try Self.resumeAll(&state, [Self.task(1, session: "a", owner: 1)])
        var now = 0.0
        for _ in 0..<5 {
            now += 1
            _ = state.handle(.task(1, .madeProgress), now: now)
            let actions = state.handle(.attemptEnded(1, Self.transient(), jitterSample: 0.5), now: now)
            #expect(actions.contains(.armRetryTimer(at: now + 10)))
            now += 10
            #expect(Self.started(state.handle(.retryTimerFired, now: now)) == [1])
        }
        #expect(state.tasks[1]?.machine.state == .running)
    }

    /// A resource deadline fails a pending task on the tick that follows it, stops its attempt, and frees its
    /// slot for the next task; a suspended task never times out.
    @Test func resourceDeadlinesFailPendingTasksOnTheTick() throws {
        var state = Self.state()
        let limits = DaemonState.SlotLimits(maxConcurrent: 1, maxConnectionsPerHost: 8)
        let tasks = [Self.task(1, session: "a", owner: 1, deadline: 50), Self.task(2, session: "a", owner: 1, deadline: 500),
                     Self.task(3, session: "a", owner: 1, deadline: 60)]
        #expect(try Self.resumeAll(&state, tasks, limits: limits) == [1])
        _ = state.handle(.task(3, .suspend), now: 1)
        #expect(state.handle(.clockTick, now: 49.5).isEmpty)
        let actions = state.handle(.clockTick, now: 70)
        #expect(actions.contains(.stopAttempt(1)))
        let error = try #require(Self.completionError(actions, 1))
        #expect(error.code == TaskErrorCode.resourceTimeout)
        // It no longer counts as running: task 2 starts on the same tick; suspended task 3 is past its
        // deadline but does not time out.
        #expect(Self.started(actions) == [2])
        #expect(state.tasks.count(in: .failed) == 1 && state.tasks[3]?.machine.state == .suspended)
    }

    @Test func cancelDiscardsThePartialOnceNothingWritesIt() throws {
        var state = Self.state()
        var third = Self.task(3, session: "a", owner: 1)
        third.record.durableRanges = ByteRanges(prefix: 10) // a partial from an earlier attempt
        _ = try Self.resumeAll(&state, [Self.task(1, session: "a", owner: 1), Self.task(2, session: "a", owner: 1), third])
        // Queued: no attempt, so the partial goes at once and the task leaves memory.
        var actions = state.handle(.task(3, .cancel(keepPartial: false)), now: 1)
        #expect(actions.contains(.removePartial(path: "/d/.3.partial")) && state.tasks[3] == nil)
        #expect(Self.journaled(actions, 3).last == .didComplete(error: TaskError(code: TaskErrorCode.canceled, message: "The task was canceled")))
        // Cancelled for resume data: the partial stays.
        actions = state.handle(.task(2, .cancel(keepPartial: true)), now: 1)
        #expect(actions.contains(.stopAttempt(2)) && !actions.contains(where: { if case .removePartial = $0 { true } else { false } }))
    }

    /// A task created in this run that never started has no partial file: its cancel removes none (no file
    /// operation in the user's directory for nothing). One that started once, or was restored (a crash may have
    /// left a file its row does not know of), or brought resume data's partial, has its path removed.
    @Test func aCancelRemovesAPartialOnlyWhereOneMayBe() throws {
        var state = Self.state()
        _ = try Self.resumeAll(&state, [Self.task(1, session: "a", owner: 1), Self.task(2, session: "a", owner: 1),
                                        Self.task(3, session: "a", owner: 1)])
        #expect(state.tasks[3]?.machine.state == .queued && state.tasks[3]?.partialMayExist == false)
        var actions = state.handle(.task(3, .cancel(keepPartial: false)), now: 1)
        #expect(!actions.contains { if case .removePartial = $0 { true } else { false } } && state.tasks[3] == nil, "\(actions)")
        // Task 1 started: once its attempt has stopped, the cancel removes its partial.
        #expect(state.tasks[1]?.partialMayExist == true)
        _ = state.handle(.task(1, .suspend), now: 2)
        _ = state.handle(.attemptEnded(1, .stopped(durable: ByteRanges()), jitterSample: 0), now: 2)
        actions = state.handle(.task(1, .cancel(keepPartial: false)), now: 3)
        #expect(actions.contains(.removePartial(path: "/d/.1.partial")), "\(actions)")
        // A restored task that never started in this run: its partial may be there.
        let restored = Self.task(4, session: "a", owner: 1)
        _ = state.handle(.taskRestored(restored.record, partialLength: nil), now: 3)
        #expect(state.tasks[4]?.partialMayExist == true)
        actions = state.handle(.task(4, .cancel(keepPartial: false)), now: 4)
        #expect(actions.contains(.removePartial(path: "/d/.4.partial")), "\(actions)")
    }

    @Test func refusedInputsChangeNothing() throws {
        var state = Self.state()
        _ = state.join([Self.task(1, session: "a", owner: 1)], now: 0)
        let refused = state.handle(.task(1, .completed), now: 1)
        #expect(refused.count == 1 && refused.first.map { if case .refused(let r) = $0 { r.task == 1 } else { false } } == true,
                "\(refused)")
        #expect(state.tasks[1]?.machine.state == .suspended && state.tasks[1]?.record.updatedAt == 0)
    }

    /// A create takes its queue place before it is journaled (the runner reads `nextQueueOrder`); `created`
    /// moves past it, so the next task to enter the back of the queue goes behind it.
    @Test func createdTasksKeepTheirPlacesAndTheNextGoesBehind() throws {
        var state = Self.state(limits: DaemonState.SlotLimits(maxConcurrent: 0, maxConnectionsPerHost: 8))
        var queued = Self.task(1, session: "a", owner: 1)
        queued.machine = TaskStateMachine(state: .queued)
        queued.record.state = .queued
        queued.record.queueOrder = state.nextQueueOrder + 4
        _ = state.join([queued, Self.task(2, session: "a", owner: 1)], now: 0)
        #expect(state.nextQueueOrder == queued.record.queueOrder + 1)
        _ = state.handle(.task(2, .resume), now: 1)
        #expect(state.tasks[2]!.record.queueOrder == queued.record.queueOrder + 1)
        #expect(state.tasks.queue.position(of: 2, running: [:], lastServed: [:]) == 2)
    }

    @Test func nothingStartsOrRetriesWhileShuttingDown() throws {
        var state = Self.state(limits: DaemonState.SlotLimits(maxConcurrent: 0, maxConnectionsPerHost: 8))
        _ = state.join([Self.task(1, session: "a", owner: 1)], now: 0)
        _ = state.handle(.task(1, .resume), now: 0)
        #expect(state.tasks[1]?.machine.state == .queued)
        _ = state.handle(.shutdownBegan, now: 0)
        #expect(state.handle(.limitsChanged(Self.limits), now: 0).isEmpty && state.tasks[1]?.machine.state == .queued)
        #expect(state.handle(.clockTick, now: 1e9).isEmpty)
    }

    /// Shutdown stops every attempt in flight (running or still stopping after a suspend), and once the grace period
    /// is over writes the rows of those that have still not ended; tasks without an attempt are left alone.
    @Test func shutdownStopsEveryAttemptAndWritesTheRowsOfThoseStillInFlight() throws {
        let limits = DaemonState.SlotLimits(maxConcurrent: 3, maxConnectionsPerHost: 8)
        var state = Self.state(limits: limits)
        let tasks = (1...5).map { Self.task($0, session: $0 == 3 ? "b" : "a", owner: $0 == 3 ? 2 : 1) }
        #expect(try Self.resumeAll(&state, tasks, limits: limits) == [1, 2, 3])
        // 2 is suspended but its transfer has not ended; its slot goes to 4.
        let suspended = state.handle(.task(2, .suspend), now: 1)
        #expect(suspended.contains(.stopAttempt(2)) && Self.started(suspended) == [4])
        _ = state.handle(.attemptProgress(1, .checkpointed(ByteRanges(prefix: 4096))), now: 1)
        #expect(state.handle(.shutdownBegan, now: 2) == [.stopAttempt(1), .stopAttempt(2), .stopAttempt(3), .stopAttempt(4)])
        for id: Int64 in [2, 3, 4] {
            #expect(Self.started(state.handle(.attemptEnded(id, .stopped(durableBytes: 0), jitterSample: 0), now: 3)).isEmpty)
        }
        let rows = state.handle(.shutdownGraceEnded, now: 4)
        #expect(rows.count == 1)
        guard case let .journal(record, payloads) = try #require(rows.first) else {
            Issue.record("expected a row: \(rows)")
            return
        }
        #expect(record.id == 1 && payloads.isEmpty && record.durableRanges == ByteRanges(prefix: 4096))
        #expect(record.state == .running, "it continues on the next start")
        #expect(state.tasks[5]?.machine.state == .queued)
        #expect(state.tasks[3]?.machine.state == .running, "stopped by the shutdown, it runs again on the next start")
    }

    /// An invalidating session is done once its last task finished and no transfer of it is stopping: the state
    /// says so once, at that moment (not while a canceled transfer still stops), and after a restart.
    @Test func anInvalidationFinishesWhenNothingOfTheSessionRunsAnyMore() throws {
        var state = Self.state()
        let started = try Self.resumeAll(&state, [Self.task(1, session: "a", owner: 1), Self.task(2, session: "a", owner: 1)])
        #expect(started == [1, 2])
        func finishes(_ actions: [DaemonState.Action]) -> Bool { actions.contains(.finishInvalidation(session: "a")) }
        let invalidating = state.handle(.sessionInvalidating("a", cancelTasks: false), now: 1)
        #expect(!finishes(invalidating) && state.sessions["a"]?.record.state == .invalidating, "two tasks still run")
        #expect(!finishes(state.handle(.attemptEnded(1, Self.permanent, jitterSample: 0), now: 2)))
        #expect(!finishes(state.handle(.task(2, .cancel(keepPartial: false)), now: 3)), "its transfer still stops")
        #expect(finishes(state.handle(.attemptEnded(2, .stopped(durableBytes: 0), jitterSample: 0), now: 4)))

        var restarted = Self.state()
        restarted.sessions["b"]?.record.state = .invalidating
        #expect(restarted.handle(.restoreFinished, now: 0) 
                == [.finishInvalidation(session: "b"), .pruneResumeData(createdBefore: -DaemonState.Caps().resumeDataLifetime)])
        var row = try #require(restarted.sessions["a"]).record
        row.state = .invalidating
        #expect(restarted.handle(.sessionInvalidating("a", cancelTasks: false), now: 0)
                == [.writeSession(row), .finishInvalidation(session: "a")],
                "a session with no task is done at once (its row written first)")
    }
}

extension DaemonState {
    /// Tasks joining the state as `created` has a batch's tasks join, for a test that needs them there without an
    /// admission (the runner's way is `admitting`, then `created` with the rows the journal stored:
    /// DaemonStateAdmissionTests.aCreatedRowBecomesTheTaskItsAdmissionMade).
    /// What `handle` adds to an input's actions (notices, host allowances) is added here too.
    mutating func join(_ created: [ManagedTask], now: Double) -> [Action] {
        tasks.clearChangedHosts()
        var actions: [Action] = []
        join(created, now: now, into: &actions)
        var result = withNotices(actions, now: now)
        allowancesChanged(into: &result)
        return result
    }
}

extension DaemonState.Input {
    /// The configured slot limits with no daemon-wide bandwidth (the tests' shorthand for `limitsConfigured`).
    static func limitsChanged(_ limits: DaemonState.SlotLimits) -> Self {
        .limitsConfigured(DaemonLimits(maxConcurrent: limits.maxConcurrent, maxConnectionsPerHost: limits.maxConnectionsPerHost,
                                       bandwidthLimit: 0))
    }
}

/// A test's input answered with other actions than it expected.
struct UnexpectedActions: Error, CustomStringConvertible {
    let actions: [DaemonState.Action]
    init(_ actions: [DaemonState.Action]) { self.actions = actions }
    var description: String { "unexpected actions: \(actions)" }
}
