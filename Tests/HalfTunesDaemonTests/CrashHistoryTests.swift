import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// The crash record's rule (issue 54, point 3), without signals: a task that ran in each of the last 3 crashes the
/// daemon recorded of itself is quarantined at restore; the others resume as always.
@Suite("Crash history and quarantine")
struct CrashHistoryTests {
    typealias T = DaemonStateTests

    @Test func aTaskInEachOfTheLastThreeCrashesIsQuarantined() {
        #expect(CrashHistory(text: "4 b 1 2\n4 b 2\n").quarantined == [], "two crashes are not enough")
        #expect(CrashHistory(text: "4 b 1 2\n4 b 2 3\n5 c 2 7\n").quarantined == [2])
        #expect(CrashHistory(text: "4 b 1 2\n4 b 2 3\n5 c 2 7\n11 c 7\n").quarantined == [], "only the last three count")
        #expect(CrashHistory(text: "4 b 1\n4 b 1\n4 b\n").quarantined == [], "a crash while nothing ran")
        // A line cut short (a power cut while it was written) or not the handler's is skipped.
        #expect(CrashHistory(text: "4 b 9\n4 b 9\nx y 9\n4 b 9 -3\n4 b 9\n4 b 9").quarantined == [9])
        let history = CrashHistory(text: "4 b 1\n4 b 1\n4 b 1\n4 b 1\n4 b 1\n")
        #expect(history.entries.count == CrashHistory.crashesToQuarantine, "the record keeps only the last ones")
        #expect(CrashHistory(text: Substring(history.text)) == history)
        // Numbers past Int64 are not ids: the line is skipped, nothing traps.
        #expect(CrashHistory(text: "4 b 99999999999999999999\n99999999999 b 1\n").entries.isEmpty)
    }

    @Test func aQuarantinedTaskIsRestoredFailedAndTheOthersAsAlways() {
        var state = T.state()
        _ = state.handle(.crashesRead(quarantine: [7]), now: 0)
        var poison = T.task(7, session: "a", owner: 1)
        poison.record.state = .running
        var other = T.task(8, session: "a", owner: 1)
        other.record.state = .running
        let actions = state.handle(.taskRestored(poison.record), now: 10)
        #expect(state.tasks[7] == nil, "failed: it lives in the journal only")
        #expect(T.completionError(actions, 7)?.code == TaskErrorCode.quarantined)
        #expect(T.journaled(actions, 7).contains(.stateChanged(state: .failed, previous: .running,
                                                                reason: T.completionError(actions, 7))))
        #expect(T.started(actions).isEmpty)
        _ = state.handle(.taskRestored(other.record), now: 10)
        #expect(state.tasks[8]?.record.state == .queued || state.tasks[8]?.record.state == .running)
        var suspended = T.state()
        _ = suspended.handle(.crashesRead(quarantine: [9]), now: 0)
        _ = suspended.handle(.taskRestored(T.task(9, session: "a", owner: 1).record), now: 10)
        #expect(suspended.tasks[9]?.record.state == .suspended, "a task that does not run is left as it is")
    }
}
