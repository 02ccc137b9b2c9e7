import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// The end of a session's invalidation and resume data's expiry, as the state decides them: the deletion asked for
/// once, its outcome fed back (the session leaves with its tokens' count, or stays until the next start), and the
/// expiry cutoff from the state's own `Caps`.
@Suite("DaemonState: an invalidation's end and resume data's expiry")
struct DaemonStateInvalidationEndTests {
    static func asks(_ actions: [DaemonState.Action], _ session: String = "a") -> Int {
        actions.filter { $0 == .finishInvalidation(session: session) }.count
    }

    @Test func theDeletionIsAskedOnceUntilItsOutcomeIsIn() {
        var state = DaemonStateTests.state()
        #expect(Self.asks(state.handle(.sessionInvalidating("a", cancelTasks: false), now: 1)) == 1)
        #expect(state.sessions["a"]?.deleting == true)
        // Asked again (a second invalidate, the end of something of the session): no second deletion meanwhile.
        #expect(Self.asks(state.handle(.sessionInvalidating("a", cancelTasks: true), now: 2)) == 0)
        #expect(Self.asks(state.handle(.restoreFinished, now: 3)) == 0)
    }

    @Test func aDeletedSessionLeavesWithItsTokensCount() {
        var state = DaemonStateTests.state()
        _ = state.handle(.resumeDataChanged(uid: 1, kept: 5), now: 0)
        _ = state.handle(.sessionInvalidating("a", cancelTasks: false), now: 1)
        #expect(state.handle(.invalidationFinished("a", deletedTokens: 2), now: 2) == [.releaseSubscribers(session: "a")])
        #expect(state.sessions["a"] == nil && state.resumeDataHeld(by: 1) == 3)
        // Fed again (or for a session opened again since): nothing.
        _ = state.handle(.sessionOpening(SessionRecord(identifier: "a", uid: 1, configuration: .init(), state: .active,
                                                       createdAt: 3), reconfigure: false), now: 3)
        #expect(state.handle(.invalidationFinished("a", deletedTokens: 2), now: 4).isEmpty)
        #expect(state.sessions["a"]?.record.state == .active && state.resumeDataHeld(by: 1) == 3)
    }

    @Test func aDeletionThatFailedLeavesTheSessionInvalidatingAndIsAskedAgainLater() {
        var state = DaemonStateTests.state()
        _ = state.handle(.resumeDataChanged(uid: 1, kept: 2), now: 0)
        _ = state.handle(.sessionInvalidating("a", cancelTasks: false), now: 1)
        #expect(state.handle(.invalidationFinished("a", deletedTokens: nil), now: 2).isEmpty)
        #expect(state.sessions["a"]?.record.state == .invalidating && state.sessions["a"]?.deleting == false)
        #expect(state.resumeDataHeld(by: 1) == 2, "its tokens are still in the journal")
        #expect(Self.asks(state.handle(.restoreFinished, now: 3)) == 1)
    }

    @Test func resumeTokensAreCountedForTheirSessionsOwner() {
        var state = DaemonStateTests.state()
        _ = state.handle(.resumeTokensChanged(session: "b", by: 3), now: 0)
        _ = state.handle(.resumeTokensChanged(session: "b", by: -1), now: 1)
        _ = state.handle(.resumeTokensChanged(session: "gone", by: -1), now: 2)
        #expect(state.resumeDataHeld(by: 2) == 2 && state.resumeDataHeld(by: 1) == 0)
    }

    @Test func resumeDataExpiresAfterTheConfiguredLifetime() {
        var state = DaemonState(limits: DaemonStateTests.limits, caps: DaemonState.Caps(resumeDataLifetime: 60))
        #expect(state.handle(.restoreFinished, now: 1_000) == [.pruneResumeData(createdBefore: 940)])
        #expect(state.handle(.clockTick, now: 1_000 + DaemonState.resumeDataPruneInterval)
                    .contains(.pruneResumeData(createdBefore: 1_000 + DaemonState.resumeDataPruneInterval - 60)))
    }
}
