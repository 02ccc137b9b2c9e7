// Which finished tasks the users' agents hear of, and what a notice names.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

@Suite("Agent notices")
struct AgentNoticesTests {
    func record(_ state: TaskState, kind: TaskKind = .download, location: String? = nil) -> TaskRecord {
        var r = TaskRecord(id: 9, session: "1000/app", url: "http://h/dir/file.iso?x=1", state: state,
                           destination: "/d/", partialPath: "/d/.9.partial", createdAt: 100, updatedAt: 100)
        r.kind = kind.rawValue
        r.location = location
        r.nameFromResponse = true
        r.bytesExpected = 5000
        if state == .failed { r.error = TaskError(code: "httpStatus", message: "HTTP 404 Not Found") }
        return r
    }

    func notice(_ r: TaskRecord, _ policy: SessionNotifications?, name: String = "app") -> AgentNotice? {
        AgentNotices.notice(for: r, configuration: SessionConfiguration(notifications: policy), sessionName: name,
                            presented: name, now: 112.5)
    }

    @Test func theSessionsPolicyDecides() {
        let completed = record(.completed, location: "/d/file.iso")
        #expect(notice(completed, nil) == nil, "apps' sessions default to none")
        #expect(notice(completed, nil, name: "halftunesctl") != nil, "the CLI's session defaults to completed")
        #expect(notice(completed, SessionNotifications.none) == nil)
        #expect(notice(record(.canceled), .completed) == nil && notice(record(.canceled), .all) != nil)
        #expect(notice(record(.completed, kind: .data), .completed) == nil && notice(record(.completed, kind: .data), .all) != nil)
        #expect(notice(record(.running), .all) == nil, "only finished tasks")
    }

    @Test func aNoticeNamesTheFileItsSizeTimeAndWhy() {
        let ok = notice(record(.completed, location: "/d/file (1).iso"), .completed)
        #expect(ok == AgentNotice(session: "app", task: 9, kind: .download, state: .completed, name: "file (1).iso",
                                  location: "/d/file (1).iso", bytes: 5000, seconds: 12.5))
        let failed = notice(record(.failed), .completed)
        #expect(failed?.name == "file.iso" && failed?.location == nil && failed?.error == "HTTP 404 Not Found")
    }
}
