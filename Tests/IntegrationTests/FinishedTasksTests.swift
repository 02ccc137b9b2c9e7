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
}
