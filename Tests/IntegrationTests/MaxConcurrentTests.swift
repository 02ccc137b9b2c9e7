// Raising the daemon-wide maxConcurrent at runtime with `halftunesctl limits` starts held tasks at once.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Controls: max concurrent")
struct MaxConcurrentTests {
    /// max-concurrent 1 with three started tasks: one runs, two are queued (hold `maxConcurrent`, positions 1
    /// and 2). `halftunesctl limits --max-concurrent 3` starts both without restarting the first: it keeps its
    /// one attempt and its one request at the origin. Each body is throttled and stalls until the test
    /// releases it, so every transfer is provably in progress when the limit changes.
    @Test func raisingMaxConcurrentStartsHeldTasksWithoutRestartingTheRunningOne() async throws {
        try await withDaemon { daemon, origin in
            var slow = TestOrigin.Behavior.throttled(400_000)
            slow.stallAfterBytes = 64 * 1024
            slow.stallTimes = 1
            var bodies: [[UInt8]] = []
            for i in 0..<3 {
                let body = TestOrigin.randomBytes(count: 256 * 1024 + i, seed: 750 + UInt64(i))
                bodies.append(body)
                origin.put("/m\(i).bin", body)
                origin.setBehavior("/m\(i).bin", slow)
            }
            let one = try ctl(["limits", "--max-concurrent", "1"], socket: daemon.socketPath)
            #expect(one.status == 0, "\(one.stderr)")
            let client = try daemon.client()
            #expect(try client.limits().maxConcurrent == 1)
            _ = try client.openSession("mc")
            let first = try client.startTask(origin.url("/m0.bin"), session: "mc")
            try await origin.waitUntilBytesServed("/m0.bin", atLeast: 64 * 1024)
            let held = try (1...2).map { try client.startTask(origin.url("/m\($0).bin"), session: "mc") }

            #expect(try client.task(first.id).state == .running)
            for (position, t) in zip(1..., held) {
                let info = try client.task(t.id)
                #expect(info.state == .queued)
                #expect(info.hold?.reason == "maxConcurrent", "\(String(describing: info.hold))")
                #expect(info.queuePosition == position)
                #expect(origin.requests("/m\(position).bin").isEmpty)
            }

            let three = try ctl(["limits", "--max-concurrent", "3"], socket: daemon.socketPath)
            #expect(three.status == 0, "\(three.stderr)")
            for t in held { try client.waitFor(task: t.id, state: .running, timeout: 10) }
            for i in 1...2 { try await origin.waitUntilBytesServed("/m\(i).bin", atLeast: 64 * 1024, timeout: .seconds(10)) }
            let running = try client.tasks(state: .running).map(\.id).sorted()
            #expect(running == ([first] + held).map(\.id).sorted())
            #expect(try client.task(first.id).attempts == 1)
            #expect(origin.requests("/m0.bin").count == 1)

            for i in 0..<3 { origin.releaseStall("/m\(i).bin") }
            for (i, t) in ([first] + held).enumerated() {
                let done = try client.waitFor(task: t.id, state: .completed, timeout: 30)
                #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(bodies[i]))
                #expect(done.attempts == 1)
                #expect(origin.requests("/m\(i).bin").count == 1)
            }
        }
    }
}
