// Published files carry where they came from: user.xdg.origin.url, user.xdg.referrer.url and the server's mtime.
import CLinuxFile
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Where a downloaded file came from")
struct FileOriginTests {
    static func xattr(_ path: String, _ name: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = htd_get_xattr(path, name, &buffer, buffer.count)
        return n < 0 ? nil : String(decoding: buffer[..<n], as: UTF8.self)
    }

    static func mtime(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_mtim.tv_sec) : -1
    }

    /// The request URL without its credentials, a `Referer` header without its fragment, and `Last-Modified` as
    /// the mtime; with `preserveModificationTime: false` the mtime is the download's own. Nothing is set on a
    /// file before it is complete.
    @Test func publishedFilesCarryTheirOriginAndTheServersMtime() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 100_000, seed: 601)
            origin.put("/o.bin", body, lastModified: "Tue, 15 Nov 1994 12:45:26 GMT")
            let client = try daemon.client()
            _ = try client.openSession("meta")
            let withCredentials = origin.url("/o.bin").replacingOccurrences(of: "http://", with: "http://user:secret@")
            let t = try client.createTask(TaskCreateParams(session: "meta", url: withCredentials, destination: "o.bin",
                                                           headers: ["Referer": "https://example.com/page?q=1#part"], start: true))
            let done = try client.waitFor(task: t.id, state: .completed)
            let file = try #require(done.location)
            #expect(try sha256(ofFile: file) == TestOrigin.sha256Hex(body))
            #expect(Self.xattr(file, "user.xdg.origin.url") == origin.url("/o.bin"))
            #expect(Self.xattr(file, "user.xdg.referrer.url") == "https://example.com/page?q=1")
            #expect(Self.mtime(file) == 784_903_526, "Tue, 15 Nov 1994 12:45:26 GMT")

            let opened = try ctl(["session", "open", "fresh", "--no-preserve-mtime"], socket: daemon.socketPath)
            #expect(opened.status == 0 && opened.stdout.contains("mtime:              the download's own"), "\(opened.stdout)\(opened.stderr)")
            let plain = try client.createTask(TaskCreateParams(session: "fresh", url: origin.url("/o.bin"), destination: "p.bin", start: true))
            let second = try #require(try client.waitFor(task: plain.id, state: .completed).location)
            #expect(Self.mtime(second) > 1_700_000_000, "the download's own time, not the server's")
            #expect(Self.xattr(second, "user.xdg.origin.url") == origin.url("/o.bin"))
            #expect(Self.xattr(second, "user.xdg.referrer.url") == nil)
        }
    }
}
