// The AsyncHTTPClient delegate of one exchange: sent-body progress, the capped response, the idle timer.
import AsyncHTTPClient
import HalfTunesProtocol
import NIOCore
import NIOHTTP1

/// Runs on the exchange's event loop (requests use `.delegateAndChannel(on:)`). Nothing here calls into
/// AsyncHTTPClient while the loop state is being accessed (those calls can re-enter the delegate).
final class ExchangeDelegate: HTTPClientResponseDelegate {
    typealias Response = Void

    struct Config: Sendable {
        var url: String
        var method: String
        var limit: ResponseLimit
        var idleTimeout: TimeAmount
        var progressInterval: TimeAmount
        /// The request body's length (uploads).
        var bytesToSend: Int64?
        /// The session's `allowInsecureRedirects` (https → http).
        var allowInsecureRedirects: Bool
    }

    struct LoopState {
        var task: HTTPClient.Task<Void>?
        var finished = false
        var finalURL: String
        /// URLs requested in this attempt, the first one first (for `RedirectPolicy`).
        var visited: [String] = []
        var status: Int?
        var headers: [(String, String)] = []
        var collector: ResponseCollector
        var responseEnded = false
        /// The exchange refused the response (too large) or a redirect; the request was failed for it.
        var refused: TaskError?
        var sent: Int64 = 0
        var reportedSent: Int64 = 0
        var lastSentReport = NIODeadline.now()
        var reportedReceived: Int64 = 0
        var lastReceivedReport = NIODeadline.now()
        var lastActivity = NIODeadline.now()
        var idleTimer: Scheduled<Void>?
        var timedOut = false
    }

    let eventLoop: EventLoop
    let config: Config
    let exchange: Exchange
    let observer: any ExchangeObserver
    let body: UploadBodyStream?
    /// Bandwidth limits: delays acknowledging response body parts (nil: unlimited).
    let throttle: BodyThrottle?
    private let box: NIOLoopBoundBox<LoopState>

    init(eventLoop: EventLoop, config: Config, exchange: Exchange, observer: any ExchangeObserver,
         body: UploadBodyStream?, limiter: RateLimiter?) {
        self.eventLoop = eventLoop
        self.config = config
        self.exchange = exchange
        self.observer = observer
        self.body = body
        self.throttle = limiter.map { BodyThrottle(limiter: $0, eventLoop: eventLoop) }
        let state = LoopState(finalURL: config.url, collector: ResponseCollector(limit: config.limit))
        self.box = .makeBoxSendingValue(state, eventLoop: eventLoop)
    }

    /// Starts the idle timer; `task` is what it fails.
    func attach(_ task: HTTPClient.Task<Void>) {
        eventLoop.execute {
            self.box.withValue { s in
                guard !s.finished, s.task == nil else { return }
                s.task = task
                s.lastActivity = .now()
                self.scheduleIdleCheck(&s, at: s.lastActivity + self.config.idleTimeout)
            }
        }
    }

    // MARK: - Request

    func didSendRequestHead(task: HTTPClient.Task<Void>, _ head: HTTPRequestHead) {
        box.withValue { s in
            // Every request (a redirected one too) sends its body from byte 0.
            s.sent = 0
            s.reportedSent = 0
            s.lastActivity = .now()
        }
    }

    func didSendRequestPart(task: HTTPClient.Task<Void>, _ part: IOData) {
        box.withValue { s in
            let now = NIODeadline.now()
            s.sent += Int64(part.readableBytes)
            s.lastActivity = now
            if now - s.lastSentReport >= self.config.progressInterval { self.reportSent(&s, now: now) }
        }
    }

    func didSendRequest(task: HTTPClient.Task<Void>) {
        box.withValue { s in
            if s.sent != s.reportedSent { self.reportSent(&s, now: .now()) }
        }
    }

    // MARK: - Response

    /// Called for every response head, redirects included, before AsyncHTTPClient follows one: a redirect
    /// that `RedirectPolicy` refuses fails the request here, so the refused URL is never requested.
    func didVisitURL(task: HTTPClient.Task<Void>, _ request: HTTPClient.Request, _ head: HTTPResponseHead) {
        let url = request.url.absoluteString
        let refused = box.withValue { s -> Bool in
            s.lastActivity = .now()
            s.finalURL = url
            if s.visited.isEmpty { s.visited = [url] }
            let verdict = RedirectPolicy.evaluate(from: url, status: Int(head.status.code),
                                                  location: head.headers.first(name: "Location"), visited: s.visited,
                                                  allowInsecure: self.config.allowInsecureRedirects)
            switch verdict {
            case .notARedirect:
                return false
            case .follow(let target):
                s.visited.append(target)
                return false
            case .refuse(let error):
                s.refused = error
                return true
            }
        }
        if refused { task.fail(reason: EngineAbort.decided) }
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let accepted = box.withValue { s -> Bool in
            s.lastActivity = .now()
            let status = Int(head.status.code)
            let headers = head.headers.map { ($0.name, $0.value) }
            s.status = status
            s.headers = headers
            if let refusal = ExchangeRules.refusal(status: status, headers: headers, method: config.method,
                                                   limit: config.limit, url: s.finalURL) {
                s.refused = refusal
                return false
            }
            return true
        }
        return accepted ? eventLoop.makeSucceededVoidFuture() : eventLoop.makeFailedFuture(EngineAbort.decided)
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let accepted = box.withValue { s -> Bool in
            guard s.refused == nil else { return false }
            let now = NIODeadline.now()
            s.lastActivity = now
            let withinLimit = s.collector.append(buffer.readableBytesView)
            if !withinLimit {
                s.refused = ExchangeRules.tooLarge(url: s.finalURL, bytes: nil, limit: self.config.limit)
                return false
            }
            if now - s.lastReceivedReport >= self.config.progressInterval { self.reportReceived(&s, now: now) }
            return true
        }
        guard accepted else { return eventLoop.makeFailedFuture(EngineAbort.decided) }
        let acknowledged = eventLoop.makeSucceededVoidFuture()
        return throttle?.admit(buffer.readableBytes, acknowledged: acknowledged) ?? acknowledged
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: Error) {
        throttle?.release()
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        box.withValue { $0.responseEnded = true }
    }

    /// After the request's future completed: stops the timer and the body stream, decides the outcome.
    func finish(result: Result<Void, Error>, stopRequested: Bool) -> ExchangeOutcome {
        let s = box.withValue { s -> LoopState in
            s.idleTimer?.cancel()
            s.idleTimer = nil
            s.finished = true
            if s.sent != s.reportedSent { self.reportSent(&s, now: .now()) }
            if s.collector.total != s.reportedReceived { self.reportReceived(&s, now: .now()) }
            return s
        }
        body?.close()
        throttle?.release()
        return Self.outcome(result: result, state: s, stopRequested: stopRequested)
    }

    /// Precedence: a whole response decides; then stop(); then the exchange's own refusal; then the idle
    /// timeout; then the transport error.
    static func outcome(result: Result<Void, Error>, state s: LoopState, stopRequested: Bool) -> ExchangeOutcome {
        if case .success = result, let status = s.status, s.responseEnded, s.refused == nil {
            let response = s.collector.response(status: status, headers: s.headers)
            return ExchangeRules.outcome(status: status, headers: s.headers, response: response,
                                         now: POSIX.wallClock(), url: s.finalURL)
        }
        if stopRequested { return .stopped }
        if let refused = s.refused {
            var response = s.status.map { s.collector.response(status: $0, headers: s.headers) }
            if refused.code == TaskErrorCode.responseTooLarge {
                // Refused at the head (Content-Length) or while reading: no body is kept either way.
                response?.body = nil
                response?.truncated = true
            }
            return .failed(TransferFailure(error: refused, isTransient: false, durableBytes: 0), response: response)
        }
        if s.timedOut {
            let error = TaskError(code: TaskErrorCode.timedOut,
                                  message: "No data to or from \(ErrorMapping.hostDescription(s.finalURL)) within the request timeout")
            return .failed(TransferFailure(error: error, isTransient: true, durableBytes: 0), response: nil)
        }
        switch result {
        case .failure(let error as UploadSourceError):
            return .failed(TransferFailure(error: error.taskError, isTransient: false, durableBytes: 0), response: nil)
        case .failure(let error):
            let (taskError, transient) = ErrorMapping.classify(error, url: s.finalURL)
            return .failed(TransferFailure(error: taskError, isTransient: transient, durableBytes: 0), response: nil)
        case .success:
            let error = TaskError(code: TaskErrorCode.connectionLost,
                                  message: "The exchange with \(s.finalURL) ended without a complete response")
            return .failed(TransferFailure(error: error, isTransient: true, durableBytes: 0), response: nil)
        }
    }

    // MARK: - Progress and timers

    private func reportSent(_ s: inout LoopState, now: NIODeadline) {
        let delta = s.sent - s.reportedSent
        s.reportedSent = s.sent
        s.lastSentReport = now
        observer.exchangeDidSend(exchange, bytesSent: delta, totalBytesSent: s.sent,
                                 totalBytesExpectedToSend: config.bytesToSend)
    }

    private func reportReceived(_ s: inout LoopState, now: NIODeadline) {
        let delta = s.collector.total - s.reportedReceived
        s.reportedReceived = s.collector.total
        s.lastReceivedReport = now
        let expected = ResumeDecision.contentLength(s.headers)
        observer.exchangeDidReceive(exchange, bytesReceived: delta, totalBytesReceived: s.collector.total,
                                    totalBytesExpected: expected)
    }

    private func scheduleIdleCheck(_ s: inout LoopState, at deadline: NIODeadline) {
        s.idleTimer = eventLoop.scheduleTask(deadline: deadline) { self.idleCheck() }
    }

    private func idleCheck() {
        let expired = box.withValue { s -> HTTPClient.Task<Void>? in
            guard !s.finished, !s.responseEnded else { return nil }
            let now = NIODeadline.now()
            // Reading the file or waiting for the bandwidth limits is our silence, not the server's.
            if self.body?.isHoldingBack == true || self.throttle?.isHolding == true { s.lastActivity = now }
            let due = s.lastActivity + self.config.idleTimeout
            guard now >= due else {
                self.scheduleIdleCheck(&s, at: due)
                return nil
            }
            s.timedOut = true
            return s.task
        }
        expired?.fail(reason: EngineAbort.idleTimeout)
    }
}
