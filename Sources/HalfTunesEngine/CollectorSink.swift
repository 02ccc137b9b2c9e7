// An upload's or data task's response sink: the capped body in memory, and the outcome it makes.
import AsyncHTTPClient
import HalfTunesCore
import HalfTunesProtocol
import NIOCore
import NIOHTTP1

/// Used on the attempt's event loop only (see `ResponseSink`). Nothing survives the attempt: the response
/// (capped by its `ResponseLimit`) is held until the outcome reports it.
final class CollectorSink: ResponseSink, @unchecked Sendable {
    struct LoopState {
        var status: Int?
        var headers: [(String, String)] = []
        var collector: ResponseCollector
        /// The sink refused the response (too large) or a redirect was refused; the request was failed for it.
        var refused: TaskError?
        /// The response is read and kept, but the outcome is this failure (a 401 with no answer).
        var failsAfterReading: TaskError?
        var received: ProgressPacer
        /// After redirects (set with the response head).
        var finalURL = ""
        /// The response's content coding undone (gzip, deflate), if it has one: the body kept is the decoded one.
        var decoder: ContentDecoder?
        /// The body bytes kept (decoded ones when decoding).
        var decoded: Int64 = 0
    }

    let eventLoop: EventLoop
    let method: String
    let limit: ResponseLimit
    let attempt: Attempt
    let observer: any AttemptObserver
    private let box: NIOLoopBoundBox<LoopState>

    init(eventLoop: EventLoop, method: String, limit: ResponseLimit, progressInterval: TimeAmount, attempt: Attempt,
         observer: any AttemptObserver) {
        self.eventLoop = eventLoop
        self.method = method
        self.limit = limit
        self.attempt = attempt
        self.observer = observer
        let state = LoopState(collector: ResponseCollector(limit: limit),
                              received: ProgressPacer(interval: progressInterval, now: NIODeadline.now().seconds))
        self.box = .makeBoxSendingValue(state, eventLoop: eventLoop)
    }

    /// A body kept in memory may come compressed (it is decoded here, as URLSession does).
    var requestHeaders: [(String, String)] { [("Accept-Encoding", ContentDecoder.acceptEncoding)] }

    func attached(_ task: any RunningRequest) {}

    var isHoldingBack: Bool { false }

    func refuse(_ error: TaskError) {
        box.withValue { $0.refused = error }
    }

    func refuseAfterReading(_ error: TaskError) -> Bool {
        box.withValue { $0.failsAfterReading = error }
        return true
    }

    func head(_ head: HTTPResponseHead, finalURL: String) -> Bool {
        box.withValue { s -> Bool in
            let status = Int(head.status.code)
            let headers = head.headers.map { ($0.name, $0.value) }
            s.status = status
            s.headers = headers
            s.finalURL = finalURL
            if let refusal = ExchangeRules.refusal(status: status, headers: headers, method: self.method,
                                                   limit: self.limit, url: finalURL) {
                s.refused = refusal
                return false
            }
            // A HEAD's, 204's or 304's answer has no body to decode, whatever its headers say.
            if self.method != "HEAD", ![204, 304].contains(status) {
                s.decoder = ContentDecoder(headers: headers, maxDecodedBytes: Self.maxDecoded(self.limit))
            }
            return true
        }
    }

    /// Keeps the decoded bytes of a body part (the part itself when the response has no coding); false when the
    /// body is refused (too large, or not its coding's data).
    private static func keep(_ buffer: ByteBuffer, last: Bool, state s: inout LoopState, limit: ResponseLimit) -> Bool {
        guard let decoder = s.decoder else { // kept as sent: no array per body part
            guard s.collector.append(buffer.readableBytesView) else {
                s.refused = ExchangeRules.tooLarge(url: s.finalURL, bytes: nil, limit: limit)
                return false
            }
            s.decoded += Int64(buffer.readableBytes)
            return true
        }
        let parts: [ByteBuffer]
        do {
            parts = try last ? decoder.finish() : decoder.decode(buffer)
        } catch where error.tooLarge {
            s.refused = ExchangeRules.tooLarge(url: s.finalURL, bytes: nil, limit: limit)
            return false
        } catch {
            s.refused = TaskError(code: TaskErrorCode.invalidResponse,
                                  message: "The response from \(URLText.hostDescription(s.finalURL)) says Content-Encoding: "
                                      + "\(decoder.coding), but its body is not \(decoder.coding) data (\(error.reason))")
            return false
        }
        for part in parts where !s.collector.append(part.readableBytesView) {
            s.refused = ExchangeRules.tooLarge(url: s.finalURL, bytes: nil, limit: limit)
            return false
        }
        s.decoded += Int64(parts.reduce(0) { $0 + $1.readableBytes })
        return true
    }

    /// What a coded body may inflate to: one byte past a data task's limit (so going past it is seen), and for an
    /// upload's response, whose beginning is kept, 16 MiB.
    static func maxDecoded(_ limit: ResponseLimit) -> Int {
        limit.overflow == .fail ? limit.maxBytes + 1 : Int(ResponseLimit.dataDefaultBytes)
    }

    /// The length the progress is reported against: the Content-Length of a body kept as sent; unknown for a
    /// decoded one (the header counts the coded bytes).
    private static func expectedLength(_ s: LoopState) -> Int64? {
        s.decoder == nil ? ResumeDecision.contentLength(s.headers) : nil
    }

    func bodyPart(_ buffer: ByteBuffer, now: NIODeadline) -> EventLoopFuture<Void>? {
        let (accepted, report, expected) = box.withValue { s -> (Bool, ProgressPacer.Report?, Int64?) in
            guard s.refused == nil else { return (false, nil, nil) }
            let before = s.decoded
            guard Self.keep(buffer, last: false, state: &s, limit: self.limit) else { return (false, nil, nil) }
            let report = s.received.add(s.decoded - before, now: now.seconds)
            return (true, report, report == nil ? nil : Self.expectedLength(s))
        }
        guard accepted else { return nil }
        if let report { reportReceived(report, expected: expected) }
        return eventLoop.makeSucceededVoidFuture()
    }

    func requestFailed() {
        box.withValue { s in
            s.decoder?.close()
            s.decoder = nil
        }
    }

    func finish(_ end: AttemptEnd) -> EventLoopFuture<AttemptOutcome> {
        let (s, report) = box.withValue { s in
            // A decoded body's end: what the decoder still holds, or the refusal of a coded stream cut short.
            if case .success = end.result, end.responseEnded, s.refused == nil, s.decoder != nil {
                let before = s.decoded
                if Self.keep(ByteBuffer(), last: true, state: &s, limit: self.limit) {
                    _ = s.received.add(s.decoded - before, now: NIODeadline.now().seconds)
                }
            }
            s.decoder?.close()
            s.decoder = nil
            return (s, s.received.flush(now: NIODeadline.now().seconds))
        }
        if let report { reportReceived(report, expected: Self.expectedLength(s)) }
        return eventLoop.makeSucceededFuture(Self.outcome(end: end, state: s, stopRequested: attempt.isStopRequested))
    }

    func abandon(_ error: TaskError?) -> EventLoopFuture<AttemptOutcome> {
        guard let error else { return eventLoop.makeSucceededFuture(.stopped(durableBytes: 0)) }
        return eventLoop.makeSucceededFuture(.failed(TransferFailure(error: error, isTransient: false, durableBytes: 0)))
    }

    private func reportReceived(_ report: ProgressPacer.Report, expected: Int64?) {
        observer.attemptDidReceive(attempt, bytes: report.delta, totalBytes: report.total, totalBytesExpected: expected)
    }

    /// Precedence: a whole response decides; then stop(); then the sink's own refusal (or a refused
    /// redirect); then the idle timeout; then the transport error.
    static func outcome(end: AttemptEnd, state s: LoopState, stopRequested: Bool) -> AttemptOutcome {
        if case .success = end.result, let status = s.status, end.responseEnded, s.refused == nil {
            let response = s.collector.response(status: status, headers: s.headers)
            if let failure = s.failsAfterReading {
                return .failed(TransferFailure(error: failure, isTransient: false, durableBytes: 0), response: response)
            }
            return ExchangeRules.outcome(status: status, headers: s.headers, response: response,
                                         now: POSIX.wallClock(), url: end.finalURL)
        }
        if stopRequested { return .stopped(durableBytes: 0) }
        if let refused = s.refused ?? s.failsAfterReading {
            var response = s.status.map { s.collector.response(status: $0, headers: s.headers) }
            if refused.code == TaskErrorCode.responseTooLarge {
                // Refused at the head (Content-Length) or while reading: no body is kept either way.
                response?.body = nil
                response?.truncated = true
            }
            return .failed(TransferFailure(error: refused, isTransient: false, durableBytes: 0), response: response)
        }
        if end.timedOut {
            let error = TaskError(code: TaskErrorCode.timedOut,
                                  message: "No data to or from \(URLText.hostDescription(end.finalURL)) within the request timeout")
            return .failed(TransferFailure(error: error, isTransient: true, durableBytes: 0))
        }
        switch end.result {
        case .failure(let error as UploadSourceError):
            return .failed(TransferFailure(error: error.taskError, isTransient: false, durableBytes: 0))
        case .failure(let error):
            let (taskError, transient) = ErrorMapping.classify(error, url: end.finalURL, proxy: end.proxy)
            return .failed(TransferFailure(error: taskError, isTransient: transient, durableBytes: 0))
        case .success:
            let error = TaskError(code: TaskErrorCode.connectionLost,
                                  message: "The exchange with \(end.finalURL) ended without a complete response")
            return .failed(TransferFailure(error: error, isTransient: true, durableBytes: 0))
        }
    }
}
