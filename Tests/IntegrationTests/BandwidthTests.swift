import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Bandwidth limits measured on real transfers (timing-based: about 20 s in all). Rates are measured on the
/// daemon's side (`bytesReceived`), so the socket buffers filled before the limit bites do not count: a window
/// starts after the first MiB, and its length is the monotonic time the daemon took to receive a fixed amount.
@Suite("Controls: bandwidth")
struct BandwidthTests {
    static let size = 32 * MiB
    static let tolerance = 0.15

    /// Bytes per second the task receives over about `window` seconds at `rate`: samples `bytesReceived`, waits
    /// (by condition) until it has grown by `window × rate`, and divides by the monotonic time between samples.
    static func measureRate(_ client: HalfTunesClient, _ id: Int64, expected rate: Double, window: Double) throws -> Double {
        let amount = Int64(window * rate)
        let first = try client.task(id).bytesReceived
        let start = ContinuousClock.now
        let last = try eventually("task \(id) to receive \(amount) bytes in \(2 * window) s (at half the rate)",
                                  timeout: 2 * window) {
            let info = try client.task(id)
            guard info.state == .running else { throw TestFailure("task \(id) is \(info.state.rawValue), not running") }
            return info.bytesReceived >= first + amount ? info.bytesReceived : nil
        }
        return Double(last - first) / seconds(since: start)
    }

    /// Waits until the task has received `amount` more bytes than it had when called.
    static func waitForMore(_ client: HalfTunesClient, _ id: Int64, _ amount: Int64) throws {
        let base = try client.task(id).bytesReceived
        try eventually("task \(id) to receive \(amount) more bytes", timeout: 30) {
            try client.task(id).bytesReceived >= base + amount ? true : nil
        }
    }

    static func expectRate(_ measured: Double, _ limit: Double, _ what: String,
                           sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(abs(measured - limit) / limit < tolerance,
                "\(what): measured \(Int(measured)) B/s against a limit of \(Int(limit)) B/s", sourceLocation: sourceLocation)
    }

    /// `halftunesctl download --limit-rate 1M` (no daemon-wide limit): 1 MiB/s ±15 % over 5 s.
    @Test func aTaskLimitHoldsItsRate() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: Self.size, seed: 420)
            origin.put("/own", body)
            let client = try daemon.client()
            #expect(try client.limits().bandwidthLimit == 0)
            let out = try ctl(["--json", "download", origin.url("/own"), "--limit-rate", "1M"], socket: daemon.socketPath)
            #expect(out.status == 0, "\(out.stderr)")
            let t = try WireCoding.decoder.decode(TaskInfo.self, from: Data(out.stdout.utf8))
            #expect(t.bandwidthLimit == Int64(MiB))
            try Self.waitForMore(client, t.id, Int64(MiB))
            let rate = try Self.measureRate(client, t.id, expected: Double(MiB), window: 5)
            Self.expectRate(rate, Double(MiB), "task limit 1 MiB/s")

            _ = try client.update(t.id, bandwidthLimit: 0)
            let done = try client.waitFor(task: t.id, state: .completed, timeout: 30)
            #expect(done.bandwidthLimit == nil)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            // Never restarted: one request from byte 0 (further ones, if any, are ranges of a split download).
            #expect(origin.requests("/own").filter { $0.range == nil }.count == 1)
            #expect(origin.requests("/own").dropFirst().allSatisfy { $0.status == 206 })
            #expect(done.attempts == 1)
        }
    }

    /// The daemon-wide limit alone: 2 MiB/s ±15 % over 5 s; `halftunesctl limits --bandwidth 1M` while the
    /// transfer runs: 1 MiB/s ±15 % over 5 s, in the same request.
    @Test func theGlobalLimitHoldsItsRateAndChangesLive() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: Self.size, seed: 421)
            origin.put("/global", body)
            let two = try ctl(["limits", "--bandwidth", "2M"], socket: daemon.socketPath)
            #expect(two.status == 0, "\(two.stderr)")
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/global"))
            #expect(t.bandwidthLimit == nil, "no task limit: only the global one applies")
            try Self.waitForMore(client, t.id, Int64(MiB))
            let first = try Self.measureRate(client, t.id, expected: Double(2 * MiB), window: 5)
            Self.expectRate(first, Double(2 * MiB), "global limit 2 MiB/s")

            let one = try ctl(["limits", "--bandwidth", "1M"], socket: daemon.socketPath)
            #expect(one.status == 0, "\(one.stderr)")
            #expect(try client.limits().bandwidthLimit == Int64(MiB))
            // A new limit applies within a quarter of a second: 512 KiB take at least that long at either rate.
            try Self.waitForMore(client, t.id, 512 * 1024)
            let second = try Self.measureRate(client, t.id, expected: Double(MiB), window: 5)
            Self.expectRate(second, Double(MiB), "global limit lowered to 1 MiB/s")

            _ = try client.setLimits(bandwidthLimit: 0)
            let done = try client.waitFor(task: t.id, state: .completed, timeout: 30)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(origin.requests("/global").filter { $0.range == nil }.count == 1, "the transfer was never restarted")
            #expect(origin.requests("/global").dropFirst().allSatisfy { $0.status == 206 })
            #expect(done.attempts == 1)
        }
    }
}
