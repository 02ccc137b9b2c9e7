import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// The unfinished-task counts the caps read follow every write to the table, in whatever form it comes.
@Suite("TaskTable's counts")
struct TaskTableTests {
    func task(_ id: Int64, session: String, owner: UInt32, state: TaskState) -> ManagedTask {
        let record = TaskRecord(id: id, session: session, url: "http://127.0.0.1:9/\(id)", state: state,
                                destination: "d\(id)", partialPath: "/nonexistent/\(id).partial",
                                createdAt: 0, updatedAt: 0)
        return ManagedTask(record: record, owner: owner, machine: TaskStateMachine(state: state), bytesReceived: 0)
    }

    @Test func countsFollowInsertsStateChangesAndRemovals() {
        var table = TaskTable()
        table[1] = task(1, session: "a", owner: 10, state: .suspended)
        table[2] = task(2, session: "a", owner: 10, state: .queued)
        table[3] = task(3, session: "b", owner: 10, state: .running)
        table[4] = task(4, session: "c", owner: 20, state: .completed)   // finished: never counted
        #expect(table.unfinished(session: "a") == 2 && table.unfinished(session: "b") == 1)
        #expect(table.unfinished(session: "c") == 0 && table.unfinished(owner: 10) == 3 && table.unfinished(owner: 20) == 0)

        // In place through optional chaining, as the core writes: a task that finishes stops counting.
        table[2]?.machine = TaskStateMachine(state: .canceled)
        #expect(table.unfinished(session: "a") == 1 && table.unfinished(owner: 10) == 2)
        // Copy, modify, write back; and a finished task made unfinished again (a retried publish) counts again.
        var t = table[4]!
        t.machine = TaskStateMachine(state: .queued)
        table[4] = t
        #expect(table.unfinished(session: "c") == 1 && table.unfinished(owner: 20) == 1)
        // Rewriting the same state does not count twice; removing stops counting.
        table[1] = table[1]
        #expect(table.unfinished(session: "a") == 1)
        table[1] = nil
        table[3] = nil
        #expect(table.unfinished(session: "a") == 0 && table.unfinished(session: "b") == 0 && table.unfinished(owner: 10) == 0)
        #expect(table.count == 2 && Set(table.keys) == [2, 4] && table.values.count == 2)
    }
}
