import HalfTunesCore
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
        var state = DaemonStateTests.state(sessions: [("a", 1, config), ("b", 2, .init()), ("u", 7, config)])
        state.daemonUID = 1 // "a" is the daemon's own user's; "u" another user's (its agent starts it)
        return state
    }

    static func asked(_ actions: [DaemonState.Action]) -> [String] {
        actions.compactMap { if case let .askAgent(_, session, _) = $0 { session } else { nil } }
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
            record: SessionRecord(identifier: "c", uid: 1, configuration: waiting, state: .active, createdAt: 0, launch: due),
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

    /// Another user's session: its unit starts in that user's manager, by their agent. With no agent connected the
    /// launch waits (journaled: `session show` says so) without counting as a failure; an agent registering gets
    /// it; no `watchUnit` (the agent watches and reports); an agent that leaves mid-run puts it back to waiting and
    /// the next one is asked again; another uid's agent gets nothing of it.
    @Test func anotherUsersLaunchGoesToTheirAgent() {
        var state = Self.launching()
        let first = state.handle(.eventsJournaled(session: "u", lastSeq: 1, count: 1), now: 100)
        #expect(Self.starts(first).isEmpty && Self.asked(first).isEmpty)
        #expect(state.launches["u"]?.phase == .waitingForAgent)
        #expect(Self.recorded(first).last??.lastResult == LaunchMachine.waitingForAgent)
        #expect(state.sessions["u"]?.record.launch?.failures == 0)
        #expect(Self.asked(state.handle(.agentRegistered(8), now: 101)).isEmpty, "another user's agent")
        let registered = state.handle(.agentRegistered(7), now: 102)
        #expect(registered.contains(.askAgent(uid: 7, session: "u", unit: "app.service")))
        let started = state.handle(.launchStartAnswered("u", unit: "app.service", error: nil), now: 103)
        #expect(state.launches["u"]?.phase == .running)
        #expect(!started.contains { if case .watchUnit = $0 { true } else { false } }, "the agent watches")
        _ = state.handle(.agentLeft(7), now: 104)
        #expect(state.launches["u"]?.phase == .waitingForAgent)
        #expect(state.handle(.agentRegistered(7), now: 105).contains(.askAgent(uid: 7, session: "u", unit: "app.service")))
        _ = state.handle(.launchStartAnswered("u", unit: "app.service", error: nil), now: 106)
        _ = state.handle(.launchUnitEnded("u", unit: "app.service", result: "success", exitStatus: 1), now: 110)
        #expect(state.launches["u"]?.phase == .backoff && state.sessions["u"]?.record.launch?.failures == 1,
                "ended without acknowledging: backoff, as for the daemon's own units")
        // The daemon's own user's session still starts in its own manager.
        let own = state.handle(.eventsJournaled(session: "a", lastSeq: 1, count: 1), now: 111)
        #expect(Self.starts(own) == ["a"] && Self.asked(own).isEmpty)
    }

    /// A session whose events were all acknowledged while it waited for the agent starts nothing when one comes;
    /// one whose client is subscribed when the agent comes starts when that client leaves with events waiting.
    @Test func nothingToLaunchWhenTheAgentComesAfterTheClient() {
        var state = Self.launching()
        _ = state.handle(.eventsJournaled(session: "u", lastSeq: 1, count: 1), now: 100)
        let acked = state.handle(.eventsAcknowledged(session: "u", through: 1, pruned: 1, droppedBodies: []), now: 101)
        #expect(state.launches["u"]?.phase == .idle && Self.recorded(acked).last??.lastResult == "acknowledged")
        #expect(Self.asked(state.handle(.agentRegistered(7), now: 102)).isEmpty)

        var subscribed = Self.launching()
        _ = subscribed.handle(.eventsJournaled(session: "u", lastSeq: 1, count: 1), now: 100)
        _ = subscribed.handle(.subscribersChanged("u", count: 1), now: 101)
        #expect(Self.asked(subscribed.handle(.agentRegistered(7), now: 102)).isEmpty, "a client is there")
        #expect(subscribed.handle(.subscribersChanged("u", count: 0), now: 103)
            .contains(.askAgent(uid: 7, session: "u", unit: "app.service")), "it left with events waiting")
    }

    /// The daemon's own uid has no agent (its units start in its own manager, whoever registers); an agent
    /// replaced (left, then the new one registered) is asked again; a report about a unit the session no longer
    /// has changes nothing.
    @Test func ownUIDReplacementsAndStaleReports() {
        var state = Self.launching()
        _ = state.handle(.agentRegistered(1), now: 99)
        #expect(!state.agents.contains(1))
        #expect(Self.starts(state.handle(.eventsJournaled(session: "a", lastSeq: 1, count: 1), now: 100)) == ["a"])
        _ = state.handle(.agentLeft(1), now: 100)
        #expect(state.launches["a"]?.phase == .starting, "the daemon's own launch is not the agent's")

        _ = state.handle(.agentRegistered(7), now: 100)
        #expect(Self.asked(state.handle(.eventsJournaled(session: "u", lastSeq: 1, count: 1), now: 101)) == ["u"])
        _ = state.handle(.launchStartAnswered("u", unit: "app.service", error: nil), now: 102)
        _ = state.handle(.agentLeft(7), now: 103)
        #expect(Self.asked(state.handle(.agentRegistered(7), now: 103)) == ["u"], "the successor is asked")
        // An agent that does not answer within a minute: a failed start, backed off.
        _ = state.handle(.clockTick, now: 162)
        #expect(state.launches["u"]?.phase == .starting)
        _ = state.handle(.clockTick, now: 163)
        #expect(state.launches["u"]?.phase == .backoff && state.sessions["u"]?.record.launch?.lastResult == "startFailed")
        #expect(state.sessions["u"]?.record.launch?.lastMessage?.contains("did not answer") == true)
        #expect(Self.asked(state.handle(.clockTick, now: 173)) == ["u"], "asked again when due")
        _ = state.handle(.launchStartAnswered("u", unit: "app.service", error: nil), now: 174)

        var config = SessionConfiguration()
        config.launchUnit = "other.service"
        _ = state.handle(.sessionConfigured("u", config, ticket: 1), now: 175)
        _ = state.handle(.launchUnitEnded("u", unit: "app.service", result: "failed", exitStatus: 1), now: 176)
        #expect(state.sessions["u"]?.record.launch?.failures ?? 0 == 0, "the old unit's end is not the new one's")
    }

    /// A launch record the journal refused is written again on the clock tick, after the wait a task row's rewrite
    /// has (1 s, doubling with each failure in a row), as the session has it then; one whose failure does not come
    /// back within its wait counts as written. Shutdown's grace writes every one left; a removed session drops its.
    @Test func aLaunchRecordTheJournalRefusedIsWrittenAgain() {
        var state = Self.launching()
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 1, count: 1), now: 0)
        let failed = state.handle(.launchStartAnswered("a", unit: "app.service", error: "Unit app.service not found."), now: 1)
        let record = state.sessions["a"]?.record.launch
        #expect(record?.failures == 1 && Self.recorded(failed) == [record])

        #expect(state.isIdle)
        #expect(state.handle(.launchRecordWriteFailed("a", journalTakesWrites: true), now: 1.1).isEmpty, "written again on the clock, not at once")
        #expect(!state.isIdle, "a record to write again keeps an exit-when-idle daemon up")
        #expect(Self.recorded(state.handle(.clockTick, now: 2)).isEmpty)
        #expect(Self.recorded(state.handle(.clockTick, now: 2.2)) == [record])
        // Refused again: the wait doubles.
        _ = state.handle(.launchRecordWriteFailed("a", journalTakesWrites: true), now: 2.5)
        #expect(Self.recorded(state.handle(.clockTick, now: 4.4)).isEmpty)
        #expect(Self.recorded(state.handle(.clockTick, now: 4.5)) == [record])
        // No failure came back within its wait: written, nothing more (the unit's start is due at 11 only).
        #expect(Self.recorded(state.handle(.clockTick, now: 8.5)).isEmpty)
        #expect(state.launchRewrites.isEmpty && state.isIdle)

        // Shutdown's grace writes the ones left at once; a removed session's is dropped.
        _ = state.handle(.launchRecordWriteFailed("a", journalTakesWrites: true), now: 9)
        _ = state.handle(.launchRecordWriteFailed("u", journalTakesWrites: true), now: 9)
        _ = state.handle(.sessionRemoved("u"), now: 9)
        _ = state.handle(.shutdownBegan, now: 9.1)
        #expect(Self.recorded(state.handle(.shutdownGraceEnded, now: 9.2)) == [record])
        // A session the state does not have has nothing to write.
        #expect(state.handle(.launchRecordWriteFailed("gone", journalTakesWrites: true), now: 10).isEmpty)
        #expect(state.launchRewrites["gone"] == nil)
    }

    /// A journal that takes no more writes (closed, or a failed fsync) could never take the record: it is not tried
    /// again, so an exit-when-idle daemon can still go.
    @Test func aLaunchRecordIsNotWrittenAgainToAJournalThatTakesNoWrites() {
        var state = Self.launching()
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 1, count: 1), now: 0)
        _ = state.handle(.launchStartAnswered("a", unit: "app.service", error: "Unit app.service not found."), now: 1)
        #expect(state.handle(.launchRecordWriteFailed("a", journalTakesWrites: false), now: 1.1).isEmpty)
        #expect(state.launchRewrites.isEmpty && state.isIdle)
        #expect(Self.recorded(state.handle(.clockTick, now: 5)).isEmpty)
    }
}
