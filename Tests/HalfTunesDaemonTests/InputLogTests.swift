// The replay check of the daemon's inputs (InputLog): the same inputs give the same actions; a difference is named.
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

@Suite("InputLog")
struct InputLogTests {
    /// Inputs fed as the runner feeds them (`DaemonCore.feed`), recorded with their actions.
    static func recorded() -> InputLog {
        var state = DaemonStateTests.state()
        var log = InputLog(initial: state)
        let rows = (1...4).map { DaemonStateTests.task(Int64($0), session: $0 % 2 == 0 ? "a" : "b", owner: 1).record }
        let admissions = rows.map { row in
            var new = DaemonState.NewTask(row: row, start: false)
            new.row.id = nil
            return DaemonState.Input.admitting(new)
        }
        let inputs: [DaemonState.Input] = admissions + [
            .created(rows), .createsJournaled([1, 2, 3, 4], failed: false),
            .task(1, .resume), .task(2, .resume), .task(3, .resume),
            .attemptEnded(1, DaemonStateTests.transient(), jitterSample: 0.5),
            .retryTimerFired, .task(4, .resume), .task(2, .cancel(keepPartial: false)), .grantSlots,
        ]
        for (index, input) in inputs.enumerated() {
            let now = Double(index) * 10
            let actions = state.handle(input, now: now)
            log.record(input, now: now, actions: actions)
        }
        return log
    }

    @Test func theSameInputsGiveTheSameActions() {
        let log = Self.recorded()
        let (checked, mismatch) = log.replay()
        #expect(mismatch == nil)
        #expect(checked == log.entries.count)
        #expect(log.entries.contains { !$0.actions.isEmpty })
    }

    @Test func anInputWhoseActionsDifferIsNamed() {
        var log = Self.recorded()
        let index = log.entries.count
        log.record(.task(3, .suspend), now: 100, actions: []) // the live state answered nothing (it did not)
        let (checked, mismatch) = log.replay()
        #expect(checked == index)
        #expect(mismatch?.hasPrefix("input \(index) task(3") == true, "\(mismatch ?? "none")")
        #expect(InputLog.kind(log.entries[index].input) == "task")
        // Found in step too, as it was recorded (what a killed process's live report holds).
        #expect(log.checkedInStep == index && log.mismatchInStep?.hasPrefix("input \(index) task(3") == true)
    }

    @Test func inputsAreReplayedInStepAsTheyAreRecorded() {
        let log = Self.recorded()
        #expect(log.checkedInStep == log.entries.count && log.mismatchInStep == nil)
    }
}
