// One HTTP attempt of a download into its partial file: resume or restart, stream, checkpoint, stop.
import AsyncHTTPClient
import HalfTunesProtocol
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

public final class Transfer: Sendable {
    private struct Control {
        var runCalled = false
        var stopRequested = false
        var task: HTTPClient.Task<Void>?
        var bytesReceived: Int64
    }

    private let request: TransferRequest
    private let client: HTTPClient
    private let observer: any TransferObserver
    private let logger: Logger
    private let control: NIOLockedValueBox<Control>

    public init(request: TransferRequest, client: HTTPClient, observer: TransferObserver, logger: Logger) {
        self.request = request
        self.client = client
        self.observer = observer
        var logger = logger
        logger[metadataKey: "task"] = "\(request.taskID)"
        self.logger = logger
        self.control = NIOLockedValueBox(Control(bytesReceived: max(0, request.durableOffset)))
    }

    public var taskID: Int64 { request.taskID }

    /// The bandwidth limits this transfer's body is metered against.
    var rateLimiter: RateLimiter? { request.rateLimiter }

    /// Current total bytes in the partial (durable or not).
    public var bytesReceived: Int64 { control.withLockedValue { $0.bytesReceived } }

    func setBytesReceived(_ value: Int64) {
        control.withLockedValue { $0.bytesReceived = value }
    }

    var isStopRequested: Bool { control.withLockedValue { $0.stopRequested } }

    /// Idempotent, thread-safe; makes run() return .stopped (even if called before run() starts or while the
    /// request is connecting). Data already received is flushed, fsynced and checkpointed first.
    public func stop() {
        let task = control.withLockedValue { c -> HTTPClient.Task<Void>? in
            c.stopRequested = true
            return c.task
        }
        task?.fail(reason: EngineAbort.stopped)
    }

    /// Runs one attempt to its end. Call once.
    public func run() async -> TransferOutcome {
        let first = control.withLockedValue { c -> Bool in
            defer { c.runCalled = true }
            return !c.runCalled
        }
        guard first else {
            let error = TaskError(code: TaskErrorCode.internalError,
                                  message: "Transfer.run() was called twice for task \(request.taskID)")
            return .failed(TransferFailure(error: error, isTransient: false, durableBytes: 0))
        }
        let writer: PartialWriter
        do {
            writer = try await PartialWriter.open(path: request.partialPath, durableOffset: request.durableOffset,
                                                  label: "halftunesd.transfer.\(request.taskID)")
        } catch {
            let fileError = error as? FileIOError
                ?? FileIOError(operation: "open", path: request.partialPath, errno: 5 /* EIO */)
            logger.warning("cannot prepare the partial file", metadata: ["error": "\(fileError)"])
            let left = PartialFile.length(path: request.partialPath).map { min($0, max(0, request.durableOffset)) } ?? 0
            return TransferOutcomeRules.fileFailure(fileError, durable: left)
        }
        setBytesReceived(writer.kept)

        let ifRange = request.validators?.ifRangeValue
        let requestedOffset = ifRange != nil ? writer.kept : 0
        if isStopRequested {
            return await finishWithoutRequest(writer) { .stopped(durableBytes: $0.durable) }
        }
        let httpRequest: HTTPClient.Request
        do {
            httpRequest = try makeHTTPRequest(offset: requestedOffset)
        } catch {
            let taskError = ErrorMapping.requestBuildFailure(error, url: request.url)
            return await finishWithoutRequest(writer) {
                .failed(TransferFailure(error: taskError, isTransient: false, durableBytes: $0.durable))
            }
        }

        let eventLoop = client.eventLoopGroup.next()
        let config = TransferDelegate.Config(
            url: request.url, requestedOffset: requestedOffset, kept: writer.kept,
            sentIfRange: requestedOffset > 0 ? ifRange : nil, requestValidators: request.validators,
            expectedLength: request.expectedLength, idleTimeout: Self.amount(request.requestTimeout),
            checkpointInterval: Self.amount(request.checkpointInterval),
            progressInterval: Self.amount(request.progressInterval),
            allowInsecureRedirects: request.allowInsecureRedirects)
        let delegate = TransferDelegate(eventLoop: eventLoop, config: config, writer: writer, transfer: self,
                                        observer: observer)
        logger.debug("starting transfer", metadata: [
            "url": "\(request.url)", "offset": "\(requestedOffset)", "kept": "\(writer.kept)",
        ])
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
        let outcome: TransferOutcome
        do {
            outcome = try await eventLoop.flatSubmit { delegate.finish(result: result) }.get()
        } catch {
            let taskError = TaskError(code: TaskErrorCode.internalError, message: "Transfer ended abnormally: \(error)")
            outcome = .failed(TransferFailure(error: taskError, isTransient: true, durableBytes: writer.snapshot.durable))
        }
        logger.debug("transfer ended", metadata: ["outcome": "\(outcome)"])
        return outcome
    }

    private func makeHTTPRequest(offset: Int64) throws -> HTTPClient.Request {
        var headers = HTTPHeaders()
        for (name, value) in request.headers {
            switch name.lowercased() {
            case "range", "if-range", "accept-encoding": continue
            default: headers.add(name: name, value: value)
            }
        }
        headers.replaceOrAdd(name: "Accept-Encoding", value: "identity")
        if !headers.contains(name: "User-Agent") {
            headers.add(name: "User-Agent", value: "halftunesd/\(HalfTunes.version)")
        }
        for (name, value) in ResumeDecision.rangeHeaders(offset: offset, validators: request.validators) {
            headers.replaceOrAdd(name: name, value: value)
        }
        return try HTTPClient.Request(url: request.url, method: .GET, headers: headers)
    }

    /// Ends an attempt that never sent a request: fsync, checkpoint, close.
    private func finishWithoutRequest(_ writer: PartialWriter,
                                      _ make: @escaping @Sendable (PartialWriter.Snapshot) -> TransferOutcome) async
        -> TransferOutcome {
        let observer = self.observer
        return await withCheckedContinuation { continuation in
            writer.finish([], checkpoint: { durable in
                observer.transferDidCheckpoint(self, durableBytes: durable)
            }, done: { snapshot in
                continuation.resume(returning: make(snapshot))
            })
        }
    }

    private static func amount(_ seconds: Double) -> TimeAmount {
        let clamped = min(max(seconds, 0.001), 1e9)
        return .nanoseconds(Int64(clamped * 1e9))
    }
}
