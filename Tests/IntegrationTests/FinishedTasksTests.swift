import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Finished tasks live in the journal, not in the daemon's memory: they are still counted, read by id and listed
/// in pages exactly as before, refuse every change as finished tasks do, and survive restarts the same way.
@Suite("Finished tasks in the journal")
struct FinishedTasksTests {
    @Test func finishedTasksAreCountedReadListedAndRefuseChangesAcrossRestarts() async throws {
        try await withDaemon { daemon, origin in
            var client = try daemon.client()
            let body = TestOrigin.randomBytes(count: 100_000, seed: 81)
            var done: [Int64] = []
            for name in ["f1", "f2", "f3"] {
                origin.put("/\(name).bin", body)
                let t = try client.startDownload(origin.url("/\(name).bin"), session: "fin", destination: "\(name).bin")
                done.append(try client.waitFor(task: t.id, state: .completed).id)
            }
            let kept = try client.createTask(TaskCreateParams(session: "fin", url: origin.url("/f1.bin"), destination: "kept.bin"))
            let dropped = try client.createTask(TaskCreateParams(session: "fin", url: origin.url("/f1.bin"), destination: "dropped.bin"))
            _ = try client.cancel(dropped.id)

            func check(_ when: String) throws {
                let status = try client.status()
                #expect(status.tasks["completed"] == 3 && status.tasks["canceled"] == 1 && status.tasks["suspended"] == 1,
                        "\(when): \(status.tasks)")
                let counts = try client.openSession("fin").session.taskCounts
                #expect(counts == ["completed": 3, "canceled": 1, "suspended": 1], "\(when): \(counts)")
                for id in done {
                    let t = try client.task(id)
                    #expect(t.state == .completed && t.bytesReceived == Int64(body.count) && t.bytesDurable == Int64(body.count))
                    #expect(try sha256(ofFile: try #require(t.location)) == TestOrigin.sha256Hex(body), "\(when)")
                }
                #expect(try client.task(dropped.id).state == .canceled)
                #expect(try client.tasks(session: "fin", state: .completed).map(\.id) == done, "\(when)")
                #expect(try client.tasks(session: "fin").map(\.id) == done + [kept.id, dropped.id], "\(when)")
                let page = try client.taskPage(session: "fin", limit: 2)
                #expect(page.tasks.map(\.id) == Array(done.prefix(2)) && page.nextCursor == String(done[1]), "\(when)")
                // Finished is final: every change is refused as an illegal state change, naming the state.
                for attempt in [{ _ = try client.resume(done[0]) }, { _ = try client.cancel(done[1]) },
                                { _ = try client.suspend(dropped.id) }] as [() throws -> Void] {
                    do {
                        try attempt()
                        Issue.record("\(when): a finished task accepted a change")
                    } catch HalfTunesClientError.rpc(let e) {
                        #expect(e.code == RPCErrorCode.illegalStateChange.rawValue && e.message.contains(" it is "), "\(when): \(e)")
                    }
                }
            }
            try check("running")
            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            try check("after kill -9")
        }
    }

    /// A finished task's page entry is made once from its row and kept (Journal.taskPage): every kind and end is
    /// listed exactly as task.get shows it (the response body left out), page after page, by state, and after a
    /// kill -9 (when the kept text is gone and made again).
    @Test func aFinishedTaskIsListedAsTaskGetShowsIt() async throws {
        try await withDaemon { daemon, origin in
            var client = try daemon.client()
            let body = TestOrigin.randomBytes(count: 70_000, seed: 82)
            origin.put("/done.bin", body)
            origin.put("/api/blob", body)
            let file = try writeFile(body, named: "up.raw", in: daemon.dir.path)
            origin.acceptUploads("/up/up.raw")
            let download = try client.startDownload(origin.url("/done.bin"), session: "shown", destination: "done.bin")
            let missing = try client.startDownload(origin.url("/missing.bin"), session: "shown", destination: "missing.bin")
            let data = try client.createDataTask(session: "shown", url: origin.url("/api/blob"), start: true)
            let upload = try client.createUpload(session: "shown", url: origin.url("/up/up.raw"), file: file, start: true)
            let canceled = try client.createTask(TaskCreateParams(session: "shown", url: origin.url("/done.bin"),
                                                                  destination: "canceled.bin", description: "given up"))
            _ = try client.cancel(canceled.id)
            for id in [download.id, data.id, upload.id] { _ = try client.waitFor(task: id, state: .completed) }
            _ = try client.waitFor(task: missing.id, state: .failed)
            let ids = [download.id, missing.id, data.id, upload.id, canceled.id]

            func check(_ when: String) throws {
                var shown: [TaskInfo] = []
                for id in ids {
                    var t = try client.task(id)
                    t.response?.body = nil
                    shown.append(t)
                }
                #expect(try client.task(data.id).response?.body != nil, "\(when): task.get keeps the body")
                for round in 1...2 {
                    #expect(try client.tasks(session: "shown") == shown, "\(when), page \(round)")
                }
                #expect(try client.tasks(session: "shown", state: .failed) == shown.filter { $0.id == missing.id }, "\(when)")
                #expect(try client.tasks(session: "shown", state: .canceled).map(\.description) == ["given up"], "\(when)")
                #expect(try client.tasks(state: .completed).map(\.id) == [download.id, data.id, upload.id], "\(when)")
            }
            try check("running")
            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            try check("after kill -9")
        }
    }
}
