import Foundation
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

/// `submitTasks`: a new task's id and its events' seqs are handed out when the insert is submitted, the write
/// is awaited through `WriteOutcome`, and an id is never handed out twice (a failed insert's included, across
/// a reopen).
@Suite struct SubmittedInsertTests {
    @Test func idsAndSeqsAreKnownAtOnceAndTheRowsAreThereOnceWritten() async throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        journal.writer.holdForTesting(true) // nothing is written yet: the ids must not come from SQLite
        let (tasks, written) = try journal.submitTasks([
            (Sample.task(name: "a"), [Sample.stateChanged(to: .suspended, from: nil)]),
            (Sample.task(name: "b"), [Sample.stateChanged(to: .suspended, from: nil)]),
        ])
        let ids = tasks.map { $0.0.id }
        #expect(ids == [1, 2])
        #expect(tasks.map { $0.1.map(\.task) } == [[1], [2]])
        #expect(tasks.flatMap { $0.1.map(\.seq) } == [1, 2])
        journal.writer.holdForTesting(false)
        #expect(await written.failure == nil)
        #expect(try journal.loadTasks().map(\.id) == [1, 2])
        #expect(try journal.loadTasks() == tasks.map(\.0))
        #expect(try journal.events(session: Sample.session().identifier, after: 0) == tasks.flatMap(\.1))
    }

    @Test func aFailedInsertWritesNothingAndItsIdsAreNeverUsedAgain() async throws {
        try await withTemporaryDirectoryAsync { dir in
            let path = dir + "/journal.sqlite"
            var journal: Journal? = try Journal(path: path)
            try journal!.upsertSession(Sample.session())
            let (first, _) = try journal!.insertTask(Sample.task(name: "first"), events: [])
            // The next insert fails in its transaction (as a full disk would): a trigger refuses it.
            try journal!.write { db in
                try db.execute(sql: """
                    CREATE TEMP TRIGGER refuse BEFORE INSERT ON tasks WHEN NEW.url LIKE '%refused%'
                    BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
                    """)
            }
            let (refused, written) = try journal!.submitTasks([(Sample.task(name: "refused"),
                                                                [Sample.stateChanged(to: .suspended, from: nil)])])
            let failure = await written.failure
            #expect(failure?.contains("refused by the test") == true)
            #expect(try journal!.loadTasks().map(\.id) == [first.id])
            #expect(try journal!.events(session: Sample.session().identifier, after: 0).isEmpty)
            let (after, _) = try journal!.insertTask(Sample.task(name: "after"), events: [])
            #expect(after.id! > refused[0].0.id!)
            try journal!.close()
            journal = nil
            let reopened = try Journal(path: path)
            let (later, _) = try reopened.insertTask(Sample.task(name: "later"), events: [])
            #expect(later.id! > after.id!)
            try reopened.close()
        }
    }
}
