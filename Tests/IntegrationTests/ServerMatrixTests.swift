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

    /// A download of `url` in `session` paused once `durable` bytes of the first version are kept, the file replaced
    /// meanwhile by a second of the same length (`serve(v2)`; `serve(v1)` served the first), and resumed: the
    /// published file is the second version, whole, never a mix. The first version comes at 1 MiB/s (the task's
    /// own limit, lifted before the resume), so the pause lands seconds before it could have finished, however
    /// fast the server and however busy the machine.
    static func expectReplacedWhilePausedIsWhole(_ client: HalfTunesClient, _ url: String, session: String = "test.session",
                                                 size: Int, seed: UInt64, durable: Int64 = Int64(MiB),
                                                 serve: (_ body: [UInt8], _ first: Bool) throws -> Void) throws {
        let v1 = TestOrigin.randomBytes(count: size, seed: seed)
        let v2 = TestOrigin.randomBytes(count: size, seed: seed + 1)
        try serve(v1, true)
        _ = try client.openSession(session)
        let c = try client.createTask(TaskCreateParams(session: session, url: url, start: true, bandwidthLimit: Int64(MiB)))
        try eventually("\(durable) bytes of the first version of \(url)") {
            try client.task(c.id).bytesDurable >= durable ? true : nil
        }
        _ = try client.suspend(c.id)
        try client.update(c.id, bandwidthLimit: 0)
        try serve(v2, false)
        _ = try client.resume(c.id)
        let changed = try client.waitFor(task: c.id, state: .completed)
        #expect(try sha256(ofFile: changed.location!) == TestOrigin.sha256Hex(v2), "\(url): the new version, whole")
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
            try Self.expectReplacedWhilePausedIsWhole(client, server.url() + "/changing.bin", size: 12 * MiB, seed: 2921,
                                                      durable: Int64(2 * MiB)) { body, first in
                Self.put(body, "/changing.bin", in: home.path, age: first ? 7200 : 60)
            }
        }
    }

    /// caddy over https with a test CA, HTTP/2 through ALPN: a download split over streams of one connection (the
    /// test origin behind caddy paces it), kill -9 and the restart's `Range` + `If-Range` passed on and answered 206,
    /// the file whole; a file replaced while paused: the new version, whole; from caddy's own `file_server`,
    /// `maxConnections: 1` makes one request.
    @Test func caddyHTTP2OverTLS() async throws {
        let certificates = try TempDir()
        defer { certificates.remove() }
        let ca = try TestCA(in: certificates.path)
        let home = try TempDir()
        defer { home.remove() }
        _ = chmod(home.path, 0o755)
        try FileManager.default.createDirectory(atPath: home.path + "/files", withIntermediateDirectories: true)
        let small = TestOrigin.randomBytes(count: 6 * MiB, seed: 2936)
        Self.put(small, "/files/small.bin", in: home.path)
        try await withDaemon(["--ca-file", ca.caCertificate]) { daemon, origin in
            let caddy = try ProxyProcess.caddy(home: home.path, tls: ca.server, upstream: origin.port)
            defer { caddy.stop() }
            let body = TestOrigin.randomBytes(count: 16 * MiB, seed: 2937)
            origin.put("/big.bin", body)
            origin.setBehavior("/big.bin", .throttled(2 * MiB))
            var client = try daemon.client()
            let t = try client.startDownload(caddy.url() + "/big.bin", destination: "big.bin")
            try SegmentedTests.waitUntilSplit(client, t.id, durable: Int64(1 * MiB))
            let firstRun = try eventually("caddy's log of the split") { () -> [(proto: String, port: String, status: Int, range: String?)]? in
                let logged = caddy.caddyRequests("/big.bin")
                return logged.count > 1 ? logged : nil
            }.count
            daemon.kill9()
            let before = origin.requests("/big.bin").count
            origin.setBehavior("/big.bin", TestOrigin.Behavior())
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let after = Array(origin.requests("/big.bin").dropFirst(before))
            #expect(!after.isEmpty && after.allSatisfy { $0.range != nil && $0.ifRange != nil && $0.status == 206 },
                    "\(after.map { ($0.range, $0.ifRange, $0.status) })")
            let logged = try eventually("caddy's log of every request") { () -> [(proto: String, port: String, status: Int, range: String?)]? in
                let logged = caddy.caddyRequests("/big.bin")
                return logged.count >= origin.requests("/big.bin").count ? logged : nil
            }
            #expect(logged.allSatisfy { $0.proto == "HTTP/2.0" }, "\(caddy.log())")
            // Requests are logged as they end, so the first run's are not necessarily first; but each run used one
            // connection for all its requests: two client ports in all, for more requests than that.
            #expect(firstRun >= 2 && Set(logged.map(\.port)).count == 2 && logged.count > 2, "\(logged)")

            // Replaced behind caddy while paused.
            try Self.expectReplacedWhilePausedIsWhole(client, caddy.url() + "/changing.bin", size: 8 * MiB, seed: 2947) { body, first in
                if first {
                    origin.put("/changing.bin", body)
                    origin.setBehavior("/changing.bin", .throttled(2 * MiB))
                } else {
                    origin.change("/changing.bin", to: body)
                    origin.setBehavior("/changing.bin", TestOrigin.Behavior())
                }
            }

            let one = try client.startDownload(caddy.url() + "/files/small.bin", destination: "small.bin", maxConnections: 1)
            let oneDone = try client.waitFor(task: one.id, state: .completed)
            #expect(try sha256(ofFile: oneDone.location!) == TestOrigin.sha256Hex(small))
            let served = try eventually("caddy's log of small.bin") { () -> [(proto: String, port: String, status: Int, range: String?)]? in
                let logged = caddy.caddyRequests("/files/small.bin")
                return logged.isEmpty ? nil : logged
            }
            #expect(served.count == 1 && served[0].status == 200 && served[0].proto == "HTTP/2.0", "\(served)")
        }
    }

    /// BusyBox httpd, behind a relay that paces each connection (BusyBox paces nothing itself): the download is
    /// split; kill -9, and the restart's `Range` + `If-Range` requests are answered 206 of the same file; the file
    /// is whole. A file replaced while paused: BusyBox answers the resume's `If-Range` with a 206 of the new version
    /// (it ignores `If-Range`), the daemon sees the other validators and starts over: the new version, whole.
    @Test func busyboxSplitKillNineResumeAndAReplacedFile() async throws {
        let home = try TempDir()
        defer { home.remove() }
        _ = chmod(home.path, 0o755)
        let body = TestOrigin.randomBytes(count: 24 * MiB, seed: 2938)
        Self.put(body, "/big.bin", in: home.path)
        let httpd = try ProxyProcess.busyboxHTTPD(home: home.path)
        defer { httpd.stop() }
        let relay = try ProxyProcess.pacingRelay(to: httpd.port, bytesPerSecond: 4 * MiB)
        defer { relay.stop() }
        try await withDaemon { daemon, _ in
            var client = try daemon.client()
            let t = try client.startDownload(relay.url() + "/big.bin", destination: "big.bin")
            try SegmentedTests.waitUntilSplit(client, t.id, durable: Int64(4 * MiB))
            daemon.kill9()
            let before = httpd.busyboxResponses("/big.bin").count
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let statuses = try eventually("BusyBox's log of the resume") { () -> [Int]? in
                let statuses = httpd.busyboxResponses("/big.bin")
                return statuses.count > before ? statuses : nil
            }
            #expect(before >= 2 && statuses.filter { $0 == 200 }.count == 1 && statuses.filter { $0 == 206 }.count == statuses.count - 1,
                    "one whole response, every other a range: \(statuses)")

            try Self.expectReplacedWhilePausedIsWhole(client, relay.url() + "/changing.bin", size: 8 * MiB, seed: 2951) { body, first in
                Self.put(body, "/changing.bin", in: home.path, age: first ? 7200 : 60)
            }
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
