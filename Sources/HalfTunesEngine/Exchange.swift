// One HTTP attempt of an upload (a file as the request body) or a data task (an in-memory response).
import AsyncHTTPClient
import HalfTunesProtocol
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// Like `Transfer` for downloads, but nothing survives the attempt: an upload sends its file from byte 0
/// every time, and the response (capped) is held in memory until the outcome reports it.
public final class Exchange: Sendable {
    private struct Control {
        var runCalled = false
        var stopRequested = false
        var task: HTTPClient.Task<Void>?
    }

    private let request: ExchangeRequest
    private let client: HTTPClient
    private let observer: any ExchangeObserver
    private let logger: Logger
    private let control = NIOLockedValueBox(Control())

    public init(request: ExchangeRequest, client: HTTPClient, observer: any ExchangeObserver, logger: Logger) {
        self.request = request
        self.client = client
        self.observer = observer
        var logger = logger
        logger[metadataKey: "task"] = "\(request.taskID)"
        self.logger = logger
    }

    public var taskID: Int64 { request.taskID }

    private var isStopRequested: Bool { control.withLockedValue { $0.stopRequested } }

    /// Idempotent, thread-safe; makes run() return `.stopped` (unless a whole response already arrived).
    public func stop() {
        let task = control.withLockedValue { c -> HTTPClient.Task<Void>? in
            c.stopRequested = true
            return c.task
        }
        task?.fail(reason: EngineAbort.stopped)
    }

    /// Runs one attempt to its end. Call once.
    public func run() async -> ExchangeOutcome {
        let first = control.withLockedValue { c -> Bool in
            defer { c.runCalled = true }
            return !c.runCalled
        }
        guard first else {
            let error = TaskError(code: TaskErrorCode.internalError,
                                  message: "Exchange.run() was called twice for task \(request.taskID)")
            return .failed(TransferFailure(error: error, isTransient: false, durableBytes: 0), response: nil)
        }
        let eventLoop = client.eventLoopGroup.next()
        var body: UploadBodyStream?
        var bytesToSend: Int64?
        if let path = request.uploadFile {
            let source: UploadSource
            do {
                source = try UploadSource.open(path: path, expected: request.uploadFileID)
            } catch {
                logger.warning("cannot open the file to upload", metadata: ["error": "\(error)"])
                return .failed(TransferFailure(error: error.taskError, isTransient: false, durableBytes: 0), response: nil)
            }
            logger.debug("upload source opened", metadata: [
                "file": "\(path)", "bytes": "\(source.size)", "uid": "\(source.openedAsUID)",
            ])
            observer.exchangeDidOpenSource(self, bytesExpectedToSend: source.size)
            bytesToSend = source.size
            body = UploadBodyStream(source: source, eventLoop: eventLoop, limiter: request.rateLimiter,
                                    label: "halftunesd.upload.\(request.taskID)")
        }
        let httpRequest: HTTPClient.Request
        do {
            httpRequest = try makeHTTPRequest(body: body?.body)
        } catch {
            if let body { eventLoop.execute { body.close() } }
            return .failed(TransferFailure(error: ErrorMapping.requestBuildFailure(error, url: request.url),
                                           isTransient: false, durableBytes: 0), response: nil)
        }
        if isStopRequested {
            if let body { eventLoop.execute { body.close() } }
            return .stopped
        }
        let config = ExchangeDelegate.Config(
            url: request.url, method: request.method, limit: request.responseLimit,
            idleTimeout: Self.amount(request.requestTimeout), progressInterval: Self.amount(request.progressInterval),
            bytesToSend: bytesToSend, allowInsecureRedirects: request.allowInsecureRedirects)
        let delegate = ExchangeDelegate(eventLoop: eventLoop, config: config, exchange: self, observer: observer,
                                        body: body, limiter: request.rateLimiter)
        logger.debug("starting exchange", metadata: ["url": "\(request.url)", "method": "\(request.method)"])
        let task = client.execute(request: httpRequest, delegate: delegate,
                                  eventLoop: .delegateAndChannel(on: eventLoop), logger: logger)
        let stopNow = control.withLockedValue { c -> Bool in
            c.task = task
            return c.stopRequested
        }
        delegate.attach(task)
        if stopNow { task.fail(reason: EngineAbort.stopped) }

        let result: Result<Void, Error>
        do {
            try await task.get()
            result = .success(())
        } catch {
            result = .failure(error)
        }
        control.withLockedValue { $0.task = nil }
        let stopRequested = isStopRequested
        let outcome: ExchangeOutcome
        do {
            outcome = try await eventLoop.submit { delegate.finish(result: result, stopRequested: stopRequested) }.get()
        } catch {
            let taskError = TaskError(code: TaskErrorCode.internalError, message: "Exchange ended abnormally: \(error)")
            outcome = .failed(TransferFailure(error: taskError, isTransient: true, durableBytes: 0), response: nil)
        }
        logger.debug("exchange ended", metadata: ["outcome": "\(Self.summary(outcome))"])
        return outcome
    }

    private func makeHTTPRequest(body: HTTPClient.Body?) throws -> HTTPClient.Request {
        var headers = HTTPHeaders()
        for (name, value) in request.headers {
            switch name.lowercased() {
            case "content-length", "transfer-encoding", "accept-encoding", "range", "if-range": continue
            default: headers.add(name: name, value: value)
            }
        }
        headers.replaceOrAdd(name: "Accept-Encoding", value: "identity")
        if !headers.contains(name: "User-Agent") {
            headers.add(name: "User-Agent", value: "halftunesd/\(HalfTunes.version)")
        }
        if body != nil, !headers.contains(name: "Content-Type") {
            headers.add(name: "Content-Type", value: "application/octet-stream")
        }
        return try HTTPClient.Request(url: request.url, method: HTTPMethod(rawValue: request.method), headers: headers,
                                      body: body)
    }

    /// A log line's worth of an outcome (without the response body).
    static func summary(_ outcome: ExchangeOutcome) -> String {
        switch outcome {
        case .completed(let response): return "completed (HTTP \(response.status), \(response.bodyBytes) body bytes)"
        case .stopped: return "stopped"
        case .failed(let failure, let response):
            return "failed: \(failure.error.message)" + (response.map { " (HTTP \($0.status))" } ?? "")
        }
    }

    private static func amount(_ seconds: Double) -> TimeAmount {
        let clamped = min(max(seconds, 0.001), 1e9)
        return .nanoseconds(Int64(clamped * 1e9))
    }
}
