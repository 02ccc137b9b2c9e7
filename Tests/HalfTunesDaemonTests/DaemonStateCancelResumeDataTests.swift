import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// `task.cancel`'s resume data, decided by the state from the cancel to the token: refused past the owner's cap
/// with nothing canceled, none without a validator, else the partial kept and the task held in memory until the
/// caller reports the stopped transfer and the token's write.
@Suite("DaemonState: a cancel's resume data")
struct DaemonStateCancelResumeDataTests {
    /// A suspended download of `session` with a validator and ten durable bytes.
    static func resumable(_ id: Int64, session: String = "a", owner: UInt32 = 1) -> ManagedTask {
        var t = DaemonStateTests.task(id, session: session, owner: owner)
        t.record.etag = "\"v1\""
        t.record.durableRanges = ByteRanges(prefix: 10)
        return t
    }

    static func cancel(_ id: Int64) -> DaemonState.Input { .task(id, .cancel(keepPartial: true)) }

    @Test func pastTheOwnersCapTheCancelIsRefusedAndNothingChanges() {
        var state = DaemonState(limits: DaemonStateTests.limits, caps: DaemonState.Caps(maxResumeDataPerUID: 1))
        _ = state.handle(.sessionOpening(SessionRecord(identifier: "a", uid: 1, configuration: .init(), state: .active,
                                                       createdAt: 0), reconfigure: false), now: 0)
        _ = state.handle(.resumeDataChanged(uid: 1, kept: 1), now: 0)
        state.tasks[5] = Self.resumable(5)
        let refused = state.handle(Self.cancel(5), now: 1)
        #expect(refused == [.resumeDataRefused(.init(task: 5, owner: 1, kept: 1, max: 1))])
        #expect(state.tasks[5]?.machine.state == .suspended && state.resumeDataBeingMade.isEmpty)
        #expect(state.resumeDataHeld(by: 1) == 1)
        // Without resume data the same cancel goes through (and its partial goes).
        let canceled = state.handle(.task(5, .cancel(keepPartial: false)), now: 2)
        #expect(canceled.contains(.removePartial(path: "/d/.5.partial")) && state.tasks[5] == nil)
    }

    @Test func withoutAValidatorTheCancelKeepsNothing() {
        var state = DaemonStateTests.state()
        var t = Self.resumable(5)
        t.record.etag = nil
        state.tasks[5] = t
        let actions = state.handle(Self.cancel(5), now: 1)
        #expect(actions.contains(.removePartial(path: "/d/.5.partial")))
        #expect(state.tasks[5] == nil && state.resumeDataBeingMade.isEmpty && state.resumeDataHeld(by: 1) == 0)
        #expect(!actions.contains(.makeResumeData(5)))
    }

    /// A suspended task: no transfer to stop, yet it stays in memory (its row is what the token is made from) and
    /// counts against its owner until the token is written.
    @Test func theTaskIsHeldUntilItsTokenIsWritten() {
        var state = DaemonStateTests.state()
        state.tasks[5] = Self.resumable(5)
        let actions = state.handle(Self.cancel(5), now: 1)
        #expect(!actions.contains(.removePartial(path: "/d/.5.partial")), "the partial is kept")
        #expect(actions.contains(.makeResumeData(5)), "the caller is told to make it once the transfer stopped")
        #expect(state.tasks[5]?.machine.state == .canceled)
        #expect(state.resumeDataBeingMade[5] == .init(session: "a", owner: 1, partialPath: "/d/.5.partial"))
        #expect(state.resumeDataHeld(by: 1) == 1)
        #expect(state.handle(Self.cancel(5), now: 1.5).first.map { if case .refused = $0 { true } else { false } } == true,
                "canceled already")
        let stopped = state.handle(.resumeDataStopped(5, durable: nil, partialLength: 8, token: "tok"), now: 2)
        guard case .writeResumeToken(let row, let owner)? = stopped.first, stopped.count == 1 else {
            Issue.record("expected the token's write, got \(stopped)")
            return
        }
        #expect(owner == 1 && row.token == "tok" && row.ranges == ByteRanges(prefix: 8), "only what the file holds")
        #expect(state.tasks[5] != nil, "held until the write's outcome")
        #expect(state.handle(.resumeTokenWritten(5, failed: false), now: 3).isEmpty)
        #expect(state.tasks[5] == nil && state.resumeDataBeingMade.isEmpty)
        #expect(state.resumeDataHeld(by: 1) == 1 && state.resumeDataKept[1] == 1 && state.resumeDataInFlight[1] == nil)
    }

    /// A running task: its transfer stops first; the stopped attempt's end does not take it out of memory.
    @Test func aRunningTaskIsHeldPastItsAttemptsEnd() {
        var state = DaemonStateTests.state()
        state.tasks[5] = Self.resumable(5)
        #expect(DaemonStateTests.started(state.handle(.task(5, .resume), now: 1)) == [5])
        #expect(state.handle(Self.cancel(5), now: 2).contains(.stopAttempt(5)))
        _ = state.handle(.attemptEnded(5, .stopped(durableBytes: 10), jitterSample: 0.5), now: 3)
        #expect(state.tasks[5]?.machine.state == .canceled && state.tasks[5]?.attemptInFlight == false)
        let stopped = state.handle(.resumeDataStopped(5, durable: ByteRanges(prefix: 10), partialLength: 10, token: "t"), now: 4)
        #expect(stopped.count == 1 && { if case .writeResumeToken = stopped[0] { true } else { false } }())
    }

    @Test func aFailedWriteOrAnEmptyFileKeepsNothingAndThePartialGoes() {
        var state = DaemonStateTests.state()
        state.tasks[5] = Self.resumable(5)
        state.tasks[6] = Self.resumable(6)
        _ = state.handle(Self.cancel(5), now: 1)
        _ = state.handle(Self.cancel(6), now: 1)
        #expect(state.resumeDataHeld(by: 1) == 2)
        _ = state.handle(.resumeDataStopped(5, durable: nil, partialLength: 10, token: "t"), now: 2)
        #expect(state.handle(.resumeTokenWritten(5, failed: true), now: 3) == [.removePartial(path: "/d/.5.partial")])
        #expect(state.handle(.resumeDataStopped(6, durable: nil, partialLength: nil, token: "u"), now: 3)
                == [.removePartial(path: "/d/.6.partial")], "the file is gone: no token promises its bytes")
        #expect(state.tasks[5] == nil && state.tasks[6] == nil && state.resumeDataHeld(by: 1) == 0)
    }

    /// A task taken out of memory meanwhile (here: its insert failed) keeps nothing and leaves nothing counted.
    @Test func aTaskGoneMeanwhileKeepsNothingAndIsNotCountedAnyMore() {
        var state = DaemonStateTests.state()
        var t = Self.resumable(5)
        t.inserting = true
        state.tasks[5] = t
        _ = state.handle(Self.cancel(5), now: 1)
        #expect(state.resumeDataHeld(by: 1) == 1)
        _ = state.handle(.createsJournaled([5], failed: true), now: 2)
        #expect(state.tasks[5] == nil)
        #expect(state.handle(.resumeDataStopped(5, durable: nil, partialLength: 10, token: "t"), now: 3)
                == [.removePartial(path: "/d/.5.partial")])
        #expect(state.resumeDataBeingMade.isEmpty && state.resumeDataHeld(by: 1) == 0)
    }

    /// The session's invalidation does not delete its rows while resume data is still being made in it.
    @Test func anInvalidationWaitsForTheResumeDataBeingMade() {
        var state = DaemonStateTests.state()
        state.tasks[5] = Self.resumable(5)
        _ = state.handle(Self.cancel(5), now: 1)
        let invalidating = state.handle(.sessionInvalidating("a", cancelTasks: false), now: 2)
        #expect(!invalidating.contains(.finishInvalidation(session: "a")))
        _ = state.handle(.resumeDataStopped(5, durable: nil, partialLength: 10, token: "t"), now: 3)
        #expect(state.handle(.resumeTokenWritten(5, failed: false), now: 4) == [.finishInvalidation(session: "a")])
    }
}
