// IPv6 through the real binaries: a server on [::1] only, and a name that resolves to both families.
import Foundation
import HalfTunesJournal
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("IPv6", .serialized)
struct IPv6Tests {
    /// A server listening on [::1] only: a throttled download is split over several connections, kill -9
    /// mid-transfer resumes every range with `Range` + `If-Range`, pause/resume continues, and the file is whole.
    @Test func aServerOnIPv6LoopbackOnly() async throws {
        let origin = try await TestOrigin.start(host: "::1")
        let daemon = try DaemonProcess(start: false)
        try await running(daemon, origin) {
            try daemon.start()
            let body = TestOrigin.randomBytes(count: 24 * MiB, seed: 2901)
            origin.put("/v6.bin", body)
            origin.setBehavior("/v6.bin", .throttled(2 * MiB))
            #expect(origin.url("/v6.bin").hasPrefix("http://[::1]:"))
            var client = try daemon.client()
            let t = try client.startDownload(origin.url("/v6.bin"))
            try SegmentedTests.waitUntilSplit(client, t.id, durable: Int64(4 * MiB))
            daemon.kill9()
            let before = origin.requests("/v6.bin").count
            try daemon.restart()
            client = try daemon.client()
            try eventually("more received after the restart") {
                try client.task(t.id).bytesDurable > Int64(6 * MiB) ? true : nil
            }
            let paused = try client.suspend(t.id)
            #expect(paused.state == .suspended && paused.bytesReceived == paused.bytesDurable)
            origin.setBehavior("/v6.bin", TestOrigin.Behavior())
            _ = try client.resume(t.id)
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let etag = origin.requests("/v6.bin").first?.etag
            let resumed = origin.requests("/v6.bin").dropFirst(before)
            #expect(!resumed.isEmpty && resumed.allSatisfy { $0.status == 206 && $0.ifRange == etag },
                    "\(resumed.map(\.range))")
        }
    }

    /// A host name that resolves to both ::1 and 127.0.0.1 (the daemon's own /etc/hosts, in a mount namespace
    /// of its own) reaches a server listening on either family alone: the client tries both (Happy Eyeballs).
    @Test(.enabled(if: IPv6Tests.canBindHosts, "needs unshare --mount and bind mounts (root)"))
    func aNameOfBothFamiliesReachesAServerOnEither() async throws {
        let v6 = try await TestOrigin.start(host: "::1")
        let v4 = try await TestOrigin.start()
        let hosts = try TempDir()
        defer { hosts.remove() }
        let hostsFile = hosts.path + "/hosts"
        try "127.0.0.1 localhost\n::1 dual.test\n127.0.0.1 dual.test\n".write(toFile: hostsFile, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(start: false)
        daemon.launcher = ["/usr/bin/unshare", "--mount", "/bin/sh", "-c",
                           "mount --bind \"$0\" /etc/hosts && exec \"$@\"", hostsFile]
        try await running(daemon, v6) {
            try daemon.start()
            let client = try daemon.client()
            for (origin, seed) in [(v6, 2902), (v4, 2903)] {
                let body = TestOrigin.randomBytes(count: 3 * MiB, seed: UInt64(seed))
                origin.put("/dual.bin", body)
                let t = try client.startDownload(origin.url("/dual.bin", hostName: "dual.test"),
                                                 destination: daemon.downloadsDir + "/dual-\(seed).bin")
                let done = try client.waitFor(task: t.id, state: .completed)
                #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
                #expect(origin.requests("/dual.bin").count >= 1)
            }
        }
        try await v4.shutdown()
    }

    /// Whether this process may bind-mount a file over /etc/hosts in a private mount namespace.
    static let canBindHosts: Bool = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"), let dir = try? TempDir() else { return false }
        defer { dir.remove() }
        _ = FileManager.default.createFile(atPath: dir.path + "/hosts", contents: Data("::1 probe.test\n".utf8))
        let status = try? runTool("/usr/bin/unshare", ["--mount", "/bin/sh", "-c",
                                                       "mount --bind \"$0\" /etc/hosts && grep -q probe.test /etc/hosts",
                                                       dir.path + "/hosts"])
        return status == 0
    }()
}
