// The servers people download from, started from Debian on loopback: what the daemon does against each.
import Foundation
import HalfTunesJournal
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Real origins", .serialized)
struct ServerMatrixTests {
    /// A Debian web server serving `home`, every response paced to 4 MiB/s per connection (so a download is
    /// split, and can be interrupted), with an access log of status and `Range` per request.
    enum Origin: String, CaseIterable, Sendable {
        case nginx, apache2, lighttpd

        func start(home: String) throws -> ProxyProcess {
            switch self {
            case .nginx: try ProxyProcess.nginx(home: home, server: "limit_rate 4m;")
            case .apache2: try ProxyProcess.apache(home: home, modules: ["ratelimit", "env"],
                                                   directives: "SetOutputFilter RATE_LIMIT\nSetEnv rate-limit 4096")
            case .lighttpd: try ProxyProcess.lighttpd(home: home, directives: "connection.kbytes-per-second = 4096")
            }
        }
    }

    /// Writes `body` at `path` in `home`, readable by the server's user, dated `age` seconds ago (apache2 makes
    /// the validators of a file younger than a second weak).
    static func put(_ body: [UInt8], _ path: String, in home: String, age: Double = 3600) {
        _ = FileManager.default.createFile(atPath: home + path, contents: Data(body), attributes: [
            .posixPermissions: 0o644, .modificationDate: Date().addingTimeInterval(-age),
        ])
    }

    /// With default settings: the download is split; kill -9 mid-transfer, and the restart asks for every missing
    /// range with `Range` + `If-Range`, answered 206; the file is whole. Then the file is replaced (same length,
    /// other content and date) while a download is paused: the resume gets the new version and starts over, and
    /// the published file is the new one, never a mix.
    @Test(arguments: Origin.allCases)
    func splitKillNineResumeAndAReplacedFile(origin: Origin) async throws {
        let home = try TempDir()
        _ = chmod(home.path, 0o755)
        let body = TestOrigin.randomBytes(count: 24 * MiB, seed: 2920)
        Self.put(body, "/big.bin", in: home.path)
        let server = try origin.start(home: home.path)
        defer { server.stop() }
        try await withDaemon { daemon, _ in
            var client = try daemon.client()
            let t = try client.startDownload(server.url() + "/big.bin", destination: "big.bin")
            try SegmentedTests.waitUntilSplit(client, t.id, durable: Int64(4 * MiB))
            daemon.kill9()
            let before = server.requests("/big.bin").count
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body), "\(origin)")
            // Access logs list requests as they end, so not in order: what counts is that one request only was
            // answered with the whole file (the first), and every other asked for a range and got a 206 of the same
            // version (a failed If-Range after the restart would have been a second 200).
            // Access logs list requests as they end, so not in order (and lighttpd writes its log a few seconds
            // late): what counts is that one request only was answered with the whole file (the first), and every
            // other asked for a range and got a 206 of the same version (a failed If-Range after the restart would
            // have been a second 200).
            let all = try eventually("\(origin)'s log of the requests after the restart", timeout: 30) {
                () -> [(status: Int, range: String?)]? in
                let all = server.requests("/big.bin")
                return all.count > before && all.filter({ $0.range != nil }).count > 1 ? all : nil
            }
            #expect(all.filter { $0.status == 200 }.count == 1 && all.filter { $0.range == nil }.count == 1,
                    "\(origin): \(server.log())")
            #expect(all.filter { $0.range != nil }.allSatisfy { $0.status == 206 }, "\(origin): \(server.log())")
            let v1 = TestOrigin.randomBytes(count: 12 * MiB, seed: 2921)
            let v2 = TestOrigin.randomBytes(count: 12 * MiB, seed: 2922)
            Self.put(v1, "/changing.bin", in: home.path, age: 7200)
            let c = try client.startDownload(server.url() + "/changing.bin", destination: "changing.bin")
            try eventually("\(origin): 2 MiB of the first version") {
                try client.task(c.id).bytesDurable >= Int64(2 * MiB) ? true : nil
            }
            _ = try client.suspend(c.id)
            Self.put(v2, "/changing.bin", in: home.path, age: 60)
            _ = try client.resume(c.id)
            let changed = try client.waitFor(task: c.id, state: .completed)
            #expect(try sha256(ofFile: changed.location!) == TestOrigin.sha256Hex(v2), "\(origin): the new version, whole")
        }
    }

    /// Python's `http.server` knows no `Range`: the download is never split and completes whole.
    @Test func pythonHTTPServerWithoutRanges() async throws {
        let home = try TempDir()
        _ = chmod(home.path, 0o755)
        let body = TestOrigin.randomBytes(count: 6 * MiB, seed: 2923)
        Self.put(body, "/plain.bin", in: home.path)
        let server = try ProxyProcess.pythonHTTPServer(home: home.path)
        defer { server.stop() }
        try await withDaemon { daemon, _ in
            let client = try daemon.client()
            let t = try client.startDownload(server.url() + "/plain.bin", destination: "plain.bin")
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(done.attempts == 1)
        }
    }
}
