// The one AsyncHTTPClient delegate of every attempt: redirects, the idle timeout, sent-body progress, throttling.
import AsyncHTTPClient
import HalfTunesCore
import HalfTunesProtocol
import NIOCore
import NIOHTTP1

/// Where a response body goes: a download's partial file (`PartialFileSink`) or memory (`CollectorSink`).
/// Every method is called on the attempt's event loop, never while the delegate's own state is being
/// accessed, so a sink may complete promises and fail the request.
protocol ResponseSink: AnyObject, Sendable {
    /// Extra request headers (a download's `Range` and `If-Range`).
    var requestHeaders: [(String, String)] { get }
    /// The request is under way (`task` is what a sink fails when it must stop reading).
    func attached(_ task: any RunningRequest)
    /// The final response head, after redirects. False refuses it: the request is failed.
    func head(_ head: HTTPResponseHead, finalURL: String) -> Bool
    /// A redirect was refused before it was followed.
    func refuse(_ error: TaskError)
    /// A response the attempt will not go on from (a 401 it has no answer for): true when the sink reads it anyway
    /// and ends with `error` and the response (a data task hands the challenge over, as URLSession does); false: it
    /// is refused now, like `refuse`.
    func refuseAfterReading(_ error: TaskError) -> Bool
    /// A body part (arrived at `now`): the future acknowledges it (a pending one holds the response back); nil
    /// refuses the rest.
    func bodyPart(_ buffer: ByteBuffer, now: NIODeadline) -> EventLoopFuture<Void>?
    /// The sink's own work holds the response back (that silence is ours, not the server's).
    var isHoldingBack: Bool { get }
    /// The request failed: let go of anything held.
    func requestFailed()
    /// After the request's future completed: flush what the sink holds and decide the outcome.
    func finish(_ end: AttemptEnd) -> EventLoopFuture<AttemptOutcome>
    /// Ends an attempt that never sent a request: `.stopped`, or `.failed` with `error`.
    func abandon(_ error: TaskError?) -> EventLoopFuture<AttemptOutcome>
}

/// What the delegate knows when the request is over.
struct AttemptEnd: Sendable {
    var result: Result<Void, Error>
    /// The idle timeout failed the request.
    var timedOut: Bool
    /// After redirects.
    var finalURL: String
    /// The whole response arrived (AsyncHTTPClient's `didFinishRequest`).
    var responseEnded: Bool
    /// The proxy the request went through (nil: direct).
    var proxy: ProxyServer? = nil
}

/// A request under way on either transport: AsyncHTTPClient's task, or a plain http request forwarded to an HTTP
/// proxy in absolute form (`ForwardedRequest`). Both report to the same `AttemptDelegate`.
protocol RunningRequest: AnyObject, Sendable {
    /// Ends the request with `reason` (idempotent; nothing once it has ended): the delegate hears `didReceiveError`
    /// and the future fails with `reason`.
    func fail(reason: Error)
    /// Succeeds when the whole response arrived (and was acknowledged), fails otherwise.
    var futureResult: EventLoopFuture<Void> { get }
}

extension HTTPClient.Task: RunningRequest where Response == Void {}

/// Runs on the attempt's event loop (requests use `.delegateAndChannel(on:)`, forwarded requests use a channel
/// of that loop), so body parts arrive without hops. The transport calls the methods of the request's life
/// (`sentHead` … `finishedRequest`); AsyncHTTPClient's delegate callbacks are those methods. Nothing here calls into AsyncHTTPClient, the sink or a promise while the loop state is being
/// accessed: those calls can re-enter the delegate synchronously.
final class AttemptDelegate: HTTPClientResponseDelegate {
    typealias Response = Void

    struct Config: Sendable {
        var url: String
        var idleTimeout: TimeAmount
        var progressInterval: TimeAmount
        /// The request body's length (uploads).
        var bytesToSend: Int64?
        /// The session's `allowInsecureRedirects` (https → http).
        var allowInsecureRedirects: Bool
        /// The proxy the client sends the request through (nil: direct), for error messages.
        var proxy: ProxyServer?
        /// The attempt's proxy rules when a redirect to a URL with another proxy (or none) ends this request so
        /// the attempt makes the next hop on that proxy's client (`nextHop`); nil: AsyncHTTPClient follows every
        /// redirect on this request's client (a download's further requests).
        var proxyRules: ProxyRules? = nil
        /// The transport follows redirects itself (AsyncHTTPClient). A forwarded request does not: every redirect
        /// to follow ends it for a hop the attempt makes (with `proxyRules`), or is its final response.
        var followsRedirects = true
        /// The URLs earlier hops of this attempt requested (for `RedirectPolicy`'s count and cycles).
        var visited: [String] = []
        /// How a 401 is handled (`AuthVerdict`): answered by a next hop, or the task fails with
        /// `authenticationRequired`; nil: the sink takes it like any status (a download's further requests).
        var auth: Auth? = nil
        /// The request's method, and whether it sends a body (redirects AsyncHTTPClient follows may change both).
        var method = "GET"
        var sendsBody = false
    }

    /// The attempt's credentials (each for its origin), and what this request's `Authorization` answered.
    struct Auth: Sendable {
        var credentials: [OriginCredentials]
        var answered: (url: String, challenge: AuthChallenge)?
        /// Challenges the attempt answered before this request.
        var answers = 0
    }

    /// A redirect the attempt follows itself, on the client of the target's proxy.
    struct Hop: Sendable {
        var url: String
        var status: Int
        /// Every URL requested so far, the target included.
        var visited: [String]
        /// A 401's challenge the next hop answers (the same URL again, with `Authorization`).
        var challenge: AuthChallenge? = nil
        /// The credentials answering `challenge`.
        var credentials: Credentials? = nil
        /// The method of the request that got this response, and whether it sent a body: a redirect AsyncHTTPClient
        /// followed before may have made a POST a GET.
        var method = "GET"
        var sendsBody = false

        /// The method and body of the request a redirect with `status` leads to, as AsyncHTTPClient decides: 303
        /// (except to a HEAD), and 301/302 to a POST, become a GET without a body.
        static func afterRedirect(_ status: Int, method: String, sendsBody: Bool) -> (method: String, sendsBody: Bool) {
            if (status == 303 && method != "HEAD") || ([301, 302].contains(status) && method == "POST") {
                return ("GET", false)
            }
            return (method, sendsBody)
        }
    }

    struct LoopState {
        var task: (any RunningRequest)?
        var finished = false
        var finalURL: String
        /// URLs requested in this attempt, the first one first (for `RedirectPolicy`).
        var visited: [String] = []
        /// The whole response arrived, or the request failed: the idle timer has nothing left to watch.
        var ended = false
        var responseEnded = false
        var sent: ProgressPacer
        var lastActivity = NIODeadline.now()
        var idleTimer: Scheduled<Void>?
        var timedOut = false
        /// Set when this request ended for a hop the attempt makes itself (the sink saw nothing of it).
        var nextHop: Hop?
        /// The method and body of the request in flight (after the redirects AsyncHTTPClient followed).
        var method: String
        var sendsBody: Bool
    }

    let eventLoop: EventLoop
    let config: Config
    let attempt: Attempt
    let observer: any AttemptObserver
    let sink: any ResponseSink
    let body: UploadBodyStream?
    /// Bandwidth limits: delays acknowledging response body parts (nil: unlimited).
    let throttle: BodyThrottle?
    private let box: NIOLoopBoundBox<LoopState>

    init(eventLoop: EventLoop, config: Config, attempt: Attempt, observer: any AttemptObserver,
         sink: any ResponseSink, body: UploadBodyStream?, limiter: RateLimiter?) {
        self.eventLoop = eventLoop
        self.config = config
        self.attempt = attempt
        self.observer = observer
        self.sink = sink
        self.body = body
        self.throttle = limiter.map { BodyThrottle(limiter: $0, eventLoop: eventLoop) }
        let state = LoopState(finalURL: config.url, visited: config.visited,
                              sent: ProgressPacer(interval: config.progressInterval, now: NIODeadline.now().seconds), method: config.method,
                              sendsBody: config.sendsBody)
        self.box = .makeBoxSendingValue(state, eventLoop: eventLoop)
    }

    /// Starts the idle timer and the sink's own timers; `task` is what they fail.
    func attach(_ task: any RunningRequest) {
        eventLoop.execute {
            let attached = self.box.withValue { s -> Bool in
                guard !s.finished, s.task == nil else { return false }
                s.task = task
                s.lastActivity = .now()
                self.scheduleIdleCheck(&s, at: s.lastActivity + self.config.idleTimeout)
                return true
            }
            if attached { self.sink.attached(task) }
        }
    }

    // MARK: - Request body

    func sentHead() {
        box.withValue { s in
            // Every request (a redirected one too) sends its body from byte 0.
            let now = NIODeadline.now()
            s.sent.restart(at: 0, now: now.seconds)
            s.lastActivity = now
        }
    }

    func sentPart(_ bytes: Int) {
        let report = box.withValue { s -> ProgressPacer.Report? in
            let now = NIODeadline.now()
            s.lastActivity = now
            return s.sent.add(Int64(bytes), now: now.seconds)
        }
        if let report { reportSent(report) }
    }

    func sentRequest() {
        if let report = box.withValue({ $0.sent.flush(now: NIODeadline.now().seconds) }) { reportSent(report) }
    }

    // MARK: - Response

    /// Called for every response head, redirects included, before AsyncHTTPClient follows one: a redirect
    /// that `RedirectPolicy` refuses fails the request here, so the refused URL is never requested.
    func visited(_ url: String, _ head: HTTPResponseHead, task: any RunningRequest) {
        let (refusal, hop) = box.withValue { s -> (TaskError?, Bool) in
            s.lastActivity = .now()
            s.finalURL = url
            if s.visited.isEmpty { s.visited = [url] }
            let status = Int(head.status.code)
            let verdict = RedirectPolicy.evaluate(from: url, status: status,
                                                  location: head.headers.first(name: "Location"), visited: s.visited,
                                                  allowInsecure: self.config.allowInsecureRedirects)
            switch verdict {
            case .notARedirect:
                return (nil, false)
            case .follow where !self.config.followsRedirects && self.config.proxyRules == nil:
                return (nil, false) // a further request's redirect is its response (the sink refuses it)
            case .follow(let target):
                s.visited.append(target)
                // The proxy is chosen again for every hop: one that changes ends this request here, and the attempt
                // asks the target on the client of its proxy (or the direct one).
                // So does a target forwarded to its proxy (an https → http redirect through the same HTTP proxy).
                if let rules = self.config.proxyRules, !self.config.followsRedirects
                    || rules.proxy(for: target) != self.config.proxy || rules.forwards(target, via: self.config.proxy) {
                    s.nextHop = Hop(url: target, status: status, visited: s.visited, method: s.method,
                                    sendsBody: s.sendsBody)
                    return (nil, true)
                }
                (s.method, s.sendsBody) = Hop.afterRedirect(status, method: s.method, sendsBody: s.sendsBody)
                return (nil, false)
            case .refuse(let error):
                return (error, false)
            }
        }
        if hop { task.fail(reason: EngineAbort.decided) }
        guard let refusal else { return }
        sink.refuse(refusal)
        task.fail(reason: EngineAbort.decided)
    }

    func receivedHead(_ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let (finalURL, visited, method, sendsBody) = box.withValue { s -> (String, [String], String, Bool) in
            s.lastActivity = .now()
            return (s.finalURL, s.visited, s.method, s.sendsBody)
        }
        if head.status == .unauthorized, let auth = config.auth {
            let challenges = AuthChallenge.parse(head.headers["WWW-Authenticate"]) // not canonicalForm: it splits at every comma
            switch AuthVerdict.decide(url: finalURL, challenges: challenges, credentials: auth.credentials,
                                      answered: auth.answered, answers: auth.answers) {
            case .answer(let challenge, let credentials):
                box.withValue {
                    $0.nextHop = Hop(url: finalURL, status: 401, visited: visited, challenge: challenge,
                                     credentials: credentials, method: method, sendsBody: sendsBody)
                }
            case .refuse(var error):
                if !config.followsRedirects, let proxy = config.proxy {
                    // A proxy adds `Via` to every response it passes on (RFC 9110, 7.6.3): a 401 without one is its own
                    // answer. tinyproxy refuses wrong proxy credentials so, with a server's 401 and WWW-Authenticate.
                    if proxy.username != nil, !head.headers.contains(name: "Via") {
                        return eventLoop.makeFailedFuture(ProxyRefusal(answer: .init(status: 401, reason: head.status.reasonPhrase)))
                    }
                    error.message += " (through the proxy \(proxy))"
                }
                if sink.refuseAfterReading(error) {
                    return sink.head(head, finalURL: finalURL)
                        ? eventLoop.makeSucceededVoidFuture() : eventLoop.makeFailedFuture(EngineAbort.decided)
                }
                sink.refuse(error)
            }
            return eventLoop.makeFailedFuture(EngineAbort.decided)
        }
        return sink.head(head, finalURL: finalURL)
            ? eventLoop.makeSucceededVoidFuture() : eventLoop.makeFailedFuture(EngineAbort.decided)
    }

    func receivedBodyPart(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let now = NIODeadline.now()
        box.withValue { $0.lastActivity = now }
        guard let acknowledged = sink.bodyPart(buffer, now: now) else { return eventLoop.makeFailedFuture(EngineAbort.decided) }
        return throttle?.admit(buffer.readableBytes, acknowledged: acknowledged) ?? acknowledged
    }

    func receivedError(_ error: Error) {
        let hop = box.withValue { s -> Bool in
            s.ended = true
            return s.nextHop != nil
        }
        if !hop { sink.requestFailed() } // ended for the next hop: the sink goes on with it
        throttle?.release()
    }

    /// After the request's future completed: the hop the attempt makes next, if this request ended for one (the
    /// timers are stopped; the sink and the request body are left for the next hop). nil: call `finish`.
    func takeNextHop() -> Hop? {
        box.withValue { s -> Hop? in
            guard let hop = s.nextHop else { return nil }
            s.idleTimer?.cancel()
            s.idleTimer = nil
            s.finished = true
            return hop
        }
    }

    func finishedRequest() {
        box.withValue { s in
            s.ended = true
            s.responseEnded = true
        }
    }

    /// After the request's future completed: stops the timers and the request body, then lets the sink
    /// flush and decide the outcome.
    func finish(result: Result<Void, Error>) -> EventLoopFuture<AttemptOutcome> {
        let (end, report) = box.withValue { s -> (AttemptEnd, ProgressPacer.Report?) in
            s.idleTimer?.cancel()
            s.idleTimer = nil
            s.finished = true
            let end = AttemptEnd(result: result, timedOut: s.timedOut, finalURL: s.finalURL,
                                 responseEnded: s.responseEnded, proxy: config.proxy)
            return (end, s.sent.flush(now: NIODeadline.now().seconds))
        }
        if let report { reportSent(report) }
        body?.close()
        throttle?.release()
        return sink.finish(end)
    }

    // MARK: - Progress and the idle timer

    private func reportSent(_ report: ProgressPacer.Report) {
        observer.attemptDidSend(attempt, bytes: report.delta, totalBytes: report.total,
                                totalBytesExpected: config.bytesToSend)
    }

    private func scheduleIdleCheck(_ s: inout LoopState, at deadline: NIODeadline) {
        s.idleTimer = eventLoop.scheduleTask(deadline: deadline) { self.idleCheck() }
    }

    private func idleCheck() {
        // Our own work (writing the file, reading the upload, waiting for the bandwidth limits) holds the
        // exchange back: that silence is ours, not the server's.
        let holding = sink.isHoldingBack || body?.isHoldingBack == true || throttle?.isHolding == true
        let expired = box.withValue { s -> (any RunningRequest)? in
            guard !s.finished, !s.ended else { return nil }
            let now = NIODeadline.now()
            if holding { s.lastActivity = now }
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

/// AsyncHTTPClient's callbacks: the request's life as any transport reports it.
extension AttemptDelegate {
    func didSendRequestHead(task: HTTPClient.Task<Void>, _ head: HTTPRequestHead) { sentHead() }
    func didSendRequestPart(task: HTTPClient.Task<Void>, _ part: IOData) { sentPart(part.readableBytes) }
    func didSendRequest(task: HTTPClient.Task<Void>) { sentRequest() }
    func didVisitURL(task: HTTPClient.Task<Void>, _ request: HTTPClient.Request, _ head: HTTPResponseHead) {
        visited(request.url.absoluteString, head, task: task)
    }
    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> { receivedHead(head) }
    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        receivedBodyPart(buffer)
    }
    func didReceiveError(task: HTTPClient.Task<Void>, _ error: Error) { receivedError(error) }
    func didFinishRequest(task: HTTPClient.Task<Void>) throws { finishedRequest() }
}
