// The name of a download the client named no file for: Content-Disposition, else the URL after redirects, else
// the request URL — settled by the first response, de-duplicated, reported with didChangeDestination.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("The server's file name", .serialized)
struct ServerFilenameTests {
    static func disposition(_ value: String) -> TestOrigin.Behavior {
        var b = TestOrigin.Behavior()
        b.extraHeaders = [("Content-Disposition", value)]
        return b
    }

    /// Each source of the name, with an existing file and a name another task holds de-duplicated; an explicit
    /// destination is never renamed; the name survives kill -9 once settled.
    @Test func eachSourceOfTheName() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 50_000, seed: 701)
            origin.put("/download", body)
            origin.setBehavior("/download", Self.disposition(#"attachment; filename="report-2026.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf"#))
            origin.put("/files/real-name.iso", body)
            origin.setBehavior("/go", { var b = TestOrigin.Behavior(); b.redirectTo = "/files/real-name.iso"; return b }())
            origin.put("/plain.bin", body)
            origin.put("/evil", body)
            origin.setBehavior("/evil", Self.disposition(#"attachment; filename="../../etc/passwd""#))
            let client = try daemon.client()
            let events = try client.openHostileSession("names")
            // A file already there: the header's name gets " (1)".
            try Data("old".utf8).write(to: URL(fileURLWithPath: daemon.downloadsDir + "/résumé.pdf"))

            func download(_ path: String, destination: String? = nil) throws -> TaskInfo {
                let t = try client.createTask(TaskCreateParams(session: "names", url: origin.url(path), destination: destination, start: true))
                let done = try client.waitFor(task: t.id, state: .completed)
                #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
                return done
            }
            let fromHeader = try download("/download")
            #expect(fromHeader.location == daemon.downloadsDir + "/résumé (1).pdf", "\(fromHeader.location ?? "")")
            #expect(fromHeader.suggestedFilename == "résumé.pdf" && fromHeader.destination == fromHeader.location)
            try events.waitForDidComplete(fromHeader.id)
            let changed = events.all.compactMap { e -> String? in
                guard e.task == fromHeader.id, case .didChangeDestination(let d, _) = e.payload else { return nil }
                return d
            }
            #expect(changed == [daemon.downloadsDir + "/résumé (1).pdf"])

            let redirected = try download("/go")
            #expect(redirected.location == daemon.downloadsDir + "/real-name.iso" && redirected.suggestedFilename == "real-name.iso")
            let plain = try download("/plain.bin")
            #expect(plain.location == daemon.downloadsDir + "/plain.bin" && plain.suggestedFilename == "plain.bin")
            try events.waitForDidComplete(plain.id)
            #expect(!events.all.contains { $0.task == plain.id && { if case .didChangeDestination = $0.payload { true } else { false } }($0) },
                    "no rename, no event")
            let evil = try download("/evil")
            #expect(evil.location == daemon.downloadsDir + "/_.._etc_passwd", "\(evil.location ?? "")")
            let named = try download("/download", destination: "mine.pdf")
            #expect(named.location == daemon.downloadsDir + "/mine.pdf" && named.suggestedFilename == nil,
                    "an explicit destination is never renamed")

            // Two tasks the same header names at once: the second gets " (1)" while the first holds the name.
            origin.put("/twice", body)
            origin.setBehavior("/twice", { var b = Self.disposition(#"attachment; filename=same.bin"#); b.bytesPerSecond = 100_000; return b }())
            let first = try client.createTask(TaskCreateParams(session: "names", url: origin.url("/twice"), start: true))
            try eventually("the first to be named") { try client.task(first.id).suggestedFilename != nil ? true : nil }
            let second = try client.createTask(TaskCreateParams(session: "names", url: origin.url("/twice"), start: true))
            try eventually("the second to be named") { try client.task(second.id).suggestedFilename != nil ? true : nil }
            daemon.kill9()
            origin.setBehavior("/twice", Self.disposition(#"attachment; filename="other.bin""#))
            try daemon.restart()
            let restarted = try daemon.client()
            let a = try restarted.waitFor(task: first.id, state: .completed)
            let b = try restarted.waitFor(task: second.id, state: .completed)
            #expect(a.location == daemon.downloadsDir + "/same.bin", "settled before the crash: \(a.location ?? "")")
            #expect(b.location == daemon.downloadsDir + "/same (1).bin", "\(b.location ?? "")")
        }
    }

    /// A server's name never replaces a file: `overwrite` needs an explicit destination (refused without one),
    /// so the existing thesis.pdf stays and the download gets "thesis (1).pdf". A name from the URL loses its
    /// bidirectional override.
    @Test func aServersNameNeverReplacesAFile() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 30_000, seed: 702)
            origin.put("/get", body)
            origin.setBehavior("/get", Self.disposition(#"attachment; filename="thesis.pdf""#))
            let thesis = daemon.downloadsDir + "/thesis.pdf"
            let mine = Data("my thesis, four years of work\n".utf8)
            #expect(FileManager.default.createFile(atPath: thesis, contents: mine))
            let refused = try ctl(["download", origin.url("/get"), "--overwrite"], socket: daemon.socketPath)
            #expect(refused.status == 2 && refused.stderr.contains("overwrite needs an explicit destination"), "\(refused)")
            let client = try daemon.client()
            _ = try client.openSession("test.session")
            #expect(throws: (any Error).self) {
                try client.createTask(TaskCreateParams(session: "test.session", url: origin.url("/get"), start: true, overwrite: true))
            }
            let done = try ctl(["download", origin.url("/get"), "--wait"], socket: daemon.socketPath)
            #expect(done.status == 0, "\(done)")
            #expect(FileManager.default.contents(atPath: thesis) == mine)
            #expect(try sha256(ofFile: daemon.downloadsDir + "/thesis (1).pdf") == TestOrigin.sha256Hex(body))

            origin.put("/invoice%E2%80%AEfdp.exe", body) // the origin matches the request target as sent
            let task = try client.createTask(TaskCreateParams(
                session: "test.session", url: origin.url("/invoice%E2%80%AEfdp.exe"), start: true))
            let named = try client.waitFor(task: task.id, state: .completed)
            #expect(named.location == daemon.downloadsDir + "/invoicefdp.exe", "\(named.location ?? "")")
        }
    }

    /// A plain `filename=` in ISO-8859-1 (tc2231 `attwithisofnplain`): the byte 0xE4 is "ä", not U+FFFD. Over
    /// plain http, over https, and forwarded by an HTTP proxy (tinyproxy passes the head's bytes on as they came).
    @Test func aLatin1NameIsReadAsLatin1() async throws {
        let proxy = try ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        try await withSecureOrigin { ca, secure in
            try await withDaemon(["--ca-file", ca.caCertificate]) { daemon, origin in
                let body = TestOrigin.randomBytes(count: 40_000, seed: 703)
                for (server, path, name) in [(origin, "/iso", "foo-\u{E4}.html"), (secure, "/iso", "foo-\u{E4}.html"),
                                             (origin, "/proxied", "caf\u{E9} cr\u{E8}me.txt")] {
                    server.put(path, body)
                    var b = Self.disposition("attachment; filename=\"\(name)\"")
                    b.headInLatin1 = true
                    server.setBehavior(path, b)
                }
                let client = try daemon.client()
                _ = try client.openSession("names")
                _ = try client.openSession("proxied", configuration: SessionConfiguration(proxy: proxy.url()))
                func download(_ url: String, session: String) throws -> TaskInfo {
                    let t = try client.createTask(TaskCreateParams(session: session, url: url, start: true))
                    let done = try client.waitFor(task: t.id, state: .completed)
                    #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
                    return done
                }
                let plain = try download(origin.url("/iso"), session: "names")
                #expect(plain.location == daemon.downloadsDir + "/foo-ä.html" && plain.suggestedFilename == "foo-ä.html",
                        "\(plain.location ?? "")")
                let tls = try download(secure.url("/iso"), session: "names")
                #expect(tls.location == daemon.downloadsDir + "/foo-ä (1).html", "\(tls.location ?? "")")
                let forwarded = try download(origin.url("/proxied"), session: "proxied")
                #expect(forwarded.location == daemon.downloadsDir + "/café crème.txt", "\(forwarded.location ?? "")")
                #expect(proxy.forwarded() == ["GET \(origin.url("/proxied"))"], "\(proxy.log())")
            }
        }
    }
}
