// task.list's pages from the journal: the ids in order whatever the scope and state, each read through an index
// in id order (no row visited only to test its state, no sort of every task of a user's sessions).
import GRDB
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

@Suite struct TaskListPageTests {
    /// Random tasks over 450 sessions (more than one statement merges) in random states: every page of every
    /// scope — every session, one, a few, all of them named — and state is what filtering every row gives.
    @Test func pagesAreWhatFilteringEveryRowGives() throws {
        let journal = try Journal.openInMemory()
        var rng = SystemRandomNumberGenerator()
        let sessions = (0..<450).map { "s\($0)" }
        for s in sessions { try journal.upsertSession(Sample.session(s)) }
        let states: [TaskState] = [.suspended, .queued, .running, .completed, .failed]
        var all: [(id: Int64, session: String, state: TaskState)] = []
        for i in 0..<1_500 {
            let session = i % 3 == 0 ? sessions[Int.random(in: 0..<450, using: &rng)] : sessions[i % 5]
            let state = states.randomElement(using: &rng)!
            let (t, _) = try journal.insertTask(Sample.task(session: session, name: "f\(i)", state: state), events: [])
            all.append((t.id!, session, state))
        }
        let scopes: [[String]?] = [nil, ["s1"], ["s0", "s2", "s4"], sessions, Array(sessions.reversed())]
        for scope in scopes {
            for state in [nil] + states {
                let expected = all.filter { t in scope.map { $0.contains(t.session) } ?? true && state.map { t.state == $0 } ?? true }
                    .map(\.id)
                var got: [Int64] = [], after = Int64.min
                while true { // pages of 37, each after the last id of the one before
                    let page = try journal.taskIDs(after: after, sessions: scope, state: state, limit: 37)
                    got += page
                    guard page.count == 37, let last = page.last else { break }
                    after = last
                }
                #expect(got == expected, "scope \(scope?.count ?? 0) sessions, state \(state?.rawValue ?? "any")")
            }
        }
        #expect(try journal.taskIDs(after: 0, sessions: [], state: nil, limit: 10).isEmpty)
    }

    /// The plans: an index range in id order for each scope with a finished state, and ranges merged for several
    /// sessions.
    @Test func eachPageIsReadThroughAnIndexInIdOrder() throws {
        let journal = try Journal.openInMemory()
        func plan(_ sql: String, _ arguments: StatementArguments) throws -> String {
            try journal.read { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments).map { $0["detail"] as String }
                    .joined(separator: "; ")
            }
        }
        // The state indexes hold finished rows only (schema v18): a finished state's range, said as the journal says it.
        let finished = " AND state = ? AND " + Journal.isFinished
        let root = try plan("SELECT id FROM tasks WHERE id > ?\(finished) ORDER BY id LIMIT ?", [0, "completed", 10])
        #expect(root.contains("tasks_by_state") && !root.contains("TEMP B-TREE"), "\(root)")
        let one = try plan("SELECT id FROM tasks WHERE id > ? AND session = ?\(finished) ORDER BY id LIMIT ?", [0, "a", "failed", 10])
        #expect(one.contains("tasks_by_session_state") && !one.contains("TEMP B-TREE"), "\(one)")
        let range = "SELECT id FROM tasks WHERE session = ? AND id > ?\(finished)"
        let merged = try plan("\(range) UNION ALL \(range) UNION ALL \(range) ORDER BY id LIMIT ?",
                              ["a", 0, "canceled", "b", 0, "canceled", "c", 0, "canceled", 10])
        #expect(merged.contains("MERGE") && merged.contains("tasks_by_session_state") && !merged.contains("TEMP B-TREE"), "\(merged)")
        // An unfinished state is in no index but the primary key's order: the daemon lists those from memory.
        let unfinished = try plan("SELECT id FROM tasks WHERE id > ? AND state = ? ORDER BY id LIMIT ?", [0, "queued", 10])
        #expect(!unfinished.contains("tasks_by_state") && !unfinished.contains("TEMP B-TREE"), "\(unfinished)")
    }
}
