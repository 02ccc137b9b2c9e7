import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A background session in halftunesd, shaped after a background `URLSession`: open it with the same
/// identifier after a restart to get its tasks back and the events that queued up meanwhile.
public final class BackgroundSession: @unchecked Sendable {
    public let identifier: String
    /// True when the session already existed when it was opened (a re-attach).
    public let reattached: Bool
    /// The connection used for calls (share it to make other calls).
    public let client: HalfTunesClient

    private let lock = Lock()
    private var lastInfo: SessionInfo
    private var attachment: Attachment?
    private var deliveredSeq: Int64?

    private init(client: HalfTunesClient, opened: SessionOpenResult) {
        self.client = client
        self.identifier = opened.session.identifier
        self.reattached = opened.reattached
        self.lastInfo = opened.session
    }

    deinit { attachment?.stop() }

    /// Creates the session or re-attaches to it. A configuration, when given, replaces the stored one.
    public static func open(identifier: String, configuration: SessionConfiguration? = nil,
                            socketPath: String = DefaultSocket.path()) throws -> BackgroundSession {
        let client = try HalfTunesClient(socketPath: socketPath)
        let opened = try client.openSession(identifier, configuration: configuration)
        return BackgroundSession(client: client, opened: opened)
    }

    /// What an app does in `application(_:handleEventsForBackgroundURLSession:completionHandler:)` when the
    /// daemon has started it for its session's events (the session's `launchUnit`): re-attaches to the session,
    /// delivers every event that waited to `delegate` on the calling thread, ending with `didFinishEvents` (the
    /// `urlSessionDidFinishEvents` moment), acknowledges them, and returns how many journaled events it
    /// delivered. The process may then exit: the daemon starts it again later only for newer events, or, with
    /// backoff, when it exits without this returning.
    @discardableResult
    public static func handleEvents(forSession identifier: String, delegate: BackgroundSessionDelegate,
                                    socketPath: String = DefaultSocket.path()) throws -> Int {
        let session = try open(identifier: identifier, socketPath: socketPath)
        let stream = try session.events(after: 0)
        defer { stream.close() }
        var delivered = 0
        var through: Int64?
        while let event = try stream.nextEvent() {
            delegate.deliver(event, from: session)
            if let seq = event.seq {
                delivered += 1
                through = max(through ?? seq, seq)
                session.lock.withLock { session.deliveredSeq = through }
            }
            if case .didFinishEvents = event.payload {
                if let through { _ = try session.client.ack(session: identifier, through: through) }
                return delivered
            }
        }
        throw HalfTunesClientError.protocolViolation("the daemon closed the event stream before didFinishEvents")
    }

    /// The session as last fetched (`refresh()` fetches it again).
    public var info: SessionInfo { lock.withLock { lastInfo } }

    /// The highest journaled sequence number delivered to the attached delegate so far (nil before any).
    /// Pass it as `after` to continue where a previous attachment stopped.
    public var lastDeliveredSeq: Int64? { lock.withLock { deliveredSeq } }

    @discardableResult
    public func refresh() throws -> SessionInfo {
        let info = try client.session(identifier)
        lock.withLock { lastInfo = info }
        return info
    }

    /// A new download task, created suspended like URLSession's: call `resume()` to start it.
    /// `earliestBeginDate`: like URLSessionTask's, the task (once resumed) does not begin before then, even
    /// across a daemon restart.
    public func downloadTask(with url: String, destination: String? = nil, headers: [String: String]? = nil,
                             description: String? = nil, earliestBeginDate: Date? = nil) throws -> DownloadTask {
        let begin = earliestBeginDate.map { Timestamp.format($0.timeIntervalSince1970) }
        let info = try client.createTask(TaskCreateParams(session: identifier, url: url, destination: destination,
                                                          headers: headers, description: description, start: false,
                                                          earliestBeginDate: begin))
        return DownloadTask(client: client, info: info)
    }

    /// A task that continues a canceled download from its resume data (created suspended).
    public func downloadTask(withResumeData data: String, destination: String? = nil) throws -> DownloadTask {
        let info = try client.createTask(TaskCreateParams(session: identifier, destination: destination,
                                                          resumeData: data, start: false))
        return DownloadTask(client: client, info: info)
    }

    /// Every task of the session, in any state.
    public func allTasks() throws -> [DownloadTask] {
        try client.tasks(session: identifier).map { DownloadTask(client: client, info: $0) }
    }

    /// The session's events with seq > `after` (0: all not yet acknowledged), then live ones.
    public func events(after: Int64 = 0) throws -> EventStream {
        try client.events(session: identifier, after: after)
    }

    /// Delivers the events with seq > `after` (0: all not yet acknowledged), then live ones, to `delegate`
    /// on a background thread until `detach()`. With `autoAcknowledge`, delivered journaled events are
    /// acknowledged (after the delegate returns) so they are not replayed next time.
    /// Attaching again replaces the previous delegate. The session and delegate are kept alive while attached.
    public func attach(delegate: BackgroundSessionDelegate, after: Int64 = 0, autoAcknowledge: Bool = true) throws {
        detach()
        let stream = try events(after: after)
        let attachment = Attachment(stream: stream)
        lock.withLock { self.attachment = attachment }
        BackgroundThread.start { [self] in
            deliverEvents(of: attachment, to: delegate, autoAcknowledge: autoAcknowledge)
        }
    }

    /// Stops delivering events. When called from outside the delegate's thread, no delegate method
    /// runs after `detach()` returns.
    public func detach() {
        let current = lock.withLock { () -> Attachment? in
            defer { attachment = nil }
            return attachment
        }
        current?.stop()
    }

    /// Lets running tasks finish, then invalidates the session; no new tasks are accepted.
    @discardableResult
    public func finishTasksAndInvalidate() throws -> SessionInvalidateResult {
        try client.invalidateSession(identifier, cancelTasks: false)
    }

    /// Cancels every task and invalidates the session at once.
    @discardableResult
    public func invalidateAndCancel() throws -> SessionInvalidateResult {
        try client.invalidateSession(identifier, cancelTasks: true)
    }

    private func deliverEvents(of attachment: Attachment, to delegate: BackgroundSessionDelegate,
                               autoAcknowledge: Bool) {
        attachment.markDeliveryThread()
        var replaying = true
        var unacknowledged: Int64?
        var failure: HalfTunesClientError?
        do {
            while let event = try attachment.stream.nextEvent() {
                let delivered = attachment.deliver { delegate.deliver(event, from: self) }
                guard delivered else { return }
                if case .didFinishEvents = event.payload { replaying = false }
                if let seq = event.seq {
                    lock.withLock { deliveredSeq = max(deliveredSeq ?? seq, seq) }
                    unacknowledged = max(unacknowledged ?? seq, seq)
                }
                // Replayed events are acknowledged together when the replay is done, live ones one by one.
                if autoAcknowledge, !replaying, let through = unacknowledged {
                    _ = try? client.ack(session: identifier, through: through)
                    unacknowledged = nil
                }
            }
        } catch let error as HalfTunesClientError {
            failure = error
        } catch {
            failure = .protocolViolation("\(error)")
        }
        _ = attachment.deliver { delegate.session(self, didDisconnectWithError: failure) }
    }
}

/// One delegate attachment: its event stream and the lock that keeps `detach()` from returning while
/// a delegate method runs on another thread.
private final class Attachment: @unchecked Sendable {
    let stream: EventStream
    private let delivery = Lock()
    private var active = true
    private let threadLock = Lock()
    private var deliveryThread: pthread_t?
    /// Only read and written by the delivery thread.
    private var inCallback = false

    init(stream: EventStream) { self.stream = stream }

    func markDeliveryThread() { threadLock.withLock { deliveryThread = pthread_self() } }

    /// Runs `body` unless stopped; returns whether it ran.
    func deliver(_ body: () -> Void) -> Bool {
        delivery.withLock {
            guard active else { return false }
            inCallback = true
            defer { inCallback = false }
            body()
            return true
        }
    }

    /// Marks the attachment stopped (so the end of its stream is not reported), then closes the stream.
    func stop() {
        defer { stream.close() }
        let onDeliveryThread = threadLock.withLock {
            deliveryThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
        }
        if onDeliveryThread && inCallback {
            active = false // called from a delegate method: this thread already holds `delivery`
        } else {
            delivery.withLock { active = false }
        }
    }
}
