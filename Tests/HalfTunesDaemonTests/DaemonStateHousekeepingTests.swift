import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// When housekeeping happens is the state's: a retention sweep every minute (at once again while one left work,
/// and right after an acknowledgement in a session that keeps nothing), resume data expiring hourly and when
/// recovery ends. The runner deletes what it is told to.
@Suite("DaemonState: housekeeping")
struct DaemonStateHousekeepingTests {
    static func sweeps(_ actions: [DaemonState.Action]) -> [[String]] {
        actions.compactMap { if case .sweepRetention(let s) = $0 { s.map(\.session).sorted() } else { nil } }
    }

    static func prunes(_ actions: [DaemonState.Action]) -> Int {
        actions.filter { if case .pruneResumeData = $0 { true } else { false } }.count
    }

    static func withFinishedTasks() -> DaemonState {
        var state = DaemonStateTests.state(sessions: [("a", 1, SessionConfiguration()),
                                                      ("none", 2, SessionConfiguration(finishedTaskRetention: 0))])
        _ = state.handle(.finishedTasksCounted(["a": [.completed: 3], "none": [.failed: 1]]), now: 0)
        return state
    }

    @Test func aSweepEveryMinuteAndAgainAtOnceWhileOneLeftWork() {
        var state = Self.withFinishedTasks()
        #expect(Self.sweeps(state.handle(.clockTick, now: 60)) == [["a", "none"]])
        #expect(Self.sweeps(state.handle(.clockTick, now: 61)).isEmpty)
        _ = state.handle(.retentionSwept(backlog: true), now: 61.5)
        #expect(Self.sweeps(state.handle(.clockTick, now: 62)) == [["a", "none"]], "work was left: at once")
        _ = state.handle(.retentionSwept(backlog: false), now: 62.5)
        #expect(Self.sweeps(state.handle(.clockTick, now: 63)).isEmpty)
        #expect(Self.sweeps(state.handle(.clockTick, now: 122)) == [["a", "none"]])
        // Nothing finished anywhere: nothing to sweep.
        var empty = DaemonStateTests.state()
        #expect(Self.sweeps(empty.handle(.clockTick, now: 600)).isEmpty)
    }

    @Test func anAcknowledgementInASessionThatKeepsNothingSweepsItAtOnce() {
        var state = Self.withFinishedTasks()
        _ = state.handle(.eventsJournaled(session: "none", lastSeq: 2, count: 2), now: 1)
        #expect(Self.sweeps(state.handle(.eventsAcknowledged(session: "none", through: 2, pruned: 2, droppedBodies: []),
                                         now: 2)) == [["none"]])
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 3, count: 1), now: 3)
        #expect(Self.sweeps(state.handle(.eventsAcknowledged(session: "a", through: 3, pruned: 1, droppedBodies: []),
                                         now: 4)).isEmpty, "a keeps its finished tasks for a day")
    }

    /// A cancel making resume data in a session that keeps nothing: the task is finished, but its row, which the
    /// resume data is made from, is kept from every sweep until the resume data is made.
    @Test func aTaskWhoseResumeDataIsBeingMadeIsKeptFromSweeps() {
        var state = Self.withFinishedTasks()
        state.tasks[77] = DaemonStateCancelResumeDataTests.resumable(77, session: "none", owner: 2)
        _ = state.handle(DaemonStateCancelResumeDataTests.cancel(77), now: 1)
        let keeping = { (actions: [DaemonState.Action]) -> [String: Set<Int64>] in
            var result: [String: Set<Int64>] = [:]
            for case .sweepRetention(let sweeps) in actions { for s in sweeps { result[s.session] = s.keeping } }
            return result
        }
        let during = keeping(state.handle(.clockTick, now: 60))
        #expect(during["none"] == [77] && during["a"] == [])
        _ = state.handle(.resumeDataStopped(77, durable: nil, partialLength: 10, token: "t"), now: 61)
        _ = state.handle(.resumeTokenWritten(77, failed: false), now: 61)
        #expect(state.resumeDataBeingMade.isEmpty && state.resumeDataHeld(by: 2) == 1)
        #expect(keeping(state.handle(.clockTick, now: 121))["none"] == [])
    }

    /// A sweep's batches: a session until a short, empty or failed batch; at most five batches, work left past
    /// them being the next tick's.
    @Test func aSweepsBatchesFollowWhatEachDeletedWithinItsBudget() {
        let full = RetentionSweepPlan.batch
        let a = RetentionSweep(session: "a", before: 1, keeping: [7, 8])
        let b = RetentionSweep(session: "b", before: 1, keeping: [])
        let c = RetentionSweep(session: "c", before: 1, keeping: [])
        var plan = RetentionSweepPlan([a, b, c])
        var named: [String] = []
        // a: one full batch (its two kept rows are not deleted), then a short one; b fails; c: full batches to the end.
        for count in [full - 2, 5, nil, full, full] as [Int?] {
            guard let sweep = plan.next() else { break }
            named.append(sweep.session)
            plan.deleted(count)
        }
        #expect(named == ["a", "a", "b", "c", "c"])
        #expect(plan.next() == nil && plan.backlog && plan.deletedAny, "c may hold more: the next tick goes on")

        var done = RetentionSweepPlan([a, b])
        #expect(done.next()?.session == "a")
        done.deleted(0)
        #expect(done.next()?.session == "b")
        done.deleted(3)
        #expect(done.next() == nil && !done.backlog && done.deletedAny)
        var empty = RetentionSweepPlan([a])
        _ = empty.next()
        empty.deleted(nil)
        #expect(empty.next() == nil && !empty.backlog && !empty.deletedAny)
    }

    /// A large acknowledgement gives the journal's freed pages back; a small one leaves them for reuse.
    @Test func aLargeAcknowledgementReleasesTheJournalsFreePages() {
        var state = Self.withFinishedTasks()
        let large = DaemonState.largeAcknowledgement
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: Int64(2 * large), count: 2 * large), now: 1)
        #expect(!state.handle(.eventsAcknowledged(session: "a", through: Int64(large - 1), pruned: large - 1,
                                                  droppedBodies: []), now: 2).contains(.releaseFreePages))
        #expect(state.handle(.eventsAcknowledged(session: "a", through: Int64(2 * large - 1), pruned: large,
                                                 droppedBodies: []), now: 3).contains(.releaseFreePages))
    }

    /// A sweep that deleted rows gives their pages back; one that deleted nothing does not.
    @Test func aSweepThatDeletedRowsReleasesTheJournalsFreePages() {
        var state = Self.withFinishedTasks()
        #expect(state.handle(.retentionSwept(backlog: false, deletedAny: true), now: 1) == [.releaseFreePages])
        #expect(state.handle(.retentionSwept(backlog: false, deletedAny: false), now: 2).isEmpty)
    }

    @Test func resumeDataExpiresWhenRecoveryEndsAndHourly() {
        var state = DaemonStateTests.state()
        #expect(Self.prunes(state.handle(.restoreFinished, now: 10_000)) == 1)
        #expect(Self.prunes(state.handle(.clockTick, now: 10_001)) == 0)
        #expect(Self.prunes(state.handle(.clockTick, now: 10_000 + 3_599)) == 0)
        #expect(state.handle(.clockTick, now: 10_000 + 3_600).contains(.pruneResumeData(createdBefore: 13_600 - DaemonState.Caps().resumeDataLifetime)))
    }

    /// An expiry the journal failed (the runner logged why) is tried again a minute later, not an hour later; then
    /// hourly again from the one that went through.
    @Test func aFailedExpiryOfResumeDataIsTriedAgainInAMinute() {
        var state = DaemonStateTests.state()
        #expect(Self.prunes(state.handle(.restoreFinished, now: 10_000)) == 1)
        #expect(state.handle(.resumeDataExpiryFailed, now: 10_002).isEmpty)
        #expect(Self.prunes(state.handle(.clockTick, now: 10_002 + 59)) == 0, "not at every tick: the journal just failed")
        #expect(state.handle(.clockTick, now: 10_002 + 60) == [.pruneResumeData(createdBefore: 10_062 - DaemonState.Caps().resumeDataLifetime)])
        // That one went through: the next is an hour after it.
        #expect(Self.prunes(state.handle(.clockTick, now: 10_062 + 3_599)) == 0)
        #expect(Self.prunes(state.handle(.clockTick, now: 10_062 + 3_600)) == 1)
        // Failed again: a minute again.
        #expect(state.handle(.resumeDataExpiryFailed, now: 13_663).isEmpty)
        #expect(Self.prunes(state.handle(.clockTick, now: 13_663 + 59)) == 0)
        #expect(Self.prunes(state.handle(.clockTick, now: 13_663 + 60)) == 1)
    }
}

/// The resume data each uid holds, counted by the state from the runner's reports (`max-resume-data-per-uid` is
/// checked against it without reading the journal).
@Suite("DaemonState: resume data held")
struct DaemonStateResumeDataTests {
    @Test func keptAndInFlightAreCountedPerUIDAndNeverBelowZero() {
        var state = DaemonStateTests.state()
        _ = state.handle(.resumeDataChanged(uid: 1, kept: 3), now: 0) // what the journal held at start
        state.tasks[9] = DaemonStateCancelResumeDataTests.resumable(9)
        _ = state.handle(DaemonStateCancelResumeDataTests.cancel(9), now: 1) // a cancel making one
        #expect(state.resumeDataHeld(by: 1) == 4 && state.resumeDataHeld(by: 2) == 0)
        _ = state.handle(.resumeDataStopped(9, durable: nil, partialLength: 10, token: "t"), now: 2)
        _ = state.handle(.resumeTokenWritten(9, failed: false), now: 2) // made
        _ = state.handle(.resumeDataChanged(uid: 1, kept: -1), now: 3) // redeemed
        #expect(state.resumeDataHeld(by: 1) == 3)
        _ = state.handle(.resumeDataChanged(uid: 1, kept: -5), now: 4) // deleted with a session
        #expect(state.resumeDataHeld(by: 1) == 0 && state.resumeDataKept[1] == nil && state.resumeDataInFlight[1] == nil)
    }
}

/// A restored task keeps only the durable ranges its partial file still holds (the runner measures the file
/// when `partialMayBeShort` says so; the state decides).
@Suite("DaemonState: restore")
struct DaemonStateRestoreTests {
    static func running(durable: ByteRanges) -> ManagedTask {
        var row = DaemonStateTests.task(5, session: "a", owner: 1).record
        row.state = .running
        row.durableRanges = durable
        return ManagedTask(row: row, owner: 1)
    }

    @Test func durableRangesPastTheFilesEndAreDropped() {
        var state = DaemonStateTests.state()
        let t = Self.running(durable: ByteRanges(prefix: 4096))
        #expect(DaemonState.partialMayBeShort(t.record))
        _ = state.handle(.taskRestored(t.record, partialLength: 1000), now: 1)
        #expect(state.tasks[5]?.record.durableRanges == ByteRanges(prefix: 1000))
        #expect(state.tasks[5]?.bytesReceived == 1000)
        // A file that holds them all (or was not looked at) changes nothing.
        var whole = DaemonStateTests.state()
        _ = whole.handle(.taskRestored(t.record, partialLength: 8192), now: 1)
        #expect(whole.tasks[5]?.record.durableRanges == ByteRanges(prefix: 4096))
        var unseen = DaemonStateTests.state()
        _ = unseen.handle(.taskRestored(t.record), now: 1)
        #expect(unseen.tasks[5]?.record.durableRanges == ByteRanges(prefix: 4096))
    }

    /// A restored row becomes a task of its session's user (the row names no owner); a row of a session the state
    /// does not have is left alone, starts nothing and counts nowhere.
    @Test func aRowJoinsAsItsSessionsUsersTaskAndOneOfNoSessionIsLeftAlone() {
        var state = DaemonStateTests.state()
        var row = DaemonStateTests.task(6, session: "b", owner: 99).record // the owner given here goes nowhere
        row.state = .queued
        _ = state.handle(.taskRestored(row), now: 1)
        #expect(state.tasks[6]?.owner == 2 && state.tasks.queue.contains(6))
        row.id = 7
        row.session = "gone"
        #expect(state.handle(.taskRestored(row), now: 1).isEmpty)
        #expect(state.tasks[7] == nil && !state.tasks.queue.contains(7))
        #expect(state.tasks.ids(session: "gone").isEmpty)
    }

    @Test func aTaskWithNothingDurableOrFinishedIsNotLookedAt() {
        #expect(!DaemonState.partialMayBeShort(Self.running(durable: ByteRanges()).record))
        var done = Self.running(durable: ByteRanges(prefix: 10)).record
        done.state = .completed
        #expect(!DaemonState.partialMayBeShort(done))
    }
}

/// The name a download the client named no file for takes from its first response: Content-Disposition's, else
/// the URL's after redirects; once settled, none (the runner only makes the path a free one).
@Suite("DaemonState: a name from the response")
struct DaemonStateResponseNameTests {
    static func start(url: String, disposition: String? = nil) -> ResponseStart {
        ResponseStart(status: 200, offset: 0, discardedBytes: 0, reason: nil, expectedTotal: 10,
                      validators: Validators(etag: nil, lastModified: nil), finalURL: url, contentDisposition: disposition)
    }

    @Test func contentDispositionFirstThenTheFinalURL() {
        var state = DaemonStateTests.state()
        var t = DaemonStateTests.task(3, session: "a", owner: 1)
        t.record.destination = "/d/download"
        t.record.nameFromResponse = true
        state.tasks[3] = t
        let named = state.responseName(3, Self.start(url: "http://h/x/report.pdf?v=2", disposition: "attachment; filename=\"thesis.pdf\""))
        #expect(named?.candidate == "/d/thesis.pdf" && named?.suggested == "thesis.pdf" && named?.current == "/d/download")
        #expect(state.responseName(3, Self.start(url: "http://h/x/report.pdf"))?.candidate == "/d/report.pdf")
        state.tasks[3]?.record.nameFromResponse = false
        #expect(state.responseName(3, Self.start(url: "http://h/x/report.pdf")) == nil, "settled: never renamed")
    }

    /// When a name is asked for is the state's: the attempt's first response asks the runner for a free path
    /// (`chooseResponseName`), whose answer (`responseNamed`) settles the name; the name reserved at create is
    /// settled at once, with nothing to ask.
    @Test func theFirstResponseAsksForAFreePathUnlessItNamesTheReservedOne() {
        var state = DaemonStateTests.state()
        for (id, destination) in [(Int64(3), "/d/download"), (4, "/d/report.pdf")] {
            var t = DaemonStateTests.task(id, session: "a", owner: 1)
            t.record.destination = destination
            t.record.nameFromResponse = true
            t.attemptInFlight = true
            state.tasks[id] = t
        }
        let start = Self.start(url: "http://h/x/report.pdf", disposition: "attachment; filename=\"thesis.pdf\"")
        #expect(state.handle(.attemptProgress(3, .started(start)), now: 0)
                == [.chooseResponseName(3, candidate: "/d/thesis.pdf", suggested: "thesis.pdf", reserved: "/d/download")])
        let named = state.handle(.responseNamed(3, destination: "/d/thesis (1).pdf", suggestedFilename: "thesis.pdf"), now: 0)
        #expect(DaemonStateTests.journaled(named, 3) == [.didChangeDestination(destination: "/d/thesis (1).pdf",
                                                                               suggestedFilename: "thesis.pdf")])
        #expect(state.tasks[3]?.record.destination == "/d/thesis (1).pdf" && state.tasks[3]?.record.nameFromResponse == false)
        #expect(state.handle(.attemptProgress(3, .started(start)), now: 1).isEmpty, "settled: never renamed")
        // The reserved name: settled at once, its row journaled with no event.
        let same = state.handle(.attemptProgress(4, .started(Self.start(url: "http://h/x/report.pdf"))), now: 2)
        #expect(same.count == 1 && DaemonStateTests.journaled(same, 4).isEmpty)
        #expect(state.tasks[4]?.record.nameFromResponse == false && state.tasks[4]?.record.suggestedFilename == "report.pdf")
    }
}

/// `task.cancel`'s resume data, decided by the state before anything is canceled.
@Suite("DaemonState: resume data on cancel")
struct ResumeDataDecisionTests {
    @Test func keptOnlyWhenAskedWithAValidatorAndUnderTheCap() {
        var state = DaemonStateTests.state()
        var t = DaemonStateTests.task(1, session: "a", owner: 1)
        #expect(state.resumeDataDecision(for: t, asked: true, cap: 2) == .none) // no validator: never continued
        t.record.etag = "\"v1\""
        #expect(state.resumeDataDecision(for: t, asked: false, cap: 2) == .none)
        #expect(state.resumeDataDecision(for: t, asked: true, cap: 2) == .keep)
        t.record.etag = "W/\"weak\"" // a weak ETag is no validator for a range
        #expect(state.resumeDataDecision(for: t, asked: true, cap: 2) == .none)
        t.record.lastModified = "Sat, 22 Nov 2025 03:51:27 GMT"
        #expect(state.resumeDataDecision(for: t, asked: true, cap: 2) == .keep)
        _ = state.handle(.resumeDataChanged(uid: 1, kept: 1), now: 0) // one kept
        state.tasks[9] = DaemonStateCancelResumeDataTests.resumable(9)
        _ = state.handle(DaemonStateCancelResumeDataTests.cancel(9), now: 0) // one being made
        #expect(state.resumeDataDecision(for: t, asked: true, cap: 2) == .refused(kept: 2))
        var other = t
        other = ManagedTask(record: t.record, owner: 2, machine: t.machine, bytesReceived: 0)
        #expect(state.resumeDataDecision(for: other, asked: true, cap: 2) == .keep) // another uid's count
    }

    /// What is kept once the transfer stopped: the stopped attempt's ranges (newer than the row's), and of them only
    /// what the partial file holds; nothing on disk is no resume data, and the partial goes.
    @Test func madeFromTheStoppedAttemptsRangesAndOnlyWhatTheFileHolds() {
        var r = DaemonStateTests.task(1, session: "a", owner: 1).record
        r.etag = "\"v1\""
        r.lastModified = "Sat, 22 Nov 2025 03:51:27 GMT"
        r.bytesExpected = 10_000
        r.durableRanges = ByteRanges(prefix: 1_000)
        func made(_ durable: ByteRanges?, length: Int64?) -> DaemonState.ResumeDataMade {
            DaemonState.resumeData(of: r, durable: durable, partialLength: length, token: "t", now: 42)
        }
        // The attempt's ranges replace the row's (after a restart from zero the row's are no longer in the file).
        guard case .keep(let row) = made(ByteRanges([0..<500, 2_000..<3_000]), length: 10_000) else {
            Issue.record("expected a token")
            return
        }
        #expect(row.ranges == ByteRanges([0..<500, 2_000..<3_000]))
        #expect(row.bytes == 1_500)
        #expect(row.token == "t" && row.createdAt == 42 && row.session == "a")
        #expect(row.etag == r.etag && row.lastModified == r.lastModified && row.bytesExpected == 10_000)
        #expect(row.partialPath == r.partialPath && row.destination == r.destination && row.url == r.url)
        // No attempt was in flight: the row's ranges.
        #expect(made(nil, length: 10_000) == .keep(ResumeTokenRecord(
            token: "t", session: "a", url: r.url, partialPath: r.partialPath, destination: r.destination,
            ranges: ByteRanges(prefix: 1_000), bytesExpected: 10_000, etag: r.etag, lastModified: r.lastModified,
            createdAt: 42)))
        // A file shorter than the ranges (an fsync lost at a crash): only what it holds.
        guard case .keep(let short) = made(nil, length: 600) else {
            Issue.record("expected a token")
            return
        }
        #expect(short.ranges == ByteRanges(prefix: 600))
        // Nothing kept on disk: no token, the partial is removed.
        #expect(made(ByteRanges(), length: 10_000) == .discard(partialPath: r.partialPath))
        #expect(made(nil, length: nil) == .discard(partialPath: r.partialPath)) // the file is gone
        #expect(made(ByteRanges([2_000..<3_000]), length: 1_500) == .discard(partialPath: r.partialPath))
    }
}
