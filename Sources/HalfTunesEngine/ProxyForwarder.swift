// Plain http through an HTTP proxy without a tunnel: absolute-form requests on kept-alive connections to the proxy.
import AsyncHTTPClient
import Foundation
import HalfTunesCore
import HalfTunesProtocol
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// The connections to one HTTP proxy that carry forwarded requests (`GET http://host/path HTTP/1.1`), as curl,
/// wget, aria2, browsers and URLSession send plain http to a proxy: stock proxies refuse `CONNECT` to port 80.
/// AsyncHTTPClient tunnels every request, so this is an HTTP/1.1 client of our own on NIOHTTP1's codecs; it reports
/// to the same `AttemptDelegate` as AsyncHTTPClient does (`ForwardedRequest`). A connection whose response ended
/// with keep-alive waits here for the next request on its event loop (at most `maxIdlePerLoop` per loop); the
/// proxy's own idle close removes it. Thread-safe.
public final class ProxyForwarder: Sendable {
    /// Idle connections kept per event loop.
    static let maxIdlePerLoop = 8
    /// Connecting to the proxy gives up after this long (as AsyncHTTPClient's connect timeout).
    static let connectTimeout = TimeAmount.seconds(30)

    let proxy: ProxyServer
    private struct State {
        var idle: [ObjectIdentifier: [Channel]] = [:]
        /// Every open connection, idle or in use (closed with the forwarder).
        var open: [ObjectIdentifier: Channel] = [:]
        var closed = false
    }
    private let state = NIOLockedValueBox(State())

    init(proxy: ProxyServer) {
        self.proxy = proxy
    }

    /// Sends `request` (absolute-form, with `Proxy-Authorization` when the proxy has credentials) on a connection
    /// of `eventLoop`; `delegate` hears the request's life as from AsyncHTTPClient.
    func execute(request: HTTPClient.Request, delegate: AttemptDelegate, eventLoop: EventLoop) -> ForwardedRequest {
        let forwarded = ForwardedRequest(request: request, delegate: delegate, eventLoop: eventLoop, forwarder: self)
        eventLoop.execute { forwarded.start() }
        return forwarded
    }

    /// Closes every connection: idle ones, and those of requests under way (which fail as if the proxy closed them).
    func close() {
        let channels = state.withLockedValue { s -> [Channel] in
            s.closed = true
            defer { s.idle = [:]; s.open = [:] }
            return Array(s.open.values)
        }
        for channel in channels { channel.close(promise: nil) }
    }

    /// How many idle connections are kept (tests).
    var idleCount: Int { state.withLockedValue { $0.idle.values.reduce(0) { $0 + $1.count } } }

    /// An idle connection of `eventLoop` (reused: true), or a new one.
    func connection(on eventLoop: EventLoop) -> EventLoopFuture<(channel: Channel, reused: Bool)> {
        let key = ObjectIdentifier(eventLoop)
        while let channel = state.withLockedValue({ s -> Channel? in s.idle[key]?.popLast() }) {
            if channel.isActive { return eventLoop.makeSucceededFuture((channel, true)) }
        }
        return connect(on: eventLoop).map { ($0, false) }
    }

    /// A new connection to the proxy, counted among the open ones until it closes.
    func connect(on eventLoop: EventLoop) -> EventLoopFuture<Channel> {
        connectChannel(on: eventLoop).flatMapThrowing { channel in
            let id = ObjectIdentifier(channel), key = ObjectIdentifier(eventLoop)
            let closed = self.state.withLockedValue { s -> Bool in
                if !s.closed { s.open[id] = channel }
                return s.closed
            }
            if closed {
                channel.close(promise: nil)
                throw HTTPClientError.alreadyShutdown
            }
            channel.closeFuture.whenComplete { _ in
                self.state.withLockedValue { s in
                    s.open[id] = nil
                    s.idle[key]?.removeAll { $0 === channel }
                }
            }
            return channel
        }
    }

    private func connectChannel(on eventLoop: EventLoop) -> EventLoopFuture<Channel> {
        ClientBootstrap(group: eventLoop)
            .connectTimeout(Self.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try ResponseHeadRecodingHandler.install(in: channel.pipeline.syncOperations)
                    try channel.pipeline.syncOperations.addHandler(ForwardingHandler())
                }
            }
            .connect(host: proxy.host, port: proxy.port)
    }

    /// A connection whose exchange ended cleanly, kept for the next request (closed when the forwarder is, or
    /// when enough are kept). Event loop of `channel`.
    func giveBack(_ channel: Channel) {
        let key = ObjectIdentifier(channel.eventLoop)
        let kept = state.withLockedValue { s -> Bool in
            guard !s.closed, channel.isActive, s.idle[key, default: []].count < Self.maxIdlePerLoop else { return false }
            s.idle[key, default: []].append(channel)
            return true
        }
        if !kept { channel.close(promise: nil) }
    }

    /// The request head of a forwarded request: absolute-form target (no user info, no fragment), `Host`, the
    /// request's headers, `Proxy-Authorization` (Basic) when the proxy has credentials, and the body's framing.
    func head(for request: HTTPClient.Request) -> HTTPRequestHead {
        var headers = request.headers
        var target = request.url.absoluteString
        var authority = request.host
        if var components = URLComponents(string: target) {
            components.user = nil
            components.password = nil
            components.fragment = nil
            if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
            target = components.string ?? target
            authority = (components.percentEncodedHost.map { $0.contains(":") && !$0.hasPrefix("[") ? "[\($0)]" : $0 } ?? "")
                + (components.port.map { ":\($0)" } ?? "")
        }
        if !headers.contains(name: "Host") { headers.add(name: "Host", value: authority) }
        if let username = proxy.username {
            headers.replaceOrAdd(name: "Proxy-Authorization",
                                 value: HTTPAuthentication.basic(Credentials(user: username, password: proxy.password ?? "")))
        }
        if let body = request.body {
            if let length = body.contentLength {
                headers.replaceOrAdd(name: "Content-Length", value: "\(length)")
            } else {
                headers.replaceOrAdd(name: "Transfer-Encoding", value: "chunked")
            }
        } else if ["POST", "PUT", "PATCH"].contains(request.method.rawValue) {
            headers.replaceOrAdd(name: "Content-Length", value: "0")
        }
        return HTTPRequestHead(version: .http1_1, method: request.method, uri: target, headers: headers)
    }
}

/// The last handler of a forwarding connection: hands the response to the request using the connection, and holds
/// reads back while that request's delegate has not acknowledged what it got (backpressure). A connection with no
/// request that hears anything (bytes, a close) is closed.
final class ForwardingHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    /// The request the connection carries now (event loop only).
    var current: ForwardedRequest?
    private var readHeld = false
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// The request let go of the connection: a read it held back goes on (the connection waits in the pool with a
    /// read pending, so the proxy's close is seen, and the next request's answer read).
    func detach() {
        current = nil
        if readHeld, let context {
            readHeld = false
            context.read()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let current else { return context.close(promise: nil) }
        current.received(.part(unwrapInboundIn(data)))
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let current { current.received(.failed(error)) }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        current?.received(.failed(HTTPClientError.remoteConnectionClosed))
        context.fireChannelInactive()
    }

    func read(context: ChannelHandlerContext) {
        if current?.isHoldingBack == true {
            readHeld = true
        } else {
            context.read()
        }
    }

    /// Whether a read was held back (and is now let go: the caller reads).
    func takeHeldRead() -> Bool {
        defer { readHeld = false }
        return readHeld
    }
}

