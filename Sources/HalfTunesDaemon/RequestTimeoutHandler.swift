#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import NIOCore

/// Drops clients that hold a connection without asking anything: one that sends no complete request
/// within the client timeout of connecting, or leaves a request line unfinished that long (a slow-loris
/// sending a byte a minute). Connected clients that have asked something may then stay idle (a
/// subscriber only reads); the per-uid connection cap bounds how many they hold.
final class RequestTimeoutHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let timeout: TimeAmount
    private var hasSentRequest = false
    /// When the currently unfinished line began (nil: nothing pending).
    private var pendingSince: NIODeadline?
    private var connectedAt = NIODeadline.now()
    /// The line being received has a non-blank byte (until the first request is complete).
    private var lineHasContent = false
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) { self.timeout = timeout }

    func channelActive(context: ChannelHandlerContext) {
        connectedAt = .now()
        schedule(context: context, at: connectedAt + timeout)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let (count, trailing) = buffer.withUnsafeReadableBytes { raw -> (Int, Int?) in
            // Only a line with something in it counts as a request: blank lines do not keep a client around.
            if !hasSentRequest {
                for byte in raw {
                    switch byte {
                    case UInt8(ascii: "\n"): if lineHasContent { hasSentRequest = true }; lineHasContent = false
                    case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"): break
                    default: lineHasContent = true
                    }
                    if hasSentRequest { break }
                }
            }
            // The last newline, found with memchr (a byte-by-byte view is slow for megabyte lines).
            guard let base = raw.baseAddress else { return (0, nil) }
            var last: Int?
            var from = 0
            while from < raw.count, let hit = memchr(base + from, Int32(UInt8(ascii: "\n")), raw.count - from) {
                last = UnsafeRawPointer(hit) - base
                from = last! + 1
            }
            return (raw.count, last.map { raw.count - $0 - 1 })
        }
        if let trailing {
            pendingSince = trailing > 0 ? .now() : nil
        } else if count > 0, pendingSince == nil {
            pendingSince = .now()
        }
        if let since = pendingSince { schedule(context: context, at: since + timeout) }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    private func schedule(context: ChannelHandlerContext, at deadline: NIODeadline) {
        guard timer == nil else { return }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = loopBound.value
            handler.timer = nil
            handler.check(context: context)
        }
    }

    private func check(context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        if !hasSentRequest, now >= connectedAt + timeout {
            context.close(promise: nil)
            return
        }
        if let since = pendingSince {
            if now >= since + timeout {
                context.close(promise: nil)
                return
            }
            schedule(context: context, at: since + timeout)
        }
    }
}
