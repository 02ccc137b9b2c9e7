// Content codings through the real binaries and a real nginx: downloads ask for identity, data tasks decode.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Content encodings", .serialized)
struct ContentEncodingTests {
    /// nginx with `gzip on` for every type: a data task asks for `gzip, deflate` and hands over the decoded
    /// body (its headers as sent, `Content-Encoding: gzip` included); a download of the same file asks for
    /// `identity` (a Range of an encoding made on the fly would mean nothing) and saves the file's own bytes.
    @Test func dataTasksDecodeAndDownloadsAskForIdentity() async throws {
        let home = try TempDir()
        defer { home.remove() }
        let text = Array(String(repeating: "halftunesd asks nginx for gzip in data tasks only.\n", count: 40_000).utf8)
        _ = FileManager.default.createFile(atPath: home.path + "/doc.txt", contents: Data(text))
        let nginx = try ProxyProcess.nginx(home: home.path, server: "gzip on; gzip_types *; gzip_min_length 0;")
        defer { nginx.stop() }
        try await withDaemon { daemon, _ in
            let client = try daemon.client()
            let opened = try client.openSession("coded")
            let events = try EventRecorder(client: client, session: "coded", after: opened.session.lastEventSeq)
            let url = nginx.url() + "/doc.txt"
            let data = try client.createDataTask(session: "coded", url: url, start: true)
            let completion = try events.wait(for: "didComplete") { $0.task == data.id && $0.isDidComplete }
            #expect(completion.completionError == .some(nil))
            let response = try #require(completion.completionResponse)
            #expect(response.status == 200)
            #expect(response.header("Content-Encoding") == "gzip", "nginx compressed it: \(response.headers)")
            #expect(response.bodyBytesDecoded == text, "the body handed over is the decoded one")
            #expect(response.bodyBytes == Int64(text.count))
            let sent = nginx.log().split(separator: "\n").first { $0.hasPrefix("GET /doc.txt 200") }
            #expect(sent?.contains("accept-encoding=gzip, deflate") == true, "\(nginx.log())")
            let compressed = sent.flatMap { line in
                line.range(of: " sent=").flatMap { Int(line[$0.upperBound...].prefix { $0 != " " }) }
            } ?? .max
            #expect(compressed < text.count / 10, "nginx sent \(compressed) coded bytes for \(text.count)")

            let download = try client.startDownload(url, session: "coded")
            let done = try client.waitFor(task: download.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(text))
            let lines = nginx.log().split(separator: "\n").filter { $0.hasPrefix("GET /doc.txt") }
            #expect(lines.count >= 2 && lines.dropFirst().allSatisfy { $0.contains("accept-encoding=identity") }, "\(lines)")

            // A HEAD's answer says gzip but has no body: nothing to decode, no error.
            let head = try client.createTask(TaskCreateParams(session: "coded", url: url, start: true, kind: .data,
                                                              method: "HEAD"))
            let headDone = try events.wait(for: "HEAD's didComplete") { $0.task == head.id && $0.isDidComplete }
            #expect(headDone.completionError == .some(nil), "\(String(describing: headDone.completionError))")
            #expect(headDone.completionResponse?.status == 200)
        }
    }

    /// A body that says `Content-Encoding: gzip` but is not gzip data fails the data task with
    /// `invalidResponse`, in words that say so.
    @Test func aBodyThatIsNotItsCodingFailsTheDataTask() async throws {
        let home = try TempDir()
        defer { home.remove() }
        _ = FileManager.default.createFile(atPath: home.path + "/fake.txt", contents: Data("plain text, not gzip".utf8))
        let nginx = try ProxyProcess.nginx(home: home.path, server: "location = /fake.txt { add_header Content-Encoding gzip; }")
        defer { nginx.stop() }
        try await withDaemon { daemon, _ in
            let client = try daemon.client()
            let opened = try client.openSession("bad")
            let events = try EventRecorder(client: client, session: "bad", after: opened.session.lastEventSeq)
            let t = try client.createDataTask(session: "bad", url: nginx.url() + "/fake.txt", start: true)
            let completion = try events.wait(for: "didComplete") { $0.task == t.id && $0.isDidComplete }
            let error = try #require(completion.completionError ?? nil)
            #expect(error.code == TaskErrorCode.invalidResponse)
            #expect(error.message.contains("Content-Encoding: gzip"), "\(error.message)")
        }
    }
}
