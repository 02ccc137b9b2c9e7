import HalfTunesCore
import HalfTunesJournal
import Testing
@testable import HalfTunesDaemon

/// The index by uid follows every insert, change and removal, whichever way the write is made.
@Suite struct SessionTableTests {
    static func session(_ identifier: String, uid: UInt32) -> ManagedSession {
        ManagedSession(record: SessionRecord(identifier: identifier, uid: uid, configuration: .init(), state: .active,
                                             createdAt: 0), lastEventSeq: 0, pendingEvents: 0)
    }

    @Test func theIndexByUIDFollowsEveryWrite() {
        var table = SessionTable()
        table["a"] = Self.session("a", uid: 1)
        table["b"] = Self.session("b", uid: 1)
        table["c"] = Self.session("c", uid: 2)
        #expect(table.identifiers(of: 1) == ["a", "b"])
        #expect(table.identifiers(of: 2) == ["c"])
        #expect(table.identifiers(of: 3).isEmpty)
        #expect(table.count == 3)

        table["a"]?.pendingEvents = 5 // a change through the optional chain keeps the entry
        #expect(table["a"]?.pendingEvents == 5)
        #expect(table.identifiers(of: 1) == ["a", "b"])

        table["b"] = nil
        #expect(table.identifiers(of: 1) == ["a"])
        table["a"] = nil
        #expect(table.identifiers(of: 1).isEmpty)
        #expect(table.count == 1)
        #expect(Set(table.map(\.key)) == ["c"])

        // An identifier taken again by another uid (a session deleted, then opened anew) moves between uids.
        table["c"] = Self.session("c", uid: 4)
        #expect(table.identifiers(of: 2).isEmpty)
        #expect(table.identifiers(of: 4) == ["c"])
    }
}
