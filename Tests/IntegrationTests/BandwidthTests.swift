import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Bandwidth limits measured on real transfers (the one timing-based test; it takes about 9 s).
@Suite("Controls: bandwidth")
struct BandwidthTests {
    /// Bytes per second of `bytes()` over `seconds`, measured with a monotonic clock.
    func measure(over seconds: Double, _ bytes: () throws -> Int64) throws -> Double {
        let clock = ContinuousClock()
        let start = clock.now
        let first = try bytes()
        var elapsed = 0.0
        var last = first
        while elapsed < seconds {
            usleep(50_000)
            last = try bytes()
            let d = clock.now - start
            elapsed = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        }
        return Double(last - first) / elapsed
    }

    /// Global limit 2 MiB/s: the origin serves 2 MiB/s ±15% over 5 s. Then a per-task limit of 1 MiB/s
    /// (global lifted) is followed within a second, and removing both lets the same request finish.
    @Test func limitsHoldTheMeasuredRateAndChangeLive() async throws {
        try await withDaemon(["--bandwidth-limit", "2M"]) { daemon, origin in
            let size = 64 * MiB
            let body = TestOrigin.randomBytes(count: size, seed: 420)
            origin.put("/big", body)
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/big"))
            // Socket buffers fill in the first moments (served faster than the limit); measure the steady
            // state after them.
            try await origin.waitUntilBytesServed("/big", atLeast: Int64(4 * MiB))
            let global = try measure(over: 5) { origin.bytesServed("/big") }
            let limit = Double(2 * MiB)
            #expect(abs(global - limit) / limit < 0.15, "measured \(global) B/s against a limit of \(limit)")

            let set = try ctl(["set", String(t.id), "--limit-rate", "1M"], socket: daemon.socketPath)
            #expect(set.status == 0, "\(set.stderr)")
            _ = try client.setLimits(bandwidthLimit: 0)
            #expect(try client.task(t.id).bandwidthLimit == Int64(MiB))
            usleep(1_000_000) // the change applies within a second; measure after it
            let own = try measure(over: 2) { try client.task(t.id).bytesReceived }
            #expect(abs(own - Double(MiB)) / Double(MiB) < 0.2, "measured \(own) B/s against a task limit of 1 MiB/s")

            _ = try client.update(t.id, bandwidthLimit: 0)
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(done.bandwidthLimit == nil)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(origin.requests("/big").count == 1)
        }
    }
}
