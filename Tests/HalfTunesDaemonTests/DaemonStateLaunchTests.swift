import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// Relaunching a session's client as the state decides it, in virtual time: events with nobody subscribed
/// start the unit, subscribers and acknowledgements hold it, failures back off and come due on the clock tick,
/// a changed unit starts over. The runner only starts, watches and journals (`LaunchMachineTests` has the rules
/// of one machine).
@Suite("DaemonState: launch units")
struct DaemonStateLaunchTests {
    static func launching(_ unit: String = "app.service") -> DaemonState {
        var config = SessionConfiguration()
        config.launchUnit = unit
        return DaemonStateTests.state(sessions: [("a", 1, config), ("b", 2, .init())])
    }

    static func starts(_ actions: [DaemonState.Action]) -> [String] {
        actions.compactMap { if case let .startUnit(session, _, _) = $0 { session } else { nil } }
    }

    static func recorded(_ actions: [DaemonState.Action]) -> [SessionLaunchRecord?] {
        actions.compactMap { if case let .recordLaunch(_, record) = $0 { .some(record) } else { nil } }
    }

    @Test func eventsWithNobodySubscribedStartTheUnitOnce() {
        var state = Self.launching()
        let first = state.handle(.eventsJournaled(session: "a", lastSeq: 1, count: 1), now: 100)
        #expect(first.contains(.startUnit(session: "a", unit: "app.service", failures: 0)))
        #expect(Self.recorded(first).last??.lastResult == "starting")
        #expect(state.sessions["a"]?.record.launch?.lastLaunchAt == 100) // the session shows what was journaled
        // Starting already: more events start nothing more.
        #expect(Self.starts(state.handle(.eventsJournaled(session: "a", lastSeq: 2, count: 1), now: 101)).isEmpty)
        // A session without a launch unit never starts anything.
        #expect(state.handle(.eventsJournaled(session: "b", lastSeq: 1, count: 1), now: 100).isEmpty)
    }

    @Test func aSubscriberHoldsTheStartUntilTheLastOneLeaves() {
        var state = Self.launching()
        _ = state.handle(.subscribersChanged("a", count: 2), now: 0)
        #expect(Self.starts(state.handle(.eventsJournaled(session: "a", lastSeq: 3, count: 3), now: 1)).isEmpty)
        #expect(Self.starts(state.handle(.subscribersChanged("a", count: 1), now: 2)).isEmpty)
        #expect(Self.starts(state.handle(.subscribersChanged("a", count: 0), now: 3)) == ["a"])
        // Acknowledged before the last one left: nothing waits, nothing starts.
        var acked = Self.launching()
        _ = acked.handle(.subscribersChanged("a", count: 1), now: 0)
        _ = acked.handle(.eventsJournaled(session: "a", lastSeq: 3, count: 3), now: 1)
        _ = acked.handle(.eventsAcknowledged(session: "a", through: 3, pruned: 3, droppedBodies: []), now: 2)
        #expect(Self.starts(acked.handle(.subscribersChanged("a", count: 0), now: 3)).isEmpty)
    }

    @Test func aFailedStartBacksOffAndComesDueOnTheClockTick() {
        var state = Self.launching()
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 1, count: 1), now: 0)
        let failed = state.handle(.launchStartAnswered("a", unit: "app.service", error: "Unit app.service not found."), now: 1)
        #expect(Self.recorded(failed).last??.failures == 1)
        #expect(state.launches["a"]?.phase == .backoff)
        #expect(Self.starts(state.handle(.clockTick, now: 1 + LaunchMachine.firstDelay - 0.5)).isEmpty)
        let due = state.handle(.clockTick, now: 1 + LaunchMachine.firstDelay)
        #expect(due.contains(.startUnit(session: "a", unit: "app.service", failures: 1)))
    }

    @Test func aStartedUnitIsWatchedAndItsEndWithEventsLeftIsAFailure() {
        var state = Self.launching()
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 1, count: 1), now: 0)
        #expect(state.handle(.launchStartAnswered("a", unit: "app.service", error: nil), now: 1)
            .contains(.watchUnit(session: "a", unit: "app.service")))
        _ = state.handle(.launchUnitEnded("a", unit: "app.service", result: "success", exitStatus: 0), now: 5)
        #expect(state.sessions["a"]?.record.launch?.lastResult == "exitedWithoutAcknowledging")
        #expect(state.sessions["a"]?.record.launch?.failures == 1)
        // An answer about a unit the session no longer has changes nothing.
        let before = state.launches["a"]
        #expect(state.handle(.launchUnitEnded("a", unit: "other.service", result: "failed", exitStatus: 1), now: 6).isEmpty)
        #expect(state.launches["a"] == before)
    }

    @Test func aChangedUnitForgetsTheOldRecordAndMayStartAtOnce() {
        var state = Self.launching()
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 1, count: 1), now: 0)
        _ = state.handle(.launchStartAnswered("a", unit: "app.service", error: "no such unit"), now: 1)
        var config = state.sessions["a"]!.record.configuration
        config.launchUnit = "app2.service"
        let changed = state.handle(.sessionConfigured("a", config), now: 2)
        #expect(changed.contains(.recordLaunch(session: "a", nil)))
        #expect(changed.contains(.startUnit(session: "a", unit: "app2.service", failures: 0)))
        config.launchUnit = nil
        let removed = state.handle(.sessionConfigured("a", config), now: 3)
        #expect(state.launches["a"] == nil && Self.starts(removed).isEmpty)
    }

    @Test func recoveryGivesEverySessionWithAUnitItsMachine() {
        var state = Self.launching()
        state.sessions["a"]?.lastEventSeq = 4 // events wait from before the restart
        var due = SessionLaunchRecord()
        due.failures = 2
        due.nextAttemptAt = 50
        var waiting = SessionConfiguration()
        waiting.launchUnit = "later.service"
        state.sessions["c"] = ManagedSession(
            record: SessionRecord(identifier: "c", uid: 3, configuration: waiting, state: .active, createdAt: 0, launch: due),
            lastEventSeq: 1, pendingEvents: 1)
        let actions = state.handle(.restoreFinished, now: 10)
        #expect(Self.starts(actions) == ["a"])
        #expect(state.launches["c"]?.phase == .backoff) // due at its time, not at once
        #expect(Self.starts(state.handle(.clockTick, now: 50)) == ["c"])
        _ = state.handle(.sessionRemoved("c"), now: 51)
        #expect(state.launches["c"] == nil)
    }
}

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

    @Test func resumeDataExpiresWhenRecoveryEndsAndHourly() {
        var state = DaemonStateTests.state()
        #expect(Self.prunes(state.handle(.restoreFinished, now: 10_000)) == 1)
        #expect(Self.prunes(state.handle(.clockTick, now: 10_001)) == 0)
        #expect(Self.prunes(state.handle(.clockTick, now: 10_000 + 3_599)) == 0)
        #expect(state.handle(.clockTick, now: 10_000 + 3_600).contains(.pruneResumeData(now: 13_600)))
    }
}

/// The resume data each uid holds, counted by the state from the runner's reports (`max-resume-data-per-uid` is
/// checked against it without reading the journal).
@Suite("DaemonState: resume data held")
struct DaemonStateResumeDataTests {
    @Test func keptAndInFlightAreCountedPerUIDAndNeverBelowZero() {
        var state = DaemonStateTests.state()
        _ = state.handle(.resumeDataChanged(uid: 1, kept: 3, inFlight: 0), now: 0) // what the journal held at start
        _ = state.handle(.resumeDataChanged(uid: 1, kept: 0, inFlight: 1), now: 1) // a cancel making one
        #expect(state.resumeDataHeld(by: 1) == 4 && state.resumeDataHeld(by: 2) == 0)
        _ = state.handle(.resumeDataChanged(uid: 1, kept: 1, inFlight: -1), now: 2) // made
        _ = state.handle(.resumeDataChanged(uid: 1, kept: -1, inFlight: 0), now: 3) // redeemed
        #expect(state.resumeDataHeld(by: 1) == 3)
        _ = state.handle(.resumeDataChanged(uid: 1, kept: -5, inFlight: 0), now: 4) // deleted with a session
        #expect(state.resumeDataHeld(by: 1) == 0 && state.resumeDataKept[1] == nil && state.resumeDataInFlight[1] == nil)
    }
}
