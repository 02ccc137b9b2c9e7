// One HTTP attempt of any task: open the sink and the request body, send, stream the response, stop.
import AsyncHTTPClient
import HalfTunesCore
import HalfTunesProtocol
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// A download resumes or restarts its partial file (`PartialFileSink`); an upload sends its file from byte 0
/// and, like a data task, keeps the response in memory (`CollectorSink`). Everything else — redirects, the
/// idle timeout, progress pacing, bandwidth limits, stop — is the same `AttemptDelegate` for every kind.
public final class Attempt: Sendable {
    private struct Control {
        var runCalled = false
        var stopRequested = false
        var task: (any RunningRequest)?
        /// A download's further requests (segments), by segment id.
        var segments: [Int: any RunningRequest] = [:]
        /// A download's file side, once its partial file is open.
        var download: SegmentedDownload?
        /// The proxies whose clients the attempt leased, one entry per lease.
        var leased: [ProxyServer?] = []
        /// The challenge the first request's credentials answered, where, with what, and the nonce count used
        /// with it so far: a download's further requests to the same origin send `Authorization` at once.
        var answered: (challenge: AuthChallenge, origin: String?, credentials: Credentials, count: Int)?
    }

    private let request: AttemptRequest
    private let clients: any AttemptClients
    private let observer: any AttemptObserver
    private let logger: Logger
    private let control = NIOLockedValueBox(Control())

    /// `clients`: the client of each hop's proxy (`request.proxyRules`), leased until the attempt ends.
    public init(request: AttemptRequest, clients: any AttemptClients, observer: any AttemptObserver, logger: Logger) {
        self.request = request
        self.clients = clients
        self.observer = observer
        var logger = logger
        logger[metadataKey: "task"] = "\(request.taskID)"
        self.logger = logger
    }

    public var taskID: Int64 { request.taskID }
    /// The URL the attempt was asked for (before redirects).
    var url: String { request.url }

    var isStopRequested: Bool { control.withLockedValue { $0.stopRequested } }

    /// The lowest bandwidth limit the attempt is metered against now (nil: none).
    var rateCeiling: Double? { request.rateLimiter?.ceiling }

    /// Idempotent, thread-safe; makes run() return `.stopped` (even if called before run() starts or while
    /// the request is connecting), unless a whole response already decided the outcome. A download's data
    /// already received is flushed, fsynced and checkpointed first.
    public func stop() {
        let tasks = control.withLockedValue { c -> [any RunningRequest] in
            c.stopRequested = true
            return (c.task.map { [$0] } ?? []) + Array(c.segments.values)
        }
        for task in tasks { task.fail(reason: EngineAbort.stopped) }
    }

    /// A download gives back `count` of the connections `AttemptObserver.attemptWantsConnection` granted: its
    /// newest further requests stop (what they wrote stays, the rest of their ranges is fetched by the others).
    /// Thread-safe; nothing for other kinds, or before the partial file is open.
    public func shedConnections(_ count: Int) {
        guard count > 0 else { return }
        control.withLockedValue { $0.download }?.shed(count)
    }

    /// Runs the attempt to its end. Call once.
    public func run() async -> AttemptOutcome {
        let first = control.withLockedValue { c -> Bool in
            defer { c.runCalled = true }
            return !c.runCalled
        }
        guard first else {
            let error = TaskError(code: TaskErrorCode.internalError,
                                  message: "Attempt.run() was called twice for task \(request.taskID)")
            return .failed(TransferFailure(error: error, isTransient: false, durableBytes: 0))
        }
        defer { releaseClients() }
        let eventLoop = clients.eventLoopGroup.next()
        let sink: any ResponseSink
        var primary: PartialFileSink?
        switch request.sink {
        case .partialFile(let target):
            switch await openPartialFile(target, eventLoop: eventLoop) {
            case .success(let opened):
                sink = opened
                primary = opened
            case .failure(let failed): return failed.outcome
            }
        case .memory(let limit):
            sink = CollectorSink(eventLoop: eventLoop, method: request.method, limit: limit,
                                 progressInterval: Self.amount(request.progressInterval), attempt: self,
                                 observer: observer)
        }
        var body: UploadBodyStream?
        var bytesToSend: Int64?
        if let upload = request.body {
            let source: UploadSource
            do {
                source = try UploadSource.open(path: upload.path, expected: upload.fileID)
            } catch {
                logger.warning("cannot open the file to upload", metadata: ["error": "\(error)"])
                return await eventLoop.flatSubmit { sink.abandon(error.taskError) }.outcome()
            }
            logger.debug("upload source opened", metadata: [
                "file": "\(upload.path)", "bytes": "\(source.size)", "uid": "\(source.openedAsUID)",
            ])
            observer.attemptDidOpenBody(self, bytesExpectedToSend: source.size)
            bytesToSend = source.size
            body = UploadBodyStream(source: source, eventLoop: eventLoop, limiter: request.rateLimiter,
                                    label: "halftunesd.upload.\(request.taskID)")
        }
        let closeBody = { [body] in if let body { eventLoop.execute { body.close() } } }
        if isStopRequested {
            closeBody()
            return await eventLoop.flatSubmit { sink.abandon(nil) }.outcome()
        }
        // Hop by hop: AsyncHTTPClient follows a redirect on the same client; one whose target takes another proxy
        // (or none) ends the request, and the next hop is asked here on the client of the target's proxy.
        var hop = AttemptDelegate.Hop(url: request.url, status: 0, visited: [])
        var method = request.method
        var sendsBody = body != nil
        var firstRequest = true
        /// The `Authorization` of the next request, and the URL and challenge it answers.
        var authorization: String?
        var answered: (url: String, challenge: AuthChallenge)?
        var answers = 0
        while true {
            let proxy = request.proxyRules.proxy(for: hop.url)
            let client: HTTPClient
            let forwarder: ProxyForwarder?
            do {
                let leased = try lease(proxy)
                client = leased.client
                forwarder = request.proxyRules.forwards(hop.url, via: proxy) ? leased.forwarder : nil
            } catch {
                closeBody()
                if isStopRequested { return await eventLoop.flatSubmit { sink.abandon(nil) }.outcome() }
                // The uid's transfers already go through as many proxies as allowed: this one waits and is retried.
                let message = "uid \(error.uid) already has transfers through \(error.limit) different proxies, the most "
                    + "at once; this task goes on when one of them is free"
                let outcome = await eventLoop.flatSubmit {
                    sink.abandon(TaskError(code: TaskErrorCode.proxyFailure, message: message))
                }.outcome()
                return Self.transient(outcome)
            }
            let httpRequest: HTTPClient.Request
            do {
                httpRequest = try makeHTTPRequest(url: hop.url, method: method, body: sendsBody ? body?.body : nil,
                                                  extraHeaders: sink.requestHeaders + (authorization.map { [("Authorization", $0)] } ?? []))
            } catch {
                closeBody()
                let taskError = ErrorMapping.requestBuildFailure(error, url: hop.url)
                return await eventLoop.flatSubmit { sink.abandon(taskError) }.outcome()
            }
            let config = AttemptDelegate.Config(
                url: hop.url, idleTimeout: Self.amount(request.requestTimeout),
                progressInterval: Self.amount(request.progressInterval), bytesToSend: sendsBody ? bytesToSend : nil,
                allowInsecureRedirects: request.allowInsecureRedirects, proxy: proxy, proxyRules: request.proxyRules,
                followsRedirects: forwarder == nil, visited: hop.visited,
                auth: .init(credentials: request.credentials,
                            answered: authorization != nil ? answered : nil, answers: answers),
                method: method, sendsBody: sendsBody)
            let delegate = AttemptDelegate(eventLoop: eventLoop, config: config, attempt: self, observer: observer,
                                           sink: sink, body: body, limiter: request.rateLimiter)
            logger.debug("starting attempt", metadata: [
                "url": "\(hop.url)", "method": "\(method)", "proxy": "\(proxy.map(String.init(describing:)) ?? "none")",
                "forwarded": "\(forwarder != nil)",
            ])
            let task = execute(httpRequest, delegate: delegate, client: client, forwarder: forwarder, eventLoop: eventLoop)
            let stopNow = control.withLockedValue { c -> Bool in
                c.task = task
                return c.stopRequested
            }
            delegate.attach(task)
            if firstRequest, let primary { primary.download.started(primary) }
            firstRequest = false
            if stopNow { task.fail(reason: EngineAbort.stopped) }

            let result: Result<Void, Error>
            do {
                try await task.futureResult.get()
                result = .success(())
            } catch {
                result = .failure(error)
            }
            control.withLockedValue { $0.task = nil }
            if let next = (try? await eventLoop.submit({ delegate.takeNextHop() }).get()) ?? nil, !isStopRequested {
                hop = next
                // The request that got this response (redirects AsyncHTTPClient followed may have made it a GET).
                method = next.method
                sendsBody = sendsBody && next.sendsBody
                if let challenge = next.challenge, let credentials = next.credentials {
                    // A 401 answered: the same URL again, with the credentials (a further request of a download
                    // to the same origin sends them at once, the nonce count going on).
                    logger.debug("answering the server's challenge", metadata: ["url": "\(next.url)", "challenge": "\(challenge.summary)"])
                    authorization = HTTPAuthentication.authorization(
                        for: challenge, credentials: credentials, method: method,
                        uri: HTTPAuthentication.requestTarget(next.url))
                    answered = (next.url, challenge)
                    answers += 1
                    control.withLockedValue { $0.answered = (challenge, HTTPAuthentication.origin(next.url), credentials, 1) }
                    continue
                }
                authorization = nil // a redirect: a 401 there is answered anew
                logger.debug("redirected to another proxy's client", metadata: ["url": "\(next.url)"])
                (method, sendsBody) = AttemptDelegate.Hop.afterRedirect(next.status, method: method, sendsBody: sendsBody)
                continue
            }
            var outcome = await eventLoop.flatSubmit { delegate.finish(result: result) }.outcome()
            closeBody()
            if case .failure(let error) = result, let proxy, proxy.kind == .http,
               (error as? HTTPClientError) == .invalidProxyResponse, case .failed(var failure, let response) = outcome,
               failure.error.code == TaskErrorCode.proxyFailure,
               let answer = await ProxyProbe.connectAnswer(proxy: proxy, url: hop.url, eventLoop: eventLoop) {
                failure.error = ErrorMapping.tunnelRefused(proxy: proxy, url: hop.url, answer: answer)
                outcome = .failed(failure, response: response)
            }
            logger.debug("attempt ended", metadata: ["outcome": "\(Self.summary(outcome))"])
            return outcome
        }
    }

    /// The `Authorization` of a further request to `url`: the credentials answering the first request's challenge
    /// again (Digest with the next nonce count), when `url` is on their origin.
    private func authorization(for url: String) -> [(String, String)] {
        let origin = HTTPAuthentication.origin(url)
        guard origin != nil,
              let (challenge, credentials, count) = control.withLockedValue({ c -> (AuthChallenge, Credentials, Int)? in
                  guard let a = c.answered, a.origin == origin else { return nil }
                  c.answered!.count += 1
                  return (a.challenge, a.credentials, a.count + 1)
              }),
              let value = HTTPAuthentication.authorization(for: challenge, credentials: credentials, method: request.method,
                                                           uri: HTTPAuthentication.requestTarget(url), count: count)
        else { return [] }
        return [("Authorization", value)]
    }

    /// Sends `request` on its transport: forwarded to an HTTP proxy, or AsyncHTTPClient's `client`.
    private func execute(_ request: HTTPClient.Request, delegate: AttemptDelegate, client: HTTPClient,
                         forwarder: ProxyForwarder?, eventLoop: EventLoop) -> any RunningRequest {
        if let forwarder { return forwarder.execute(request: request, delegate: delegate, eventLoop: eventLoop) }
        return client.execute(request: request, delegate: delegate, eventLoop: .delegateAndChannel(on: eventLoop),
                              logger: logger)
    }

    /// Leases the client of `proxy` for the rest of the attempt (every lease ends with it: `releaseClients`).
    private func lease(_ proxy: ProxyServer?) throws(HTTPClients.TooManyProxies) -> ProxyClient {
        let client = try clients.lease(for: proxy)
        control.withLockedValue { $0.leased.append(proxy) }
        return client
    }

    /// Ends every lease the attempt took (when it has ended, its further requests included).
    private func releaseClients() {
        for proxy in control.withLockedValue({ c -> [ProxyServer?] in defer { c.leased = [] }; return c.leased }) {
            clients.release(proxy)
        }
    }

    /// A failed outcome made transient (retried with backoff).
    private static func transient(_ outcome: AttemptOutcome) -> AttemptOutcome {
        guard case .failed(var failure, let response) = outcome else { return outcome }
        failure.isTransient = true
        return .failed(failure, response: response)
    }

    /// Opens and prepares a download's partial file (off the event loop).
    private func openPartialFile(_ target: PartialFileTarget, eventLoop: EventLoop) async
        -> Result<PartialFileSink, FailedOpen> {
        let writer: PartialWriter
        do {
            writer = try await PartialWriter.open(path: target.path, durable: target.durable,
                                                  label: "halftunesd.transfer.\(request.taskID)",
                                                  floor: target.freeSpaceFloor, account: target.diskAccount)
        } catch {
            let fileError = error as? FileIOError
                ?? FileIOError(operation: "open", path: target.path, errno: 5 /* EIO */)
            logger.warning("cannot prepare the partial file", metadata: ["error": "\(fileError)"])
            let left = PartialFile.length(path: target.path).map { target.durable.clipped(to: $0) } ?? ByteRanges()
            return .failure(FailedOpen(outcome: PartialFileOutcome.fileFailure(fileError, durable: left)))
        }
        let ifRange = target.validators?.ifRangeValue
        let requestedOffset = ifRange != nil ? writer.kept : 0
        let config = PartialFileSink.Config(url: request.url, role: .primary(.init(
            requestedOffset: requestedOffset, kept: writer.keptRanges.count,
            sentIfRange: requestedOffset > 0 ? ifRange : nil, requestValidators: target.validators,
            expectedLength: target.expectedLength)))
        logger.debug("partial file prepared", metadata: ["offset": "\(requestedOffset)", "kept": "\(writer.keptRanges)"])
        let settings = SegmentedDownload.Settings(checkpointInterval: Self.amount(target.checkpointInterval),
                                                  progressInterval: Self.amount(request.progressInterval),
                                                  maxConnections: target.maxConnections)
        let download = SegmentedDownload(eventLoop: eventLoop, writer: writer, attempt: self, observer: observer,
                                         settings: settings)
        control.withLockedValue { $0.download = download }
        return .success(download.makePrimary(config))
    }

    /// Starts a download's further request (a segment) to `url`, on the attempt's event loop. Its end goes to
    /// the download like the first request's.
    /// It goes through the proxy its URL calls for (the first request's last hop's, but for a restart from zero).
    func launchSegment(_ sink: PartialFileSink, url: String, eventLoop: EventLoop) {
        let id = sink.config.id
        let proxy = request.proxyRules.proxy(for: url)
        let leased = Result { () throws(HTTPClients.TooManyProxies) in try lease(proxy) }
        let forwarder = request.proxyRules.forwards(url, via: proxy) ? (try? leased.get())?.forwarder : nil
        let config = AttemptDelegate.Config(
            url: url, idleTimeout: Self.amount(request.requestTimeout),
            progressInterval: Self.amount(request.progressInterval), bytesToSend: nil,
            allowInsecureRedirects: request.allowInsecureRedirects, proxy: proxy, followsRedirects: forwarder == nil)
        let delegate = AttemptDelegate(eventLoop: eventLoop, config: config, attempt: self, observer: observer,
                                       sink: sink, body: nil, limiter: request.rateLimiter)
        let httpRequest: HTTPClient.Request
        let client: HTTPClient
        do {
            client = try leased.get().client
            httpRequest = try makeHTTPRequest(url: url, method: request.method, body: nil,
                                              extraHeaders: sink.requestHeaders + authorization(for: url))
        } catch {
            eventLoop.execute { _ = delegate.finish(result: .failure(error)) }
            return
        }
        logger.debug("starting segment", metadata: ["segment": "\(id)", "range": "\(sink.requestHeaders.first?.1 ?? "")"])
        let task = execute(httpRequest, delegate: delegate, client: client, forwarder: forwarder, eventLoop: eventLoop)
        let stopNow = control.withLockedValue { c -> Bool in
            c.segments[id] = task
            return c.stopRequested
        }
        delegate.attach(task)
        if stopNow { task.fail(reason: EngineAbort.stopped) }
        task.futureResult.hop(to: eventLoop).whenComplete { result in
            self.control.withLockedValue { _ = $0.segments.removeValue(forKey: id) }
            _ = delegate.finish(result: result.map { _ in () })
        }
    }

    private struct FailedOpen: Error {
        var outcome: AttemptOutcome
    }

    private func makeHTTPRequest(url: String, method: String, body: HTTPClient.Body?, extraHeaders: [(String, String)])
        throws -> HTTPClient.Request {
        var headers = HTTPHeaders()
        // The session's and task's own credentials and cookies go only to the task URL's origin: AsyncHTTPClient
        // strips them on a redirect to another origin, and a hop or further request the attempt makes does too.
        let foreign = HTTPAuthentication.origin(url) != request.credentialsOrigin
        // A request that was to carry a body and does not (a redirect made it a GET) sends no Content-Type either.
        let bodyDropped = body == nil && request.body != nil
        for (name, value) in request.headers {
            let lowered = name.lowercased()
            if ["content-length", "transfer-encoding", "accept-encoding", "range", "if-range"].contains(lowered) { continue }
            if foreign, ["authorization", "cookie", "proxy-authorization", "origin"].contains(lowered) { continue }
            if bodyDropped, lowered == "content-type" { continue }
            headers.add(name: name, value: value)
        }
        headers.replaceOrAdd(name: "Accept-Encoding", value: "identity")
        if !headers.contains(name: "User-Agent") {
            headers.add(name: "User-Agent", value: "halftunesd/\(HalfTunes.version)")
        }
        if body != nil, !headers.contains(name: "Content-Type") {
            headers.add(name: "Content-Type", value: "application/octet-stream")
        }
        for (name, value) in extraHeaders {
            headers.replaceOrAdd(name: name, value: value)
        }
        return try HTTPClient.Request(url: url, method: HTTPMethod(rawValue: method), headers: headers, body: body)
    }

    /// A log line's worth of an outcome (without a response body).
    static func summary(_ outcome: AttemptOutcome) -> String {
        switch outcome {
        case .completed(let total, _): return "completed (\(total) bytes)"
        case .responded(let response): return "completed (HTTP \(response.status), \(response.bodyBytes) body bytes)"
        case .stopped(let durable): return "stopped (\(durable.count) bytes durable)"
        case .failed(let failure, let response):
            return "failed: \(failure.error.message)" + (response.map { " (HTTP \($0.status))" } ?? "")
        }
    }

    private static func amount(_ seconds: Double) -> TimeAmount {
        let clamped = min(max(seconds, 0.001), 1e9)
        return .nanoseconds(Int64(clamped * 1e9))
    }
}

extension EventLoopFuture where Value == AttemptOutcome {
    /// The outcome; should the future fail (sinks never fail it), a transient internal error.
    func outcome() async -> AttemptOutcome {
        do {
            return try await get()
        } catch {
            let taskError = TaskError(code: TaskErrorCode.internalError, message: "The attempt ended abnormally: \(error)")
            return .failed(TransferFailure(error: taskError, isTransient: true, durableBytes: 0))
        }
    }
}
