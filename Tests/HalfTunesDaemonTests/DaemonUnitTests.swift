import Crypto
import Foundation
@testable import HalfTunesDaemon
import HalfTunesProtocol
import Testing

@Suite("Resume data")
struct ResumeDataTests {
    let key = SymmetricKey(size: .bits256)

    @Test func roundTripsAndHidesPaths() throws {
        let token = ResumeData.newToken()
        #expect(token.count == 32 && token.allSatisfy(\.isHexDigit))
        #expect(ResumeData.newToken() != token)
        let data = ResumeData(token: token, url: "https://h/a b/file?x=1", bytes: 12345, uid: 1000)
        let string = data.encoded(key: key)
        #expect(!string.contains("/") && !string.contains("+") && !string.contains("="))
        var decoded = try ResumeData.decode(string, key: key)
        #expect(decoded.mac.count > 40)
        decoded.mac = ""
        #expect(decoded == data)
        #expect(try ResumeData.decode("  \(string)\n", key: key).token == token)
    }

    /// Resume data made with another key, or with any field changed, is refused like garbage.
    @Test func forgedOrAlteredResumeDataIsRefused() throws {
        let data = ResumeData(token: ResumeData.newToken(), url: "http://h/f", bytes: 10, uid: 1000)
        #expect(throws: RPCError.self) { try ResumeData.decode(data.encoded(key: SymmetricKey(size: .bits256)), key: key) }
        let genuine = try #require(Base64URL.decode(data.encoded(key: key)))
        var object = try #require(try JSONSerialization.jsonObject(with: genuine) as? [String: Any])
        for (field, value) in [("uid", 0 as Any), ("bytes", 11 as Any), ("url", "http://h/g" as Any),
                               ("token", ResumeData.newToken() as Any)] {
            var altered = object
            altered[field] = value
            let forged = Base64URL.encode(try JSONSerialization.data(withJSONObject: altered))
            #expect(throws: RPCError.self, "altered \(field) was accepted") { try ResumeData.decode(forged, key: key) }
        }
        object["v"] = 1
        #expect(throws: RPCError.self) {
            try ResumeData.decode(Base64URL.encode(try JSONSerialization.data(withJSONObject: object)), key: key)
        }
    }

    @Test(arguments: ["", "not base64!", "eyJ2IjoyfQ", String(repeating: "A", count: 5000)])
    func rejectsGarbage(_ input: String) {
        do {
            _ = try ResumeData.decode(input, key: key)
            Issue.record("garbage was accepted")
        } catch {
            #expect(error.code == RPCErrorCode.invalidResumeData.rawValue)
        }
    }

    @Test func theKeyIsCreatedOnceWithOwnerOnlyAccessAndKept() throws {
        let dir = NSTemporaryDirectory() + "rdk-" + ResumeData.newToken()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try ResumeDataKey.loadOrCreate(stateDirectory: dir)
        let second = try ResumeDataKey.loadOrCreate(stateDirectory: dir)
        #expect(first == second)
        var st = stat()
        #expect(stat(dir + "/resume-data.key", &st) == 0 && st.st_mode & 0o777 == 0o600 && st.st_size == 32)
        #expect(!FileManager.default.fileExists(atPath: dir + "/resume-data.key.new"))
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: dir + "/resume-data.key"))
        #expect(throws: ResumeDataKey.KeyError.self) { try ResumeDataKey.loadOrCreate(stateDirectory: dir) }
    }
}

@Suite("Destinations")
struct DestinationTests {
    @Test func normalizesDotsAndSlashes() {
        #expect(Destination.normalize("/a//b/./c/../d") == "/a/b/d")
        #expect(Destination.normalize("/../../etc") == "/etc")
    }

    @Test(arguments: [
        ("http://h/dir/file.iso", "file.iso"),
        ("http://h/dir/my%20song.m4a?x=1", "my song.m4a"),
        ("http://h/", "h.download"),
        ("http://h/..%2F..%2Fetc%2Fpasswd", "_.._etc_passwd"),
        ("http://h/.hidden", "hidden"),
        // Control characters and bidirectional overrides go, as from Content-Disposition.
        ("http://h/invoice%E2%80%AEfdp.exe", "invoicefdp.exe"),
        ("http://h/a%0Ab%07c%E2%81%A6d.txt", "abcd.txt"),
        ("http://h/%E2%80%AE%0A", "h.download"),
    ])
    func suggestedNamesAreSafe(url: String, name: String) throws {
        let u = try #require(URL(string: url))
        let suggested = Destination.suggestedName(for: u)
        #expect(suggested == name)
        #expect(!suggested.contains("/"))
    }

    @Test func urlsMustBeHTTPWithAHost() {
        for bad in ["ftp://h/f", "file:///etc/passwd", "not a url", "http:///nohost", "javascript:alert(1)"] {
            #expect(throws: RPCError.self, "\(bad)") { try Destination.validate(url: bad) }
        }
        #expect(throws: Never.self) { try Destination.validate(url: "HTTPS://example.com/x") }
    }

    @Test func defaultDestinationsAvoidExistingAndReservedNames() throws {
        let dir = NSTemporaryDirectory() + "htd-dest-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let url = URL(string: "http://h/f.txt")!
        #expect(try Destination.resolve(explicit: nil, url: url, directory: dir, reserved: []) == dir + "/f.txt")
        #expect(FileManager.default.createFile(atPath: dir + "/f.txt", contents: Data()))
        #expect(try Destination.resolve(explicit: nil, url: url, directory: dir, reserved: [dir + "/f (1).txt"])
                == dir + "/f (2).txt")
        #expect(throws: RPCError.self) { try Destination.resolve(explicit: "f.txt", url: url, directory: dir, reserved: []) }
        #expect(throws: RPCError.self) { try Destination.resolve(explicit: "/nonexistent-dir/x", url: url, directory: dir, reserved: []) }
        #expect(throws: RPCError.self) { try Destination.resolve(explicit: dir, url: url, directory: dir, reserved: []) }
        #expect(try Destination.resolve(explicit: "sub/../g.txt", url: url, directory: dir, reserved: []) == dir + "/g.txt")
        // overwrite applies to an explicit destination only: a name from the URL is always made free.
        #expect(throws: RPCError.self) { try Destination.resolve(explicit: nil, url: url, directory: dir, reserved: [], overwrite: true) }
        #expect(try Destination.resolve(explicit: "f.txt", url: url, directory: dir, reserved: [], overwrite: true) == dir + "/f.txt")
        let partial = Destination.partialPath(for: dir + "/g.txt")
        #expect(partial.hasPrefix(dir + "/.g.txt.") && partial.hasSuffix(".partial"))
    }
}

@Suite("Rate meter")
struct RateMeterTests {
    @Test func averagesOverTheWindowAndForgetsOldSamples() {
        var m = ThroughputMeter(window: 2)
        m.add(1000, at: 10)
        m.add(1000, at: 11)
        #expect(m.rate(now: 11) == 1000)
        #expect(m.rate(now: 12.5) == 500)
        #expect(m.rate(now: 20) == 0)
    }

    /// Many reports within one resolution step are one sample: the window holds at most window / resolution + 1
    /// of them whatever reports, and the rate is the same.
    @Test func reportsCloseTogetherAreOneSample() {
        var m = ThroughputMeter(window: 3, resolution: 0.1)
        var t = 100.0
        for _ in 0..<30_000 { // 10,000 reports a second for 3 s
            m.add(10, at: t)
            t += 0.0001
        }
        // Within one resolution step of the window (a joined sample counts from its first report's time): 3.4 %.
        #expect(abs(m.rate(now: t) - 100_000) < 3_400)
        #expect(m.sampleCount <= 31)
        #expect(m.rate(now: t + 3.2) == 0 && m.sampleCount == 0)
    }
}

@Suite("Parameter errors")
struct ParamErrorTests {
    struct Inner: Codable { var depth: Int?; var tags: [String: String]? }
    struct P: Codable { var id: Int64; var name: String; var inner: Inner?; var list: [Inner]? }

    func message(_ json: JSONValue) -> String? {
        do {
            let _: P = try RPCRouter.decodeParams(json)
            return nil
        } catch {
            return error.message
        }
    }

    @Test func namesTheFieldAndWhatIsExpected() {
        #expect(message(.object(["name": .string("x")])) == "Invalid params: missing field 'id'")
        #expect(message(.object(["id": .string("7"), "name": .string("x")])) == "Invalid params: 'id' must be an integer")
        #expect(message(.object(["id": .int(1), "name": .null])) == "Invalid params: 'name' must be a string, not null")
        #expect(message(.object(["id": .int(1), "name": .string("ok")])) == nil)
    }

    /// Unknown fields are refused at any depth (a misspelled option never silently does nothing);
    /// null stands for "absent"; free-form maps take any keys.
    @Test func unknownFieldsAreRefusedWithTheirPath() {
        #expect(message(.object(["id": .int(1), "name": .string("x"), "nmae": .string("y")]))
            == "Invalid params: unknown field 'nmae'; see docs/protocol.md for this method's fields")
        #expect(message(.object(["id": .int(1), "name": .string("x"),
                                 "inner": .object(["depht": .int(2), "tags": .object(["any": .string("k")])])]))
            == "Invalid params: unknown field 'inner.depht'; see docs/protocol.md for this method's fields")
        #expect(message(.object(["id": .int(1), "name": .string("x"),
                                 "list": .array([.object([:]), .object(["zz": .bool(true)])]), "b": .int(1)]))
            == "Invalid params: unknown fields 'b', 'list[1].zz'; see docs/protocol.md for this method's fields")
        #expect(message(.object(["id": .int(1), "name": .string("x"), "inner": .null, "later": .null])) == nil)
        #expect(message(.object(["id": .int(1), "name": .string("x"),
                                 "inner": .object(["tags": .object(["X-Any": .string("v")])])])) == nil)
    }
}

@Suite("Per-user download directories", .enabled(if: getuid() == 0, "needs root to act as other uids"))
struct PosixACLTests {
    /// The ACL a daemon without chown rights uses: the granted uid can list the directory and read what
    /// is created in it later; another uid cannot.
    @Test func grantedUIDReadsNewFilesOthersDoNot() throws {
        let dir = NSTemporaryDirectory() + "acl-" + ResumeData.newToken()
        #expect(mkdir(dir, 0o700) == 0)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(PosixACL.grant(path: dir, uid: 65534) == nil)
        #expect(FileManager.default.createFile(atPath: dir + "/file", contents: Data("hello".utf8),
                                               attributes: [.posixPermissions: 0o644]))
        func cat(as uid: UInt32) throws -> (Int32, String) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            p.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/cat", dir + "/file"]
            let out = Pipe()
            p.standardOutput = out
            p.standardError = FileHandle.nullDevice
            try p.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            return (p.terminationStatus, String(decoding: data, as: UTF8.self))
        }
        let granted = try cat(as: 65534)
        #expect(granted.0 == 0 && granted.1 == "hello")
        #expect(try cat(as: 65533).0 != 0)
    }

    @Test func confinementRefusesPathsOutsideAndThroughLinks() throws {
        let base = NSTemporaryDirectory() + "roots-" + ResumeData.newToken()
        #expect(mkdir(base, 0o700) == 0)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let roots = DownloadRoots(downloadsDirectory: base, daemonUID: 4242)
        try roots.confine(base + "/1000", uid: 1000)          // creates the personal directory
        try roots.confine(base + "/1000/sub/new", uid: 1000)  // missing parts are created later, as real directories
        #expect(symlink("/etc", base + "/1000/etc") == 0)
        for bad in [base + "/1000/etc", base + "/1000/etc/x", base + "/1001", base, "/tmp"] {
            #expect(throws: RPCError.self, "\(bad)") { try roots.confine(bad, uid: 1000) }
        }
        try roots.confine("/etc", uid: 0)                     // root may name anything
        #expect(roots.defaultDirectory(for: 1000) == base + "/1000")
        #expect(roots.defaultDirectory(for: 4242) == base)
    }

    /// Parameters read directly name their unknown members as comparing the input with the decoded value encoded
    /// again does (the way every other parameter type is checked).
    @Test func unknownMembersOfDirectlyReadParametersAreTheComparedOnes() throws {
        func same<P: Codable & JSONValueParams>(_ type: P.Type, _ members: [String: JSONValue]) throws {
            let input = JSONValue.object(members)
            let decoded = try #require(P(jsonValue: input), "\(input)")
            #expect(StrictParams.unknownMembers(input: members, known: P.members)
                    == StrictParams.unknownFields(input: input, decoded: try JSONValue.of(decoded)), "\(input)")
        }
        let extras: [[String: JSONValue]] = [[:], ["zz": .int(1)], ["zz": .null], ["b": .int(1), "a": .object([:])],
                                             ["stat": .string("queued"), "session": .null]]
        for extra in extras {
            try same(TaskIDParams.self, extra.merging(["id": .int(7)]) { _, b in b })
            try same(TaskCancelParams.self, extra.merging(["id": .int(7), "produceResumeData": .bool(true)]) { _, b in b })
            try same(TaskListParams.self, extra.merging(["limit": .int(50), "state": .string("queued")]) { _, b in b })
            try same(TaskListParams.self, extra)
            try same(EventsAckParams.self, extra.merging(["session": .string("s"), "through": .int(3)]) { _, b in b })
            try same(RPCRouter.Empty.self, extra)
            try same(TaskCreateParams.self, extra.merging(["session": .string("s"), "url": .string("http://h/f"),
                                                           "headers": .object(["X-A": .string("1"), "b": .string("2")]),
                                                           "start": .bool(true), "maxConnections": .int(4)]) { _, b in b })
        }
    }

    /// An event's line for a viewer (written straight to text by the outbox) is the line of its `JSONValue` with
    /// `SessionNames.present` applied, as it was made before: for root, the owner and another uid.
    @Test func anEventsLineShowsTheSessionAsPresentDoes() throws {
        let error = TaskError(code: "http", message: "Not \"found\"", httpStatus: 404)
        let response = TaskResponse(status: 200, headers: [["Session", "x"]], body: nil, bodyBytes: 3, truncated: false)
        let payloads: [EventPayload] = [
            .stateChanged(state: .queued, previous: .suspended, reason: nil),
            .stateChanged(state: .waiting, previous: .running, reason: error),
            .stateChanged(state: .suspended, previous: nil, reason: nil),
            .didComplete(error: nil, response: response), .didFinishDownloading(location: "/d/f"),
            .didFinishEvents(through: 9), .didBecomeInvalid,
        ]
        for payload in payloads {
            for session in ["1000/music", "2000/music", "music"] {
                let event = Event(seq: 7, session: session, task: 3, time: "2026-11-27T22:00:00Z", payload: payload)
                for uid: UInt32? in [nil, 0, 1000] {
                    let params = uid.map { SessionNames.present(event.jsonValue, to: $0) } ?? event.jsonValue
                    let expected = try RPCNotification(method: HalfTunes.eventNotification, params: params).line()
                    #expect(RPCNotification.eventLine(event, unqualifying: uid.map(SessionNames.prefix(of:))) == expected,
                            "\(event) to \(String(describing: uid))")
                }
            }
        }
    }
}
