// Half Tunes (Examples/HalfTunes) through its CLI against the real daemon and an iTunes-shaped test origin.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Half Tunes, the tutorial's app", .serialized)
struct HalfTunesAppTests {
    static var app: String { Binaries.directory + "/halftunes" }

    /// Runs `halftunes` with `environment` (the API base, XDG directories) against the daemon's socket.
    static func halftunes(_ args: [String], socket: String, environment: [String: String]) throws -> CLIResult {
        try runBinary(app, args + ["--socket", socket], environment: environment)
    }

    /// An iTunes Search API answer for these tracks (and one result without a preview, which is left out).
    static func searchAnswer(_ tracks: [(name: String, artist: String, url: String)]) -> [UInt8] {
        let results = tracks.map { #"{"wrapperType":"track","kind":"song","trackName":"\#($0.name)","artistName":"\#($0.artist)","previewUrl":"\#($0.url)","trackPrice":1.29}"# }
            + [#"{"wrapperType":"track","trackName":"No Preview","artistName":"Nobody"}"#]
        return Array(#"{"resultCount":\#(results.count),"results":[\#(results.joined(separator: ","))]}"#.utf8)
    }

    /// search → download three previews → pause one (its bytes stop) → cancel one → kill -9 the daemon mid-download
    /// and restart it → resume the paused one (it continues with Range) → the app, started again, shows the right
    /// states, the finished previews are in the library with the right SHA-256, play hands one to the player, and
    /// `halftunes events` handles each completion exactly once.
    @Test func theTutorialFlowAcrossACrash() async throws {
        try await withDaemon { daemon, origin in
            let home = try TempDir()
            defer { home.remove() }
            let alpha = TestOrigin.randomBytes(count: 1_200_000, seed: 501)
            let beta = TestOrigin.randomBytes(count: 1_500_000, seed: 502)
            let gamma = TestOrigin.randomBytes(count: 2_000_000, seed: 503)
            for (path, body) in [("/previews/alpha.m4a", alpha), ("/previews/beta.m4a", beta), ("/previews/gamma.m4a", gamma)] {
                origin.put(path, body)
                origin.setBehavior(path, .throttled(300_000))
            }
            origin.put("/search", Self.searchAnswer([
                ("Alpha", "The Testers", origin.url("/previews/alpha.m4a")),
                ("Beta", "The Testers", origin.url("/previews/beta.m4a")),
                ("Gamma", "The Testers", origin.url("/previews/gamma.m4a")),
            ]))
            let music = home.path + "/music"
            let env = ["HALFTUNES_API": origin.url(""), "XDG_STATE_HOME": home.path + "/state", "XDG_MUSIC_DIR": music,
                       "HOME": home.path, "HALFTUNES_PLAYER": home.path + "/player"]
            func app(_ args: String...) throws -> CLIResult {
                try Self.halftunes(args, socket: daemon.socketPath, environment: env)
            }

            let search = try app("search", "the", "testers")
            #expect(search.status == 0, "\(search.stdout)\(search.stderr)")
            #expect(search.stdout.contains("  1  Alpha — The Testers") && search.stdout.contains("  3  Gamma — The Testers"),
                    "\(search.stdout)")
            #expect(!search.stdout.contains("No Preview"))
            let asked = try #require(origin.requests("/search").last)
            #expect(asked.uri.contains("media=music") && asked.uri.contains("entity=song") && asked.uri.contains("term=the%20testers"),
                    "\(asked.uri)")

            let started = try app("download", "1", "2", "3", "--no-wait")
            #expect(started.status == 0 && started.stdout.contains("2. Beta — The Testers: downloading"), "\(started.stdout)\(started.stderr)")
            let duplicate = try app("download", "2", "--no-wait")
            #expect(duplicate.stdout.contains("2. Beta is already downloading"), "no second task for a running download: \(duplicate.stdout)")

            try await origin.waitUntilBytesServed("/previews/beta.m4a", atLeast: 200_000)
            let paused = try app("pause", "2")
            #expect(paused.status == 0 && paused.stdout.contains("2. Beta: paused at"), "\(paused.stdout)\(paused.stderr)")
            try eventually("beta's connections to close") { origin.concurrentResponses("/previews/beta.m4a") == 0 ? true : nil }
            let servedAtPause = origin.bytesServed("/previews/beta.m4a")
            let canceled = try app("cancel", "3")
            #expect(canceled.status == 0, "\(canceled.stdout)\(canceled.stderr)")

            // kill -9 once part of Alpha is durable (journaled after its fsync), so the restart resumes it.
            let alphaLine = try #require(started.stdout.split(separator: "\n").first { $0.hasPrefix("1. Alpha") })
            let alphaID = try #require(Int64(alphaLine.split(separator: "task ").last?.dropLast(2) ?? ""), "\(alphaLine)")
            let client = try daemon.client()
            try eventually("part of Alpha to be durable") { try client.task(alphaID).bytesDurable >= 100_000 ? true : nil }
            daemon.kill9()
            for path in ["/previews/alpha.m4a", "/previews/beta.m4a"] { origin.setBehavior(path, TestOrigin.Behavior()) }
            try daemon.restart()
            #expect(origin.bytesServed("/previews/beta.m4a") == servedAtPause, "a paused preview's bytes stop")

            let resumed = try app("resume", "2")
            #expect(resumed.status == 0 && resumed.stdout.contains("2. Beta: resumed"), "\(resumed.stdout)\(resumed.stderr)")
            let library = try eventually("both previews to be downloaded", timeout: 60) { () -> String? in
                let r = try app("library")
                let done = r.stdout.components(separatedBy: "[downloaded]").count - 1
                return done == 2 ? r.stdout : nil
            }
            #expect(!library.contains("Gamma"), "a canceled track is not in the library: \(library)")
            let alphaFile = music + "/HalfTunes/The Testers - Alpha.m4a", betaFile = music + "/HalfTunes/The Testers - Beta.m4a"
            #expect(library.contains(alphaFile) && library.contains(betaFile), "\(library)")
            #expect(try sha256(ofFile: alphaFile) == TestOrigin.sha256Hex(alpha))
            #expect(try sha256(ofFile: betaFile) == TestOrigin.sha256Hex(beta))
            // Paused and resumed: the rest came with Range and If-Range; killed: the same.
            for path in ["/previews/alpha.m4a", "/previews/beta.m4a"] {
                let ranged = origin.requests(path).filter { $0.range != nil }
                #expect(!ranged.isEmpty && ranged.allSatisfy { $0.ifRange != nil && $0.status == 206 }, "\(path): \(origin.requests(path))")
            }
            #expect(!FileManager.default.fileExists(atPath: music + "/HalfTunes/The Testers - Gamma.m4a"))

            // Started again, the app shows the states from the daemon and its own state file.
            let again = try app("search", "the", "testers")
            #expect(again.stdout.contains("Alpha — The Testers  [downloaded]") && again.stdout.contains("Beta — The Testers  [downloaded]"),
                    "\(again.stdout)")
            #expect(again.stdout.contains("  3  Gamma — The Testers\n"), "\(again.stdout)")

            try "#!/bin/sh\necho \"$1\" > \(home.path)/played\n".write(toFile: home.path + "/player", atomically: true, encoding: .utf8)
            chmod(home.path + "/player", 0o755)
            let played = try app("play", "1")
            #expect(played.status == 0, "\(played.stdout)\(played.stderr)")
            #expect(try String(contentsOfFile: home.path + "/played", encoding: .utf8) == alphaFile + "\n")
            let notYet = try app("play", "3")
            #expect(notYet.status != 0 && notYet.stderr.contains("not downloaded"), "\(notYet.stderr)")

            // Nobody handled the completions yet (download --no-wait returned at once): events does, once.
            let events = try app("events")
            #expect(events.status == 0, "\(events.stdout)\(events.stderr)")
            #expect(events.stdout.components(separatedBy: "Downloaded: ").count - 1 == 2, "\(events.stdout)")
            #expect(events.stdout.contains("Downloaded: Alpha — The Testers → \(alphaFile)"), "\(events.stdout)")
            #expect(events.stdout.contains("Downloaded: Beta — The Testers → \(betaFile)"), "\(events.stdout)")
            let twice = try app("events")
            #expect(twice.status == 0 && twice.stdout.hasPrefix("Nothing new"), "\(twice.stdout)")
        }
    }

    /// docs/tutorial.md's code is the app's: every excerpt headed `// Examples/HalfTunes/<file>.swift` appears in
    /// that file line by line, in order (so it compiles as part of the app).
    @Test func theTutorialsExcerptsAreTheAppsCode() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let tutorial = try String(contentsOf: root.appendingPathComponent("docs/tutorial.md"), encoding: .utf8)
        let blocks = tutorial.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "\n```")[0] }
        var checked = 0
        for block in blocks {
            var lines = block.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard let header = lines.first, header.hasPrefix("// Examples/HalfTunes/") else { continue }
            let file = String(header.dropFirst(3).split(separator: " ")[0])
            let source = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            lines = Array(lines.dropFirst()).filter { !$0.isEmpty }
            var at = source.startIndex
            for line in lines {
                guard let found = source[at...].firstIndex(of: line) else {
                    Issue.record("docs/tutorial.md: '\(line)' is not in \(file) (after line \(at + 1))")
                    break
                }
                at = found + 1
            }
            checked += 1
        }
        #expect(checked >= 10, "excerpts checked: \(checked)")
    }

    /// Errors a user meets (no search yet, a track number out of range, an API that answers garbage or 404), and a
    /// download followed to its end.
    @Test func clearErrors() async throws {
        try await withDaemon { daemon, origin in
            let home = try TempDir()
            defer { home.remove() }
            let env = ["HALFTUNES_API": origin.url(""), "XDG_STATE_HOME": home.path + "/state", "XDG_MUSIC_DIR": home.path + "/m",
                       "HOME": home.path]
            func app(_ args: String...) throws -> CLIResult { try Self.halftunes(args, socket: daemon.socketPath, environment: env) }
            let early = try app("download", "1")
            #expect(early.status != 0 && early.stderr.contains("no search yet"), "\(early.stderr)")
            origin.put("/search", Array("<html>oops</html>".utf8))
            let garbage = try app("search", "x")
            #expect(garbage.status != 0 && garbage.stderr.contains("not iTunes Search API JSON"), "\(garbage.stderr)")
            origin.put("/search", Self.searchAnswer([("One", "A", origin.url("/p.m4a"))]))
            #expect(try app("search", "x").status == 0)
            let outOfRange = try app("pause", "7")
            #expect(outOfRange.status != 0 && outOfRange.stderr.contains("no track 7: the last search has 1"), "\(outOfRange.stderr)")
            // Followed to the end, a download shows progress and its file, and handles (acknowledges) its events.
            let body = TestOrigin.randomBytes(count: 300_000, seed: 511)
            origin.put("/p.m4a", body)
            origin.setBehavior("/p.m4a", .throttled(600_000))
            let followed = try app("download", "1")
            #expect(followed.status == 0 && followed.stdout.contains("% of 300.0 KB  One"), "\(followed.stdout)\(followed.stderr)")
            #expect(followed.stdout.contains("1. One — A: downloaded to \(home.path)/m/HalfTunes/A - One.m4a"), "\(followed.stdout)")
            #expect(try sha256(ofFile: home.path + "/m/HalfTunes/A - One.m4a") == TestOrigin.sha256Hex(body))
            let again = try app("download", "1")
            #expect(again.stdout.contains("1. One is already downloaded."), "\(again.stdout)")
            let keep = try app("cancel", "1")
            #expect(keep.status != 0 && keep.stderr.contains("is downloaded already"), "\(keep.stderr)")
            #expect(try app("events").stdout.hasPrefix("Nothing new"))
            origin.remove("/search")
            let missing = try app("search", "x")
            #expect(missing.status != 0 && missing.stderr.contains("HTTP 404"), "\(missing.stderr)")
        }
    }
}
