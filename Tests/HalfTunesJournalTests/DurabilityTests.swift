import Foundation
import Testing
@testable import HalfTunesJournal

/// Group commit: commits return before their fsync; one fsync of the WAL makes every commit before it durable,
/// and whoever waits for a commit is told only then.
@Suite struct DurabilityTests {
    @Test func oneFsyncCoversEveryCommitMadeWhileItWaited() throws {
        try withTemporaryDirectory { dir in
            let journal = try Journal(path: dir + "/journal.sqlite")
            let durability = journal.durability
            let before = durability.syncCount
            #expect(durability.isDurable(durability.lastCommit)) // the migrations were synced at open
            durability.holdForTesting(true)
            let first = durability.lastCommit + 1
            for n in 0..<50 { try journal.upsertSession(Sample.session("s\(n)")) }
            let last = durability.lastCommit
            #expect(last == first + 49)
            #expect(!durability.isDurable(first) && !durability.isDurable(last))
            let told = Told()
            durability.whenDurable(first) { told.add(first) }
            durability.whenDurable(last) { told.add(last) }
            #expect(told.values.isEmpty) // nothing is reported durable before its fsync
            durability.holdForTesting(false)
            journal.sync()
            #expect(durability.isDurable(last))
            #expect(durability.syncCount == before + 1) // one fsync for the 50 commits
            #expect(Set(told.values) == [first, last])
            // Already durable: the callback runs at once.
            let atOnce = Told()
            durability.whenDurable(last) { atOnce.add(last) }
            #expect(atOnce.values == [last] && durability.failure == nil)
            try journal.close()
            #expect(try Journal(path: dir + "/journal.sqlite").loadSessions().count == 50)
        }
    }

    @Test func anInMemoryJournalIsDurableAtOnce() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        #expect(journal.durability.isDurable(journal.durability.lastCommit) && journal.durability.syncCount == 0)
    }
}

/// Commit numbers reported durable, from whichever thread reports them.
final class Told: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [UInt64] = []
    func add(_ n: UInt64) { lock.lock(); list.append(n); lock.unlock() }
    var values: [UInt64] { lock.lock(); defer { lock.unlock() }; return list }
}
