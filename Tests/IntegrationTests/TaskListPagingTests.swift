import Foundation
import HalfTunesKit
import HalfTunesProtocol
import Testing

/// `task.list` answers in pages of at most 1,000 tasks, by id, with a cursor to the next page; clients
/// (HalfTunesKit, `halftunesctl list`) follow the pages.
@Suite("task.list pages")
struct TaskListPagingTests {
    @Test func pagesFollowEachOtherByIDAndClientsReadThemAll() async throws {
        try await withDaemon { daemon, _ in
            var client = try daemon.client()
            _ = try client.openSession("pages.a")
            _ = try client.openSession("pages.b")
            var ids: [Int64] = []
            for i in 0..<1_100 {
                let session = i % 4 == 0 ? "pages.b" : "pages.a"
                ids.append(try client.createTask(TaskCreateParams(session: session, url: "http://127.0.0.1:9/\(i)",
                                                                  destination: "p\(i)")).id)
            }
            // The default page is the maximum, 1,000, then a cursor; the rest follows it.
            let first = try client.taskPage()
            #expect(first.tasks.map(\.id) == Array(ids.prefix(1000)))
            let cursor = try #require(first.nextCursor, "no nextCursor after a full page")
            let late = try client.createTask(TaskCreateParams(session: "pages.a", url: "http://127.0.0.1:9/late", destination: "late"))
            let second = try client.taskPage(cursor: cursor)
            #expect(second.tasks.map(\.id) == Array(ids.dropFirst(1000)) + [late.id], "a task created meanwhile comes last")
            #expect(second.nextCursor == nil)

            // Filters page too: small pages of one session's tasks in one state, nothing skipped or repeated.
            _ = try client.cancel(ids[4])   // a pages.b task
            var seen: [Int64] = []
            var next: String?
            var pages = 0
            repeat {
                let page = try client.taskPage(session: "pages.b", state: .suspended, limit: 70, cursor: next)
                #expect(page.tasks.count <= 70 && page.tasks.allSatisfy { $0.session == "pages.b" && $0.state == .suspended })
                seen += page.tasks.map(\.id)
                next = page.nextCursor
                pages += 1
            } while next != nil
            let expected = ids.enumerated().filter { $0.offset % 4 == 0 && $0.offset != 4 }.map(\.element)
            #expect(seen == expected && pages == 4, "\(pages) pages")
            #expect(try client.tasks().count == 1_101)

            // An unfinished state is listed from memory, a finished one from the journal; both page by id across
            // sessions, follow state changes at once, and are the same after kill -9 and a restart.
            // Queued, held by its date: it asks for no transfer slot.
            let held = try client.createTask(TaskCreateParams(session: "pages.b", url: "http://127.0.0.1:9/held",
                                                              destination: "held", start: true,
                                                              earliestBeginDate: "2100-01-01T00:00:00Z"))
            #expect(held.state == .queued)
            func byState(_ state: TaskState) throws -> [Int64] {
                var got: [Int64] = [], cursor: String?
                repeat {
                    let page = try client.taskPage(state: state, limit: 300, cursor: cursor)
                    #expect(page.tasks.allSatisfy { $0.state == state }, "\(state)")
                    got += page.tasks.map(\.id)
                    cursor = page.nextCursor
                } while cursor != nil
                return got
            }
            func check(_ when: String) throws {
                #expect(try byState(.queued) == [held.id], "\(when)")
                #expect(try byState(.canceled) == [ids[4]], "\(when)")
                #expect(try byState(.suspended) == ids.filter { $0 != ids[4] } + [late.id], "\(when)")
                #expect(try client.taskPage(session: "pages.a", state: .queued).tasks.isEmpty, "\(when)")
                #expect(try byState(.running).isEmpty && byState(.completed).isEmpty, "\(when)")
            }
            try check("before a restart")
            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            try check("after kill -9")

            // Bad limits and cursors are refused clearly.
            for (limit, cursor) in [(0, nil), (1001, nil), (nil, "x"), (nil, "-5")] as [(Int?, String?)] {
                do {
                    _ = try client.taskPage(limit: limit, cursor: cursor)
                    Issue.record("limit \(String(describing: limit)), cursor \(String(describing: cursor)) accepted")
                } catch HalfTunesClientError.rpc(let e) {
                    #expect(e.code == RPCErrorCode.invalidParams.rawValue, "\(e)")
                    #expect(e.message.contains(limit != nil ? "limit must be 1 to 1000" : "is not a nextCursor"), "\(e.message)")
                }
            }

            // halftunesctl list follows the pages.
            let listed = try ctl(["list", "--json"], socket: daemon.socketPath)
            #expect(listed.status == 0, "\(listed.stderr)")
            let all = try JSONDecoder().decode(TaskListResult.self, from: Data(listed.stdout.utf8))
            #expect(all.tasks.map(\.id) == ids + [late.id, held.id] && all.nextCursor == nil)
        }
    }
}
