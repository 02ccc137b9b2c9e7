// The URLSession network and power rules through the binaries: sessions that may not use a metered network, that
// do not wait for connectivity, or that are discretionary, under a fake NetworkManager and UPower.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Runs `body` with a private system bus (fake NetworkManager and UPower on it, unless `fake` is false), an
/// origin, and a daemon on that bus; stops and removes them all.
func withConditionsDaemon(fake: Bool = true, _ body: (DaemonProcess, TestOrigin, PrivateSystemBus) async throws -> Void) async throws {
    let bus = try PrivateSystemBus()
    defer { bus.stop() }
    if fake { try bus.startFake() }
    try await withDaemon(environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]) { daemon, origin in
        try await body(daemon, origin, bus)
    }
}

@Suite("Network and power rules", .serialized)
struct NetworkConditionsTests {
    static func conditions(_ client: HalfTunesClient, _ expected: (SystemConditions) -> Bool, _ what: String) throws {
        try eventually(what, timeout: 10) { try client.status().conditions.map(expected) == true ? true : nil }
    }

    /// Metered: the transfer of a session with `allowsExpensiveNetworkAccess: false` stops (its connection
    /// closes) and waits with `networkExpensive`, no attempt used up, while a default session's transfer goes
    /// on; it stays waiting across kill -9 and a restart with no request made; unmetered: it continues at its
    /// durable offset with `Range` + `If-Range`, and the file is whole.
    @Test func meteredStopsAndWaitsThenContinuesWithIfRange() async throws {
        try await withConditionsDaemon { daemon, origin, bus in
            let body = TestOrigin.randomBytes(count: 6 * MiB, seed: 131)
            origin.put("/cheap.bin", body)
            origin.setBehavior("/cheap.bin", .throttled(2 * MiB))
            origin.put("/any.bin", TestOrigin.randomBytes(count: 4 * MiB, seed: 132))
            origin.setBehavior("/any.bin", .throttled(1 * MiB))
            let opened = try ctl(["session", "open", "cheap", "--no-expensive-network"], socket: daemon.socketPath)
            #expect(opened.status == 0 && opened.stdout.contains("waits for an unmetered network"), "\(opened.stdout)\(opened.stderr)")
            let client = try daemon.client()
            let events = try EventRecorder(client: client, session: "cheap", after: 0)
            let cheap = try client.createTask(TaskCreateParams(session: "cheap", url: origin.url("/cheap.bin"), start: true,
                                                               maxConnections: 1))
            let any = try client.startDownload(origin.url("/any.bin"), maxConnections: 1)
            try eventually("1 MiB received") { try client.task(cheap.id).bytesReceived >= Int64(MiB) ? true : nil }

            try bus.set("Metered=1")
            let waiting = try client.waitFor(task: cheap.id, state: .waiting, timeout: 10)
            #expect(waiting.waitingReason?.code == TaskErrorCode.networkExpensive && waiting.nextAttemptAt == nil)
            #expect(waiting.attempts == 1)
            try eventually("its connection closed", timeout: 10) { origin.concurrentResponses("/cheap.bin") == 0 ? true : nil }
            #expect(try client.task(any.id).state == .running, "a default session may use a metered network")
            let shown = try ctl(["show", String(cheap.id)], socket: daemon.socketPath)
            #expect(shown.stdout.contains("networkExpensive"), "\(shown.stdout)")
            let listed = try ctl(["list"], socket: daemon.socketPath)
            #expect(listed.stdout.contains("waiting (networkExpensive)"), "\(listed.stdout)")
            events.close()

            daemon.kill9()
            try daemon.restart()
            let restarted = try daemon.client()
            try Self.conditions(restarted, { $0.metered }, "metered after the restart")
            let still = try restarted.task(cheap.id)
            #expect(still.state == .waiting && still.waitingReason?.code == TaskErrorCode.networkExpensive)
            #expect(origin.requests("/cheap.bin").count == 1, "no request while metered")

            let after = try EventRecorder(client: restarted, session: "cheap", after: 0)
            try bus.set("Metered=2")
            let done = try restarted.waitFor(task: cheap.id, state: .completed, timeout: 30)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(done.attempts == 2)
            let requests = origin.requests("/cheap.bin")
            #expect(requests.count == 2)
            let resumed = try #require(after.resumes(task: cheap.id).last)
            #expect(resumed.offset >= Int64(MiB))
            #expect(requests.last?.status == 206 && requests.last?.range == "bytes=\(resumed.offset)-")
            #expect(requests.last?.ifRange != nil && requests.last?.ifRange == requests.first?.etag)
            #expect(after.waitingReasons(task: cheap.id).map(\.code) == [TaskErrorCode.networkExpensive])
        }
    }

    /// Offline: a task of a default session waits with `offline` and makes no request (its retry budget
    /// untouched); a session with `waitsForConnectivity: false` fails its task at once; online again, the
    /// waiting one runs.
    @Test func offlineWaitsOrFailsAtOnce() async throws {
        try await withConditionsDaemon { daemon, origin, bus in
            let body = TestOrigin.randomBytes(count: 256 * 1024, seed: 133)
            origin.put("/o.bin", body)
            let client = try daemon.client()
            try bus.set("Connectivity=1")
            try Self.conditions(client, { !$0.online }, "offline")
            let status = try ctl(["status"], socket: daemon.socketPath)
            #expect(status.stdout.contains("offline"), "\(status.stdout)")

            let waits = try client.startDownload(origin.url("/o.bin"))
            let waiting = try client.waitFor(task: waits.id, state: .waiting, timeout: 10)
            #expect(waiting.waitingReason?.code == TaskErrorCode.offline && waiting.attempts == 0)

            let opened = try ctl(["session", "open", "impatient", "--no-wait-for-connectivity"], socket: daemon.socketPath)
            #expect(opened.status == 0, "\(opened.stderr)")
            let failed = try ctl(["download", "--session", "impatient", "--wait", origin.url("/o.bin")], socket: daemon.socketPath)
            #expect(failed.status != 0)
            #expect(failed.stderr.contains("offline") || failed.stdout.contains("offline"), "\(failed.stdout)\(failed.stderr)")
            #expect(origin.requests("/o.bin").isEmpty, "no request while offline")

            try bus.set("Connectivity=4")
            let done = try client.waitFor(task: waits.id, state: .completed, timeout: 30)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(done.attempts == 1)
        }
    }

    /// A discretionary session waits on battery (and on a metered network) with `discretionary` while a default
    /// session runs; when UPower and NetworkManager leave the bus, the conditions count as good and it runs.
    @Test func discretionaryWaitsOnBatteryAndRunsWithoutTheServices() async throws {
        try await withConditionsDaemon { daemon, origin, bus in
            let body = TestOrigin.randomBytes(count: 256 * 1024, seed: 134)
            origin.put("/d.bin", body)
            let client = try daemon.client()
            try bus.set("OnBattery=true")
            try Self.conditions(client, { $0.onBattery }, "on battery")
            let opened = try ctl(["session", "open", "later", "--discretionary"], socket: daemon.socketPath)
            #expect(opened.stdout.contains("discretionary"), "\(opened.stdout)")
            let later = try client.createTask(TaskCreateParams(session: "later", url: origin.url("/d.bin"), start: true))
            let now = try client.startDownload(origin.url("/d.bin"))
            let waiting = try client.waitFor(task: later.id, state: .waiting, timeout: 10)
            #expect(waiting.waitingReason?.code == TaskErrorCode.discretionary)
            #expect(try client.waitFor(task: now.id, state: .completed, timeout: 30).attempts == 1)
            #expect(try client.task(later.id).state == .waiting)

            bus.stopFake()
            let done = try client.waitFor(task: later.id, state: .completed, timeout: 30)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
        }
    }

    /// No NetworkManager or UPower on the bus (a server): sessions with every rule set run as usual.
    @Test func withoutNetworkManagerEverythingRuns() async throws {
        try await withConditionsDaemon(fake: false) { daemon, origin, _ in
            origin.put("/n.bin", TestOrigin.randomBytes(count: 64 * 1024, seed: 135))
            let client = try daemon.client()
            _ = try client.openSession("strict", configuration: SessionConfiguration(
                allowsExpensiveNetworkAccess: false, waitsForConnectivity: false, isDiscretionary: true))
            let t = try client.createTask(TaskCreateParams(session: "strict", url: origin.url("/n.bin"), start: true))
            #expect(try client.waitFor(task: t.id, state: .completed, timeout: 30).attempts == 1)
            #expect(try client.status().conditions == .assumed)
        }
    }
}
