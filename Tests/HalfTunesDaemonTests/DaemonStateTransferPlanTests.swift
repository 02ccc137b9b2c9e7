import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// What an attempt asks for is the state's (`transferPlan`): headers, timeouts, connections, credentials and the
/// kind's own parts from the task's row and its session's configuration; the runner only adds what is live.
@Suite("DaemonState: an attempt's plan")
struct DaemonStateTransferPlanTests {
    static func state(_ config: SessionConfiguration, daemonUID: UInt32 = 0,
                      writing: PartialWriting = PartialWriting()) -> DaemonState {
        var state = DaemonState(limits: DaemonStateTests.limits, daemonUID: daemonUID, partialWriting: writing)
        for (name, uid) in [("a", UInt32(1)), ("own", daemonUID)] {
            _ = state.handle(.sessionOpening(SessionRecord(identifier: name, uid: uid, configuration: config, state: .active,
                                                           createdAt: 0), reconfigure: false), now: 0)
        }
        return state
    }

    /// The daemon's checkpoint interval and free-space floor are the plan's, for downloads (the only ones with a
    /// partial file); the disk limits spare root and the daemon's own uid.
    @Test func aDownloadWritesItsPartialAsTheDaemonIsConfigured() throws {
        let writing = PartialWriting(checkpointInterval: 0.25, freeSpaceFloor: .bytes(4_096))
        var state = Self.state(SessionConfiguration(), daemonUID: 1000, writing: writing)
        state.tasks[5] = DaemonStateTests.task(5, session: "a", owner: 1)
        #expect(state.transferPlan(5)?.download?.writing == writing)
        #expect(state.diskExempt == [0, 1000])
    }

    @Test func aDownloadTakesTheSessionsSettingsUnderItsOwn() throws {
        let config = SessionConfiguration(headers: ["Accept": "*/*", "X-Both": "session"], requestTimeout: 12,
                                          allowInsecureRedirects: true, maxConnectionsPerTask: 3)
        var state = Self.state(config)
        var t = DaemonStateTests.task(5, session: "a", owner: 1)
        t.record.headers = ["X-Both": "task", "Authorization-Hint": "x"]
        t.record.durableRanges = ByteRanges(prefix: 100)
        t.record.bytesExpected = 1_000
        t.record.bandwidthLimit = 4_096
        state.tasks[5] = t
        let plan = try #require(state.transferPlan(5))
        #expect(plan.headers.map(\.name) == ["Accept", "Authorization-Hint", "X-Both"], "sorted by name")
        #expect(plan.headers.last?.value == "task", "the task's header over its session's")
        #expect(plan.kind == .download && plan.method == "GET" && plan.url == t.record.url)
        #expect(plan.requestTimeout == 12 && plan.allowInsecureRedirects && plan.bandwidthLimit == 4_096)
        #expect(plan.download == TransferPlan.Download(partialPath: "/d/.5.partial", durable: ByteRanges(prefix: 100),
                                                       validators: nil, expectedLength: 1_000, maxConnections: 3))
        #expect(plan.body == nil && plan.responseLimit == nil)
        // The task's own connections win; validators only when a response gave one.
        state.tasks[5]?.record.maxConnections = 1
        state.tasks[5]?.record.etag = "\"v1\""
        let again = try #require(state.transferPlan(5))
        #expect(again.download?.maxConnections == 1)
        #expect(again.download?.validators == Validators(etag: "\"v1\"", lastModified: nil))
        #expect(state.transferPlan(99) == nil)
    }

    @Test func theDefaultsWhenNothingIsSet() throws {
        var state = Self.state(SessionConfiguration())
        state.tasks[5] = DaemonStateTests.task(5, session: "a", owner: 1)
        let plan = try #require(state.transferPlan(5))
        #expect(plan.requestTimeout == SessionConfiguration.defaultRequestTimeout && !plan.allowInsecureRedirects)
        #expect(plan.download?.maxConnections == SessionConfiguration.defaultMaxConnectionsPerTask)
        #expect(plan.headers.isEmpty && plan.bandwidthLimit == 0)
    }

    /// The task's credentials (for its URL's origin) before its session's (each for its own origin; one journaled
    /// without an origin is in none); the daemon's netrc file only for a task of the daemon's own user (its
    /// effective uid, as everywhere else) that has none for its origin, never another user's.
    @Test func credentialsComeFromTheTaskTheSessionOrForTheDaemonsOwnUserNetrc() throws {
        let here = OriginCredentials(origin: "http://127.0.0.1:9", user: "s", password: "p")
        let there = OriginCredentials(origin: "https://other.example", realm: "r", user: "o", password: "p")
        let nowhere = OriginCredentials(origin: nil, user: "old", password: "p")
        var state = Self.state(SessionConfiguration(credentials: [nowhere, here, there]), daemonUID: 7)
        var t = DaemonStateTests.task(5, session: "a", owner: 1)
        state.tasks[5] = t
        #expect(state.transferPlan(5)?.credentials == [here, there])
        t.record.credentials = Credentials(user: "t", password: "q")
        state.tasks[5] = t
        let own = OriginCredentials(origin: "http://127.0.0.1:9", user: "t", password: "q")
        #expect(state.transferPlan(5)?.credentials == [own, there], "the session's for the task's origin stand aside")
        #expect(state.transferPlan(5)?.netrc == false)

        var plain = Self.state(SessionConfiguration(), daemonUID: 7)
        plain.tasks[5] = DaemonStateTests.task(5, session: "a", owner: 1)
        plain.tasks[6] = DaemonStateTests.task(6, session: "own", owner: 7)
        #expect(plain.transferPlan(5)?.credentials == [] && plain.transferPlan(5)?.netrc == false, "another user: no netrc")
        #expect(plain.transferPlan(6)?.netrc == true)
        // Credentials for other origins only: the netrc entry still answers the task's own.
        var elsewhere = Self.state(SessionConfiguration(credentials: [there, nowhere]), daemonUID: 7)
        elsewhere.tasks[6] = DaemonStateTests.task(6, session: "a", owner: 7)
        #expect(elsewhere.transferPlan(6)?.credentials == [there] && elsewhere.transferPlan(6)?.netrc == true)
    }

    @Test func uploadsAndDataTasksKeepTheirResponseInMemory() throws {
        var state = Self.state(SessionConfiguration())
        var up = DaemonStateTests.task(5, session: "a", owner: 1)
        up.record.kind = TaskKind.upload.rawValue
        up.record.file = "/home/u/report.pdf"
        state.tasks[5] = up
        let upload = try #require(state.transferPlan(5))
        #expect(upload.method == "PUT" && upload.download == nil && upload.responseLimit == .upload)
        #expect(upload.body == UploadBody(path: "/home/u/report.pdf"))
        var data = DaemonStateTests.task(6, session: "a", owner: 1)
        data.record.kind = TaskKind.data.rawValue
        data.record.method = "HEAD"
        data.record.maxResponseBytes = 512
        state.tasks[6] = data
        let exchange = try #require(state.transferPlan(6))
        #expect(exchange.method == "HEAD" && exchange.body == nil && exchange.responseLimit == .data(maxBytes: 512))
    }
}
