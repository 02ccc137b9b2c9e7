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

    /// After a restart, a session whose invalidation ends at once is deleted, not relaunched (a kill -9 between
    /// `session.invalidate` and its end left it in the journal with events waiting).
    @Test func recoveryStartsNothingForASessionBeingDeleted() {
        var state = Self.launching()
        state.sessions["a"]?.lastEventSeq = 2
        state.sessions["a"]?.record.state = .invalidating
        let actions = state.handle(.restoreFinished, now: 10)
        #expect(actions.contains(.finishInvalidation(session: "a")))
        #expect(Self.starts(actions).isEmpty && state.launches["a"] == nil)
    }
}
