// One accepted connection: queues requests, writes each response with backpressure, throttling, stalls, drops.
import NIOCore
import NIOHTTP1

final class OriginConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = ByteBuffer

    /// Largest single body write; the stored body is sliced, never copied.
    static let sliceSize = 256 * 1024
    /// Throttled bodies are written on this tick.
    static let throttleTick = TimeAmount.milliseconds(15)

    private final class Sending {
        var plan: ResponsePlan
        var body: ByteBuffer
        var total: Int64
        var queued: Int64 = 0
        var stallID: Int? = nil
        var finishing = false
        var tokens: Double = 0
        var lastRefill = NIODeadline.now()
        var throttleTask: Scheduled<Void>? = nil
        var lastWrite: EventLoopFuture<Void>
        /// Counted in the origin's responses being sent (`OriginCore.sendingChanged`) until it ends.
        var counted = false

        init(plan: ResponsePlan, body: ByteBuffer, lastWrite: EventLoopFuture<Void>) {
            self.plan = plan
            self.body = body
            self.total = Int64(body.readableBytes)
            self.lastWrite = lastWrite
        }
    }

    private let core: OriginCore
    /// This connection's number (`RecordedRequest.connection`).
    private let connection: Int
    private var context: ChannelHandlerContext?
    private var current: (index: Int, keepAlive: Bool, http10: Bool)? = nil
    private var queue: [(index: Int, keepAlive: Bool, http10: Bool)] = []
    private var sending: Sending? = nil
    private var busy = false
    private var closed = false

    init(core: OriginCore) {
        self.core = core
        self.connection = core.state.withLockedValue { s in
            s.connectionsAccepted += 1
            return s.connectionsAccepted
        }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        abortSending()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            let index = core.recordArrival(head, connection: connection)
            current = (index, head.isKeepAlive, head.version.major == 1 && head.version.minor == 0)
            core.beginUpload(request: index, head: head)
        case .body(let buffer):
            // Upload endpoints (OriginUploads.swift) receive the body; a configured drop closes the connection.
            if let request = current, !closed, core.receiveUploadBody(request: request.index, buffer) {
                closed = true
                context.close(promise: nil)
            }
        case .end:
            guard let request = current else { return }
            current = nil
            core.finishUpload(request: request.index)
            queue.append(request)
            startNextIfIdle()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        abortSending()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Malformed requests and I/O errors: give up on the connection, like nginx's 400-and-close.
        closed = true
        abortSending()
        context.close(promise: nil)
    }

    private func abortSending() {
        guard let s = sending else { return }
        sending = nil
        s.throttleTask?.cancel()
        ended(s)
        if let id = s.stallID { core.unregisterStall(path: s.plan.path, id: id) }
        core.markTruncated(request: s.plan.requestIndex)  // the body's last write never completed
    }

    private func startNextIfIdle() {
        guard !busy, !closed, let context, !queue.isEmpty else { return }
        let request = queue.removeFirst()
        busy = true
        let plan = core.mutate(path: nil) {
            $0.plan(request: request.index, keepAlive: request.keepAlive, isHTTP10: request.http10)
        }
        let headWrite = context.write(wrapOutboundOut(plan.head))
        switch plan.body {
        case .none:
            context.flush()
            headWrite.assumeIsolated().whenComplete { _ in self.responseDone(keepAlive: plan.keepAlive) }
        case .page(let page):
            let pageWrite = context.writeAndFlush(wrapOutboundOut(page))
            pageWrite.assumeIsolated().whenComplete { _ in self.responseDone(keepAlive: plan.keepAlive) }
        case .resource(let body):
            let s = Sending(plan: plan, body: body, lastWrite: headWrite)
            s.counted = true
            core.sendingChanged(path: plan.path, by: 1)
            if let bps = plan.bytesPerSecond { s.tokens = Self.throttleSlice(bps) }
            sending = s
            pump()
        }
    }

    private static func throttleSlice(_ bytesPerSecond: Int) -> Double {
        max(1, Double(bytesPerSecond) * 0.015)
    }

    /// A resource body is no longer being sent (complete, dropped, or the connection went away).
    private func ended(_ s: Sending) {
        guard s.counted else { return }
        s.counted = false
        core.sendingChanged(path: s.plan.path, by: -1)
    }

    private func responseDone(keepAlive: Bool) {
        busy = false
        if let s = sending { ended(s) }
        sending = nil
        guard !closed, let context else { return }
        if keepAlive {
            startNextIfIdle()
        } else {
            closed = true
            context.close(promise: nil)
        }
    }

    /// Writes as much of the current body as writability, throttle, stall and drop points allow.
    private func pump() {
        guard !closed, let context, let s = sending, !s.finishing else { return }
        let index = s.plan.requestIndex
        let core = self.core
        while true {
            if let stallAt = s.plan.stallAt, s.queued >= stallAt {
                // Registered before the flush: the flush completes the writes, which counts their bytes, and a test
                // that waits for those bytes and then releases the stall must find it registered.
                if s.stallID == nil { s.stallID = registerStall(path: s.plan.path) }
                context.flush()
                return
            }
            if let closeAt = s.plan.closeAt, s.queued >= closeAt {
                s.finishing = true
                context.flush()
                let reset = s.plan.reset
                s.lastWrite.assumeIsolated().whenComplete { _ in
                    core.markTruncated(request: index)
                    self.ended(s)
                    self.closed = true
                    self.sending = nil
                    if reset, let socket = context.channel as? SocketOptionProvider {
                        // SO_LINGER {on, 0 s}: close(2) then sends RST instead of FIN (set synchronously on the loop).
                        _ = socket.setSoLinger(NIOLinger(l_onoff: 1, l_linger: 0))
                    }
                    context.close(promise: nil)
                }
                return
            }
            if s.queued >= s.total {
                s.finishing = true
                let end = s.plan.chunked ? context.write(wrapOutboundOut(ByteBuffer(string: "0\r\n\r\n"))) : s.lastWrite
                context.flush()
                let keepAlive = s.plan.keepAlive
                end.assumeIsolated().whenComplete { result in
                    if case .success = result { self.responseDone(keepAlive: keepAlive) }
                }
                return
            }
            guard context.channel.isWritable else {
                context.flush()
                return
            }
            var limit = min(Int64(Self.sliceSize), s.total - s.queued)
            if let stallAt = s.plan.stallAt { limit = min(limit, stallAt - s.queued) }
            if let closeAt = s.plan.closeAt { limit = min(limit, closeAt - s.queued) }
            if let bps = s.plan.bytesPerSecond {
                let now = NIODeadline.now()
                let elapsed = Double((now - s.lastRefill).nanoseconds) / 1e9
                s.lastRefill = now
                s.tokens = min(s.tokens + elapsed * Double(bps), 2 * Self.throttleSlice(bps))
                // Write whole ticks' worth (or the rest), not the few bytes that trickle in between ticks.
                if s.tokens < min(Self.throttleSlice(bps), Double(limit)) {
                    if s.throttleTask == nil {
                        s.throttleTask = context.eventLoop.assumeIsolated().scheduleTask(in: Self.throttleTick) {
                            s.throttleTask = nil
                            if self.sending === s { self.pump() }
                        }
                    }
                    context.flush()
                    return
                }
                limit = min(limit, Int64(s.tokens))
                s.tokens -= Double(limit)
            }
            let count = limit
            let slice = s.body.readSlice(length: Int(count))!
            if s.plan.chunked {
                context.write(wrapOutboundOut(ByteBuffer(string: String(limit, radix: 16) + "\r\n")), promise: nil)
            }
            let write = context.write(wrapOutboundOut(slice))
            write.whenSuccess { core.addBytes(request: index, count) }
            s.lastWrite = write
            if s.plan.chunked {
                s.lastWrite = context.write(wrapOutboundOut(ByteBuffer(string: "\r\n")))
            }
            s.queued += count
            if s.plan.bytesPerSecond != nil { context.flush() }
        }
    }

    private func registerStall(path: String) -> Int? {
        guard let context else { return nil }
        let eventLoop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let idBox = NIOLoopBoundBox<Int?>(nil, eventLoop: eventLoop)
        let id = core.registerStall(path: path) {
            eventLoop.execute { bound.value.releaseStall(id: idBox.value) }
        }
        idBox.value = id
        return id
    }

    private func releaseStall(id: Int?) {
        guard let s = sending, let id, s.stallID == id else { return }
        s.stallID = nil
        s.plan.stallAt = nil
        pump()
    }
}
