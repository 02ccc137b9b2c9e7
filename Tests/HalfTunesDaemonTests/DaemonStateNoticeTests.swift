import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// Which finished task is told, what it says and to whom is the state's: a `notify` right after the row that
/// journals its `didComplete`, when its session's `notifications` cover it; the runner only posts or sends it.
@Suite("DaemonState: notices of finished tasks")
struct DaemonStateNoticeTests {
    static func state(_ notifications: SessionNotifications?, daemonUID: UInt32 = 0) -> DaemonState {
        var state = DaemonState(limits: DaemonStateTests.limits, daemonUID: daemonUID)
        for (name, uid) in [("a", UInt32(1)), ("own", daemonUID)] {
            _ = state.handle(.sessionOpening(SessionRecord(identifier: name, uid: uid,
                                                           configuration: SessionConfiguration(notifications: notifications),
                                                           state: .active, createdAt: 0), reconfigure: false), now: 0)
        }
        return state
    }

    static func notices(_ actions: [DaemonState.Action]) -> [(AgentNotice, DaemonState.NoticeRecipient)] {
        actions.compactMap { if case let .notify(n, to) = $0 { (n, to) } else { nil } }
    }

    @Test func aCoveredEndIsToldRightAfterItsRowToItsUsersAgent() throws {
        var state = Self.state(.all, daemonUID: 7)
        state.tasks[5] = DaemonStateTests.task(5, session: "a", owner: 1)
        let actions = state.handle(.task(5, .cancel(keepPartial: false)), now: 30)
        let at = try #require(actions.firstIndex { if case .notify = $0 { true } else { false } })
        guard case let .journal(row, payloads) = actions[at - 1] else {
            Issue.record("the notice follows its row: \(actions)")
            return
        }
        #expect(row.state == .canceled && payloads.contains(where: \.isDidComplete))
        let (notice, to) = try #require(Self.notices(actions).first)
        #expect(to == .agent(uid: 1) && Self.notices(actions).count == 1)
        #expect(notice.task == 5 && notice.state == .canceled && notice.kind == .download && notice.seconds == 30)
        #expect(notice.session == "a" && notice.name == "5")
    }

    @Test func theDaemonsOwnUserIsToldByTheDaemonAndAnUncoveredEndNotAtAll() {
        var own = Self.state(.all, daemonUID: 7)
        own.tasks[5] = DaemonStateTests.task(5, session: "own", owner: 7)
        #expect(Self.notices(own.handle(.task(5, .cancel(keepPartial: false)), now: 1)).map(\.1) == [.daemonsOwnUser])
        // `completed` covers a download's completion or failure, not a cancel; the default for a session is none.
        var completedOnly = Self.state(.completed)
        completedOnly.tasks[5] = DaemonStateTests.task(5, session: "a", owner: 1)
        #expect(Self.notices(completedOnly.handle(.task(5, .cancel(keepPartial: false)), now: 1)).isEmpty)
        var unset = Self.state(nil)
        unset.tasks[5] = DaemonStateTests.task(5, session: "a", owner: 1)
        #expect(Self.notices(unset.handle(.task(5, .cancel(keepPartial: false)), now: 1)).isEmpty)
    }

    /// A cancel keeping resume data is answered on a path of its own; it is told all the same.
    @Test func aCancelKeepingResumeDataIsToldToo() {
        var state = Self.state(.all)
        state.tasks[5] = DaemonStateCancelResumeDataTests.resumable(5)
        let actions = state.handle(DaemonStateCancelResumeDataTests.cancel(5), now: 1)
        #expect(state.resumeDataBeingMade[5] != nil)
        #expect(Self.notices(actions).map(\.0.task) == [5])
    }
}
