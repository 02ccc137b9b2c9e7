import HalfTunesCore
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import NIOConcurrencyHelpers
import NIOCore

/// Bridges one running `Attempt` (of any task kind) to the daemon: everything it reports, checkpoints included,
/// is delivered to the core in order (the state owns the durable ranges and journals them: `checkpointed`).
final class TaskRuntime: AttemptObserver, Sendable {
    enum Message: Sendable {
        /// What the attempt reports while in flight, in order (the state's input as it is).
        case progress(DaemonState.Progress)
        case finished(AttemptOutcome)
    }

    let taskID: Int64
    let messages: AsyncStream<Message>
    private let continuation: AsyncStream<Message>.Continuation
    private let attempt = NIOLockedValueBox<Attempt?>(nil)
    private let runTask = NIOLockedValueBox<Task<AttemptOutcome, Never>?>(nil)
    /// Where a split download's extra connections are granted, and the task's host there.
    private let connections: HostConnections?
    private let host: String

    init(taskID: Int64, connections: HostConnections? = nil, host: String = "") {
        self.taskID = taskID
        self.connections = connections
        self.host = host
        (messages, continuation) = AsyncStream.makeStream(of: Message.self)
    }

    func start(_ a: Attempt) {
        attempt.withLockedValue { $0 = a }
        let continuation = self.continuation
        runTask.withLockedValue {
            $0 = Task {
                // A complete download's last bytes were fsynced but not checkpointed: the core records them with
                // the publish intent (`AttemptVerdict`), one journal write fewer per download.
                let outcome = await a.run()
                self.connections?.release(self.host, task: self.taskID) // whatever a request left held
                continuation.yield(.finished(outcome))
                continuation.finish()
                return outcome
            }
        }
    }

    func stop() {
        attempt.withLockedValue { $0 }?.stop()
    }

    /// Waits for the attempt to end.
    func outcome() async -> AttemptOutcome? {
        guard let task = runTask.withLockedValue({ $0 }) else { return nil }
        return await task.value
    }

    // MARK: AttemptObserver

    func attemptDidStart(_ attempt: Attempt, _ start: ResponseStart) {
        continuation.yield(.progress(.started(start)))
    }

    func attemptDidReceive(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?) {
        continuation.yield(.progress(.received(delta: bytes, total: totalBytes, expected: totalBytesExpected)))
    }

    /// The data is fsynced: the state records its ranges and journals them, after the messages before it.
    func attemptDidCheckpoint(_ attempt: Attempt, durable ranges: ByteRanges) {
        continuation.yield(.progress(.checkpointed(ranges)))
    }

    func attemptWantsConnection(_ attempt: Attempt) -> Bool {
        guard let connections else { return false }
        return connections.tryAcquire(host, task: taskID, shed: { [weak attempt] n in attempt?.shedConnections(n) })
    }

    func attemptReleasedConnection(_ attempt: Attempt) {
        connections?.release(host, task: taskID, count: 1)
    }

    func attemptConnectionRefused(_ attempt: Attempt, retryAfter: Double?) {
        connections?.refused(host, retryAfter: retryAfter)
    }

    func attemptDidOpenBody(_ attempt: Attempt, bytesExpectedToSend: Int64) {
        continuation.yield(.progress(.bodyOpened(bytes: bytesExpectedToSend)))
    }

    func attemptDidSend(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?) {
        continuation.yield(.progress(.sent(delta: bytes, total: totalBytes, expected: totalBytesExpected)))
    }

    /// The attempt leased `proxy`'s client (`LeaseReports`): the state counts it against the owner's proxies.
    func proxyLeased(_ proxy: ProxyServer) {
        continuation.yield(.progress(.proxyLeased(proxy)))
    }
}

/// An attempt's HTTP clients (`HTTPClients.leases`) that tell its runtime of each proxy it leases, once per proxy,
/// so the state counts what the engine counts (a redirect hop or segment through another proxy included).
struct LeaseReports: AttemptClients {
    let clients: any AttemptClients
    let runtime: TaskRuntime
    private let reported = NIOLockedValueBox<Set<ProxyServer>>([])

    init(clients: any AttemptClients, runtime: TaskRuntime) {
        self.clients = clients
        self.runtime = runtime
    }

    var eventLoopGroup: any EventLoopGroup { clients.eventLoopGroup }

    func lease(for proxy: ProxyServer?) throws(HTTPClients.TooManyProxies) -> ProxyClient {
        let client = try clients.lease(for: proxy)
        if let proxy, reported.withLockedValue({ $0.insert(proxy).inserted }) { runtime.proxyLeased(proxy) }
        return client
    }

    func release(_ proxy: ProxyServer?) { clients.release(proxy) }
}

/// An attempt in flight as the runner holds it: the bridge to its transfer and the task's own bandwidth
/// bucket (its rate follows the task's `bandwidthLimit`).
struct LiveAttempt {
    let runtime: TaskRuntime
    let bandwidth: BandwidthBucket
    /// Hands what the attempt reports to the core, in order; it ends after the attempt's end was handled.
    var reports: Task<Void, Never>? = nil
}
