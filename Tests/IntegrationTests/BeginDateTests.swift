// earliestBeginDate through the real binaries: no request before the date, even across a restart.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Begin dates", .serialized)
struct BeginDateIntegrationTests {
    /// `halftunesctl download --at`: the task is queued and held by its date (not in the queue), survives a
    /// restart of the daemon before it, and the origin sees no request before the date.
    @Test func aTaskDoesNotBeginBeforeItsDateEvenAcrossARestart() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 256 * 1024, seed: 80)
            origin.put("/later.bin", body)
            let begin = Timestamp.format(Timestamp.now() + 4)
            let out = try ctl(["--json", "download", origin.url("/later.bin"), "--at", begin], socket: daemon.socketPath)
            #expect(out.status == 0, "\(out.stderr)")
            let t = try WireCoding.decoder.decode(TaskInfo.self, from: Data(out.stdout.utf8))
            #expect(t.state == .queued && t.hold?.reason == "earliestBeginDate" && t.queuePosition == nil)
            #expect(t.earliestBeginDate == begin)
            let shown = try ctl(["show", String(t.id)], socket: daemon.socketPath)
            #expect(shown.stdout.contains("not before \(begin)"), "\(shown.stdout)")

            let (status, _) = try daemon.terminate()
            #expect(status == 0)
            try daemon.restart()
            let client = try daemon.client()
            let restored = try client.task(t.id)
            #expect(restored.state == .queued && restored.hold?.reason == "earliestBeginDate")
            #expect(origin.requests("/later.bin").isEmpty)

            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let first = try #require(origin.requests("/later.bin").first)
            #expect(first.arrivedAt >= Timestamp.parse(begin)!, "requested \(first.arrivedAt), begin \(begin)")
        }
    }

    /// `--at +2s` is two seconds from now; a date that is not RFC 3339 is refused by the CLI and by the daemon;
    /// a date in the past begins at once.
    @Test func relativeBadAndPastDates() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/soon.bin", TestOrigin.randomBytes(count: 1024, seed: 81))
            let before = Timestamp.now()
            let soon = try ctl(["--json", "download", origin.url("/soon.bin"), "--at", "+2s", "--wait"], socket: daemon.socketPath)
            #expect(soon.status == 0, "\(soon.stderr)")
            let first = try #require(origin.requests("/soon.bin").first)
            #expect(first.arrivedAt >= before + 2, "requested \(first.arrivedAt - before) s after the call")

            let bad = try ctl(["download", origin.url("/soon.bin"), "--at", "tomorrow"], socket: daemon.socketPath)
            #expect(bad.status != 0 && bad.stderr.contains("--at"), "\(bad.stderr)")
            let client = try daemon.client()
            _ = try client.openSession("dates")
            #expect(rpcCode { _ = try client.createTask(TaskCreateParams(session: "dates", url: origin.url("/soon.bin"),
                                                                        earliestBeginDate: "2025-02-30T00:00:00Z")) }
                == .invalidParams)
            let past = try client.createTask(TaskCreateParams(session: "dates", url: origin.url("/soon.bin"),
                                                              destination: "past.bin", start: true,
                                                              earliestBeginDate: "2020-01-01T00:00:00Z"))
            let done = try client.waitFor(task: past.id, state: .completed)
            #expect(done.earliestBeginDate == "2020-01-01T00:00:00.000Z")
        }
    }
}
