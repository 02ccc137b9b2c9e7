// The channel handler that runs ResponseHeadRecoder in front of swift-nio's HTTP/1 response decoder.
import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// Sits just before `ByteToMessageHandler<HTTPResponseDecoder>` on an HTTP/1 client connection (after TLS):
/// passes every read through `ResponseHeadRecoder`, and starts a new head when a request head goes out. It
/// decides nothing itself. Event loop only.
final class ResponseHeadRecodingHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private var recoder = ResponseHeadRecoder()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard recoder.readingHead else { return context.fireChannelRead(data) }
        switch recoder.feed(unwrapInboundIn(data).readableBytesView) {
        case .unchanged:
            context.fireChannelRead(data)
        case .replaced(let bytes):
            guard !bytes.isEmpty else { return }
            context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: bytes)))
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .head = unwrapOutboundIn(data) { recoder.expectHead() }
        context.write(data, promise: promise)
    }

    /// Adds the handler in front of the pipeline's HTTP/1 response decoder. On the channel's event loop.
    static func install(in pipeline: ChannelPipeline.SynchronousOperations) throws {
        let decoder = try pipeline.context(handlerType: ByteToMessageHandler<HTTPResponseDecoder>.self)
        try pipeline.addHandler(ResponseHeadRecodingHandler(), position: .before(decoder.handler))
    }

    /// For `HTTPClient.Configuration.http1_1ConnectionDebugInitializer`: AsyncHTTPClient calls it once a
    /// connection's pipeline is set up, before the connection carries a request.
    @Sendable static func install(on channel: Channel) -> EventLoopFuture<Void> {
        if channel.eventLoop.inEventLoop {
            return channel.eventLoop.makeCompletedFuture { try install(in: channel.pipeline.syncOperations) }
        }
        return channel.eventLoop.submit { try install(in: channel.pipeline.syncOperations) }
    }
}
