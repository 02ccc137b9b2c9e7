// One plain http request forwarded to an HTTP proxy: sends it, streams the response to the attempt's delegate.
import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// A proxy answered a forwarded request with 407: its `proxyFailure` words, as for a refused tunnel.
struct ProxyRefusal: Error {
    var answer: ProxyProbe.Answer
}

/// Carries one request of an attempt over a connection of `ProxyForwarder`, reporting its life to the
/// `AttemptDelegate` in AsyncHTTPClient's order: head sent, body parts sent, request sent; the response's head
/// (`visited`, then `receivedHead`), its body parts one at a time (the next only once the delegate acknowledged the
/// last: reads are held back meanwhile), its end; or an error. A kept-alive connection that closes before any of
/// the response arrived (the proxy timed it out while it was idle) is replaced by a new one, once. A response the
/// attempt decided against at its head (a redirect it follows as a hop, a 401 it answers) is read to its end when
/// it is small, so the connection is kept for the next hop: the request's future fails only then (or after
/// `drainTimeout`, closing it). Everything but `fail(reason:)` runs on `eventLoop`, the channel's and the delegate's.
final class ForwardedRequest: RunningRequest, @unchecked Sendable {
    enum Inbound {
        case part(HTTPClientResponsePart)
        case failed(Error)
    }

    /// The most body a response decided against is read for its connection's sake, and for how long.
    static let drainLimit = 64 << 10
    static let drainTimeout = TimeAmount.seconds(2)

    let eventLoop: EventLoop
    private let request: HTTPClient.Request
    private let forwarder: ProxyForwarder
    private let promise: EventLoopPromise<Void>

    // Event loop only.
    /// Let go (nil) once the request ended: the delegate holds this request too.
    private var delegate: AttemptDelegate?
    private var done = false
    private var channel: Channel?
    private var handler: ForwardingHandler?
    private var reused = false
    private var retried = false
    private var heardResponse = false
    private var requestSent = false
    private var keepAlive = false
    private var responseHead: HTTPResponseHead?
    private var acknowledging = false
    private var queue = CircularBuffer<Inbound>()
    /// Reading the rest of a response decided against: the error the future fails with once it ended.
    private var draining: (failure: Error, deadline: Scheduled<Void>)?

    init(request: HTTPClient.Request, delegate: AttemptDelegate, eventLoop: EventLoop, forwarder: ProxyForwarder) {
        self.request = request
        self.delegate = delegate
        self.eventLoop = eventLoop
        self.forwarder = forwarder
        self.promise = eventLoop.makePromise()
    }

    var futureResult: EventLoopFuture<Void> { promise.futureResult }

    /// The delegate has not acknowledged everything it was given: the connection reads nothing more (a response
    /// being drained is read at once).
    var isHoldingBack: Bool { draining == nil && (acknowledging || !queue.isEmpty) }

    func start() {
        guard !done else { return }
        forwarder.connection(on: eventLoop).whenComplete { result in
            switch result {
            case .failure(let error):
                self.fail(reason: error)
            case .success(let (channel, reused)):
                guard !self.done else { return self.forwarder.giveBack(channel) } // stopped meanwhile: unused
                self.use(channel, reused: reused)
            }
        }
    }

    func fail(reason: Error) {
        guard eventLoop.inEventLoop else { return eventLoop.execute { self.fail(reason: reason) } }
        guard !done else { return }
        done = true
        delegate?.receivedError(reason)
        if let abort = reason as? EngineAbort, abort == .decided, canDrain {
            let deadline = eventLoop.scheduleTask(in: Self.drainTimeout) { self.drained(keep: false) }
            draining = (reason, deadline)
            while draining != nil, let next = queue.popFirst() { drain(next) }
            if draining != nil, handler?.takeHeldRead() == true { channel?.read() }
            return
        }
        release(keep: false)
        promise.fail(reason)
    }

    /// What the connection heard (from `ForwardingHandler`).
    func received(_ inbound: Inbound) {
        if draining != nil { return drain(inbound) }
        guard !done else { return }
        if isHoldingBack {
            queue.append(inbound)
        } else {
            process(inbound)
        }
    }

    /// Lets go of the connection (kept for the next request, or closed) and of the delegate.
    private func release(keep: Bool) {
        dropConnection(keep: keep)
        delegate = nil
    }

    private func dropConnection(keep: Bool) {
        handler?.detach()
        if let channel {
            if keep { forwarder.giveBack(channel) } else { channel.close(promise: nil) }
        }
        channel = nil
        handler = nil
        queue.removeAll()
    }

    // MARK: - Keeping the connection of a response decided against

    /// The response's head promised a small body (or none), and the exchange may go on on its connection.
    private var canDrain: Bool {
        guard let head = responseHead, keepAlive, requestSent, channel != nil else { return false }
        if request.method == .HEAD || head.status == .noContent || head.status == .notModified { return true }
        guard let length = head.headers.first(name: "Content-Length").flatMap(Int.init) else { return false }
        return length <= Self.drainLimit
    }

    private func drain(_ inbound: Inbound) {
        switch inbound {
        case .part(.body): break
        case .part(.end): drained(keep: true)
        case .part(.head), .failed: drained(keep: false)
        }
    }

    private func drained(keep: Bool) {
        guard let (failure, deadline) = draining else { return }
        draining = nil
        deadline.cancel()
        release(keep: keep)
        promise.fail(failure)
    }

    // MARK: - Sending

    private func use(_ channel: Channel, reused: Bool) {
        guard let handler = try? channel.pipeline.syncOperations.handler(type: ForwardingHandler.self) else {
            channel.close(promise: nil)
            return fail(reason: HTTPClientError.remoteConnectionClosed)
        }
        self.channel = channel
        self.handler = handler
        self.reused = reused
        handler.current = self
        channel.writeAndFlush(HTTPClientRequestPart.head(forwarder.head(for: request)), promise: nil)
        delegate?.sentHead()
        guard let body = request.body else { return sendEnd(on: channel) }
        let writer = HTTPClient.Body.StreamWriter { part in
            self.eventLoop.flatSubmit {
                guard !self.done, self.channel === channel else { return self.eventLoop.makeFailedFuture(EngineAbort.stopped) }
                let bytes = part.readableBytes
                return channel.writeAndFlush(HTTPClientRequestPart.body(part)).map {
                    if !self.done { self.delegate?.sentPart(bytes) }
                }
            }
        }
        body.stream(writer).hop(to: eventLoop).whenComplete { result in
            guard !self.done, self.channel === channel else { return } // stopped
            switch result {
            case .success: self.sendEnd(on: channel)
            case .failure(let error): self.fail(reason: error)
            }
        }
    }

    private func sendEnd(on channel: Channel) {
        channel.writeAndFlush(HTTPClientRequestPart.end(nil)).whenComplete { result in
            guard !self.done, self.channel === channel else { return }
            switch result {
            case .success:
                self.requestSent = true
                self.delegate?.sentRequest()
            case .failure(let error):
                self.received(.failed(error))
            }
        }
    }

    // MARK: - The response

    private func process(_ inbound: Inbound) {
        switch inbound {
        case .failed(let error):
            if mayRetry {
                retry()
            } else {
                fail(reason: error)
            }
        case .part(.head(let head)):
            heardResponse = true
            if head.status == .proxyAuthenticationRequired {
                return fail(reason: ProxyRefusal(answer: .init(status: 407, reason: head.status.reasonPhrase)))
            }
            keepAlive = head.isKeepAlive
            responseHead = head
            delegate?.visited(request.url.absoluteString, head, task: self)
            guard !done, let delegate else { return }
            acknowledge(delegate.receivedHead(head))
        case .part(.body(let buffer)):
            heardResponse = true
            guard let delegate else { return }
            acknowledge(delegate.receivedBodyPart(buffer))
        case .part(.end):
            done = true
            delegate?.finishedRequest()
            release(keep: keepAlive && requestSent)
            promise.succeed(())
        }
    }

    /// Holds what arrives next until `future` (the delegate's acknowledgement) completes.
    private func acknowledge(_ future: EventLoopFuture<Void>) {
        acknowledging = true
        future.hop(to: eventLoop).whenComplete { result in
            self.acknowledging = false
            if case .failure(let error) = result { return self.fail(reason: error) }
            while !self.done, !self.acknowledging, let next = self.queue.popFirst() { self.process(next) }
            if !self.done, !self.isHoldingBack, self.handler?.takeHeldRead() == true { self.channel?.read() }
        }
    }

    /// A kept-alive connection closed before any of the response came is replaced once, for a request without a
    /// body whose method may be repeated: the proxy may have passed on anything else.
    private var mayRetry: Bool {
        reused && !heardResponse && !retried && request.body == nil
            && [.GET, .HEAD, .OPTIONS, .PUT, .DELETE, .TRACE].contains(request.method)
    }

    /// The kept-alive connection was closed under the request: the same request on a new connection.
    private func retry() {
        retried = true
        dropConnection(keep: false)
        requestSent = false
        forwarder.connect(on: eventLoop).whenComplete { result in
            switch result {
            case .failure(let error):
                self.fail(reason: error)
            case .success(let channel):
                guard !self.done else { return self.forwarder.giveBack(channel) }
                self.use(channel, reused: false)
            }
        }
    }
}
