import Foundation
import HalfTunesCore
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

@Suite struct SessionTests {
    @Test func upsertInsertsThenReplaces() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session("b"))
        try journal.upsertSession(Sample.session("a"))
        #expect(try journal.loadSessions().map(\.identifier) == ["a", "b"])

        var changed = Sample.session("a")
        changed.state = .invalidating
        changed.uid = 4_000_000_000
        changed.configuration = SessionConfiguration(resourceTimeout: 60)
        try journal.upsertSession(changed)
        #expect(try journal.loadSessions() == [changed, Sample.session("b")])
    }

    @Test func deleteSessionRemovesItsTasksEventsAndTokensOnly() throws {
        let journal = try Journal.openInMemory()
        for id in ["gone", "kept"] {
            try journal.upsertSession(Sample.session(id))
            let (task, _) = try journal.insertTask(Sample.task(session: id),
                                                   events: [Sample.stateChanged(session: id, to: .suspended, from: nil)])
            try journal.appendEvents([Sample.stateChanged(session: id, task: task.id, to: .queued, from: .suspended)])
            try journal.insertResumeToken(ResumeToken.sample(token: "tok-\(id)", session: id))
        }
        #expect(try journal.resumeTokens(session: "gone").map(\.token) == ["tok-gone"])
        let keptTasks = try journal.loadTasks().filter { $0.session == "kept" }
        let keptEvents = try journal.events(session: "kept", after: 0)

        try journal.deleteSession("gone")
        #expect(try journal.loadSessions() == [Sample.session("kept")])
        #expect(try journal.loadTasks() == keptTasks)
        #expect(try journal.events(session: "gone", after: 0).isEmpty)
        #expect(try journal.events(session: "kept", after: 0) == keptEvents)
        #expect(try journal.resumeTokens(createdBefore: .infinity).map(\.token) == ["tok-kept"])
        #expect(try journal.lastEventSeq(session: "gone") == 0)
        try journal.deleteSession("never-existed")
    }
}

/// `deleteInvalidatedSession`: the session goes (with its tokens, returned) only while it is invalidating.
@Suite struct InvalidatedSessionTests {
    @Test func onlyAnInvalidatingSessionIsDeletedWithItsTokens() throws {
        let journal = try Journal.openInMemory()
        var session = Sample.session("inv")
        try journal.upsertSession(session)
        try journal.insertResumeToken(ResumeToken.sample(token: "t1", session: "inv"))
        #expect(try journal.deleteInvalidatedSession("inv") == nil) // active: kept
        #expect(try journal.loadSessions().map(\.identifier) == ["inv"])
        session.state = .invalidating
        try journal.upsertSession(session)
        #expect(try journal.deleteInvalidatedSession("inv")?.map(\.token) == ["t1"])
        #expect(try journal.loadSessions().isEmpty && journal.resumeTokens(session: "inv").isEmpty)
        #expect(try journal.deleteInvalidatedSession("inv") == nil) // gone: nothing
    }
}

enum ResumeToken {
    static func sample(token: String, session: String = "com.example.app", createdAt: Double = Sample.now) -> ResumeTokenRecord {
        ResumeTokenRecord(token: token, session: session, url: "http://127.0.0.1:8080/big.iso",
                          partialPath: "/var/lib/halftunesd/partial/3.part", destination: "/home/u/Downloads/big.iso",
                          bytes: 1_048_576, bytesExpected: 4_194_304, etag: "\"v1\"",
                          lastModified: "Sat, 22 Nov 2025 03:51:27 GMT", createdAt: createdAt)
    }
}

@Suite struct ResumeTokenTests {
    @Test func aTokenIsTakenOnlyOnce() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let record = ResumeToken.sample(token: "r1")
        try journal.insertResumeToken(record)
        #expect(try journal.takeResumeToken("r1") == record)
        #expect(try journal.takeResumeToken("r1") == nil)
        #expect(try journal.takeResumeToken("unknown") == nil)
    }

    @Test func expiryQueryAndDelete() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let old = ResumeToken.sample(token: "old", createdAt: 1_000)
        var minimal = ResumeTokenRecord(token: "minimal", session: "com.example.app", url: "http://127.0.0.1/x",
                                        partialPath: "/p", destination: "/d", bytes: 1, createdAt: 1_500)
        let new = ResumeToken.sample(token: "new", createdAt: 2_000)
        for r in [new, old, minimal] { try journal.insertResumeToken(r) }
        #expect(try journal.resumeTokens(createdBefore: 2_000) == [old, minimal])
        #expect(try journal.resumeTokens(createdBefore: 1_000).isEmpty)
        try journal.deleteResumeToken("old")
        try journal.deleteResumeToken("old")
        #expect(try journal.resumeTokens(createdBefore: .infinity) == [minimal, new])
        minimal.ranges = ByteRanges(prefix: 2)
        #expect(throws: (any Error).self) { try journal.insertResumeToken(minimal) }  // duplicate token
        #expect(throws: JournalError.unknownSession("ghost")) {
            try journal.insertResumeToken(ResumeToken.sample(token: "g", session: "ghost"))
        }
    }
}
