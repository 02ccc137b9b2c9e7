import Foundation
@testable import HalfTunesDaemon
@testable import HalfTunesJournal
import HalfTunesProtocol
import Testing

/// A task row the journal would not even take because it takes no more writes at all (closed, or no longer able to
/// make anything durable after a failed fsync) is not written again: nothing could take it, and a rewrite tried
/// every minute would keep the daemon from ever being idle (exit-when-idle, and a restart, clear the failure).
@Suite struct RowNotSubmittedTests {
    @Test func aRowAJournalThatTakesNoMoreWritesRefusedIsNotTriedAgain() async throws {
        try await withCore("not-submitted") { core, journal in
            _ = try await core.openSession(SessionOpenParams(identifier: "1/s"), uid: 1)
            let t = try await core.createTask(TaskCreateParams(session: "1/s", url: "http://127.0.0.1:9/x"), caller: Caller(uid: 1))

            try journal.close()
            _ = try await core.cancelTask(t.id, produceResumeData: false, caller: Caller(uid: 1))
            #expect(!journal.takesWrites)
            #expect(await core.rowRewrite(t.id) == nil, "no rewrite for a journal that takes no more writes")
            #expect(await core.isIdle(), "nothing left pending")
        }
    }
}

extension DaemonCore {
    func rowRewrite(_ id: Int64) -> DaemonState.RowRewrite? { state.rowRewrites[id] }
}
