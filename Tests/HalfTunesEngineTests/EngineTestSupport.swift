// Test helpers: temporary directories, file I/O, a recording AttemptObserver, an origin + HTTP client fixture.
import AsyncHTTPClient
import Foundation
import HalfTunesCore
import HalfTunesEngine
import HalfTunesProtocol
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import TestOrigin
import Testing

/// A fresh directory under the system temp dir, removed when released.
final class TempDir {
    let root: String

    init() throws {
        var base = NSTemporaryDirectory()
        while base.count > 1, base.hasSuffix("/") { base.removeLast() }
        var template = Array((base + "/halftunes-engine-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
        root = String(cString: made)
    }

    func path(_ name: String) -> String { root + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: root) }
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

func readFile(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// Records every observer call; checks they never overlap and that checkpoints never exceed the file.
final class RecordingObserver: AttemptObserver {
    struct Checkpoint: Sendable, Equatable {
        var ranges: ByteRanges
        var fileLength: Int64
        var durable: Int64 { ranges.count }
    }

    struct State {
        var starts: [ResponseStart] = []
        var writes: [(delta: Int64, total: Int64, expected: Int64?)] = []
        var checkpoints: [Checkpoint] = []
        var inCall = false
        var overlaps = 0
        var eventsBeforeStart = 0
        /// Extra connections: how many may be held at once (nil: any number), held now, the most held.
        var allowance: Int?
        var held = 0
        var maxHeld = 0
        var granted = 0
        var refused = 0
        /// Further connections the server refused, with its Retry-After.
        var serverRefusals: [Double?] = []
    }

    let partialPath: String
    private let state = NIOLockedValueBox(State())

    init(partialPath: String) { self.partialPath = partialPath }

    var snapshot: State { state.withLockedValue { $0 } }

    private func enter() {
        state.withLockedValue { s in
            if s.inCall { s.overlaps += 1 }
            s.inCall = true
        }
    }

    private func leave() { state.withLockedValue { $0.inCall = false } }

    func attemptDidStart(_ attempt: Attempt, _ start: ResponseStart) {
        enter()
        defer { leave() }
        state.withLockedValue { $0.starts.append(start) }
    }

    func attemptDidReceive(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?) {
        enter()
        defer { leave() }
        state.withLockedValue { s in
            if s.starts.isEmpty { s.eventsBeforeStart += 1 }
            s.writes.append((bytes, totalBytes, totalBytesExpected))
        }
    }

    func attemptDidCheckpoint(_ attempt: Attempt, durable: ByteRanges) {
        enter()
        defer { leave() }
        let length = PartialFile.length(path: partialPath) ?? -1
        state.withLockedValue { $0.checkpoints.append(Checkpoint(ranges: durable, fileLength: length)) }
    }

    func attemptWantsConnection(_ attempt: Attempt) -> Bool {
        state.withLockedValue { s in
            guard s.held < (s.allowance ?? .max) else {
                s.refused += 1
                return false
            }
            s.held += 1
            s.granted += 1
            s.maxHeld = max(s.maxHeld, s.held)
            return true
        }
    }

    func attemptReleasedConnection(_ attempt: Attempt) {
        state.withLockedValue { s in
            precondition(s.held > 0, "a connection released twice")
            s.held -= 1
        }
    }

    func attemptConnectionRefused(_ attempt: Attempt, retryAfter: Double?) {
        state.withLockedValue { $0.serverRefusals.append(retryAfter) }
    }

    /// Grants at most `allowance` extra connections at once from now on (nil: any number).
    func setAllowance(_ allowance: Int?) {
        state.withLockedValue { $0.allowance = allowance }
    }

    /// Checkpoints never overlap, never exceed the file, and only lose ranges by going to nothing (a restart).
    func expectSaneCheckpoints(sourceLocation: SourceLocation = #_sourceLocation) {
        let s = snapshot
        #expect(s.overlaps == 0, "observer calls overlapped", sourceLocation: sourceLocation)
        var previous = ByteRanges()
        for c in s.checkpoints {
            #expect(c.ranges.upperBound <= c.fileLength, "checkpoint \(c.ranges) beyond file length \(c.fileLength)",
                    sourceLocation: sourceLocation)
            #expect(c.ranges.intersection(previous) == previous || c.ranges.isEmpty,
                    "checkpoints went down: \(s.checkpoints)", sourceLocation: sourceLocation)
            previous = c.ranges
        }
    }
}

/// A TestOrigin, an event loop group and an HTTPClient from HTTPClientFactory, all shut down afterwards.
struct EngineFixture {
    let origin: TestOrigin
    let client: HTTPClient
    let dir: TempDir
    let logger = Logger(label: "engine-tests")

    static func with(_ body: (EngineFixture) async throws -> Void) async throws {
        let origin = try await TestOrigin.start()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let client = try HTTPClientFactory.make(eventLoopGroup: group)
        let fixture = EngineFixture(origin: origin, client: client, dir: try TempDir())
        var failure: Error?
        do { try await body(fixture) } catch { failure = error }
        try await client.shutdown()
        try await group.shutdownGracefully()
        try await origin.shutdown()
        if let failure { throw failure }
    }

    func transfer(_ request: AttemptRequest, observer: RecordingObserver) -> Attempt {
        Attempt(request: request, client: client, observer: observer, logger: logger)
    }

    /// Runs one attempt of `path` into `partial`, returning the outcome and the observer.
    func run(_ path: String, partial: String, durableOffset: Int64 = 0, durable: ByteRanges? = nil,
             validators: Validators? = nil, timeout: Double = 30, checkpointInterval: Double = 1.0,
             maxConnections: Int = 1, allowance: Int? = nil) async -> (AttemptOutcome, RecordingObserver) {
        let observer = RecordingObserver(partialPath: partial)
        observer.setAllowance(allowance)
        let request = AttemptRequest.download(taskID: 1, url: origin.url(path), partialPath: partial,
                                      durable: durable ?? ByteRanges(prefix: durableOffset), validators: validators,
                                      requestTimeout: timeout, checkpointInterval: checkpointInterval,
                                      maxConnections: maxConnections)
        let outcome = await transfer(request, observer: observer).run()
        return (outcome, observer)
    }
}

/// Waits (polling) until `condition` holds; fails the test after `seconds`.
func waitUntil(_ what: String, seconds: Double = 30, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("timed out waiting for \(what)")
            throw CancellationError()
        }
        try await Task.sleep(for: .milliseconds(5))
    }
}

extension AttemptOutcome {
    var failure: TransferFailure? {
        if case .failed(let f, _) = self { return f }
        return nil
    }
}

/// A TCP listener on 127.0.0.1 that never accepts: connections complete in the kernel backlog and requests get
/// no answer, which is a server that never sends a response head.
final class SilentListener {
    let fd: Int32
    let port: Int

    init() throws {
        guard let (fd, port) = LoopbackSocket.bound(backlog: 16) else { throw POSIXError(.EADDRINUSE) }
        self.fd = fd
        self.port = port
    }

    /// A client connection is waiting in the backlog.
    var hasPendingConnection: Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) == 1
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    deinit { close(fd) }
}

/// `waitUntil`, but on a timeout the transfer is stopped and awaited before the error is thrown, so it
/// never outlives the fixture's event loop (which would crash the whole test process).
func waitUntil(_ what: String, seconds: Double = 30, stopping transfer: Attempt,
               _ running: Task<AttemptOutcome, Never>, _ condition: () -> Bool) async throws {
    do {
        try await waitUntil(what, seconds: seconds, condition)
    } catch {
        transfer.stop()
        _ = await running.value
        throw error
    }
}

/// One client for every request, whatever the proxy rules say; plain http to an HTTP proxy goes to `forwarder`
/// when there is one (else it is tunnelled by the client).
struct FixedClient: AttemptClients {
    let client: HTTPClient
    var forwarder: ProxyForwarder?
    init(_ client: HTTPClient, forwarder: ProxyForwarder? = nil) {
        self.client = client
        self.forwarder = forwarder
    }
    var eventLoopGroup: any EventLoopGroup { client.eventLoopGroup }
    func lease(for proxy: ProxyServer?) throws(HTTPClients.TooManyProxies) -> ProxyClient {
        ProxyClient(client: client, forwarder: proxy == nil ? nil : forwarder)
    }
    func release(_ proxy: ProxyServer?) {}
}

extension Attempt {
    /// Every request of the attempt through `client`.
    convenience init(request: AttemptRequest, client: HTTPClient, observer: any AttemptObserver, logger: Logger) {
        self.init(request: request, clients: FixedClient(client), observer: observer, logger: logger)
    }
}
