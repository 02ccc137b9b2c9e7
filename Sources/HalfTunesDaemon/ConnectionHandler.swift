import Foundation
import HalfTunesProtocol
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// What one client connection may cost the daemon.
struct ClientLimits: Sendable {
    /// Unsent output after which a client that does not read is disconnected.
    var outputBytes: Int
    /// How long paced output (an event replay) waits for the client to read before disconnecting it.
    var stallTimeout: TimeAmount
    /// Open connections per peer uid.
    var quota: ConnectionQuota
    /// Unsent output of all of a uid's connections together.
    var output: UIDOutput
    /// Requests read and not yet answered of all of a uid's connections together.
    var input: UIDInput
    /// Subscriptions one connection may hold.
    var maxSubscriptions: Int
    /// Group of a socket file the daemon binds itself.
    var socketGroup: gid_t?

    init(_ config: DaemonConfiguration) {
        outputBytes = config.maxPendingOutputBytes
        stallTimeout = .nanoseconds(Seconds.nanoseconds(config.clientTimeout))
        quota = ConnectionQuota(maxPerUID: config.maxConnectionsPerUID)
        output = UIDOutput(maxPerUID: config.maxOutputPerUID)
        input = UIDInput(maxPerUID: config.maxInputPerUID)
        maxSubscriptions = config.maxSubscriptionsPerConnection
        socketGroup = config.socketGroup
    }
}

/// One client connection: lines in, then three overlapping stages (decode, calls on the core, answers; see
/// `RPCRouter`), responses in request order and event notifications out through the connection's `Outbox`.
/// `@unchecked`: as every NIO channel handler, its mutable state is touched only on its channel's event loop
/// (the tasks it starts capture copies of what they need, never its mutable properties).
final class ConnectionHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    private static let nextID = NIOLockedValueBox<UInt64>(1)

    private let router: RPCRouter
    private let core: DaemonCore
    private let logger: Logger
    private let limits: ClientLimits
    private var outbox: Outbox?
    private var continuation: AsyncStream<[[UInt8]]>.Continuation?
    /// Lines of the current socket read, handed on together at `channelReadComplete`.
    private var burst: [[UInt8]] = []
    private let connectionID: UInt64
    /// Requests read but not yet handled, and whether reading is paused because there are too many (of this
    /// connection's, or of its uid's together): a client pipelining requests faster than they are handled is
    /// slowed down, not buffered without end.
    private let backlog = NIOLockedValueBox(ReadBacklog())
    /// The peer's uid once SO_PEERCRED answered (at once, on the channel's loop): lines are counted for it.
    private var peerUID: UInt32?

    init(router: RPCRouter, core: DaemonCore, logger: Logger, limits: ClientLimits) {
        self.router = router
        self.core = core
        self.logger = logger
        self.limits = limits
        self.connectionID = Self.nextID.withLockedValue { id in defer { id += 1 }; return id }
    }

    func channelActive(context: ChannelHandlerContext) {
        let outbox = Outbox(connectionID: connectionID, channel: context.channel, limit: limits.outputBytes,
                            stallTimeout: limits.stallTimeout, durability: core.journal.durability)
        self.outbox = outbox
        let credentials = Self.peerCredentials(context.channel)
        credentials?.whenSuccess { peer in self.peerUID = peer.uid } // on the loop: at once
        let peerGroups = Self.peerGroups(context.channel)
        let (bursts, continuation) = AsyncStream.makeStream(of: [[UInt8]].self)
        self.continuation = continuation
        let router = self.router
        let core = self.core
        let id = connectionID
        let quota = limits.quota
        let backlog = self.backlog
        let input = limits.input
        let channel = context.channel
        Task {
            // Everything a client may do depends on who it is: one that cannot be identified is turned away.
            guard let peer = try? await credentials?.get() else {
                outbox.send(response: RPCResponse(id: nil, error: RPCError(
                    .internalError, "Internal error: halftunesd cannot read this connection's credentials (SO_PEERCRED)")))
                outbox.closeWhenFlushed()
                return
            }
            let uid = peer.uid
            // Whatever ends this connection's service, what its unanswered lines hold of the uid's budget goes back.
            defer {
                let left = backlog.withLockedValue { $0.close() }
                if left > 0 { _ = input.release(uid, left) }
            }
            // The kernel's answer for this connection; /proc only where SO_PEERGROUPS fails.
            let groups: [gid_t]
            if let raw = try? await peerGroups?.get() {
                groups = PeerAccess.groups(peerGroups: raw, primary: peer.gid)
            } else {
                groups = PeerAccess.groups(pid: peer.pid, uid: peer.uid, primary: peer.gid)
            }
            guard quota.admit(uid) else {
                outbox.send(response: RPCResponse(id: nil, error: RPCError(
                    .limitExceeded, "Too many connections from uid \(uid) (at most \(quota.maxPerUID) at once); close some and retry")))
                outbox.closeWhenFlushed()
                return
            }
            outbox.setViewer(uid, output: limits.output)
            // Counted until every request read from it is handled (the stream ends after the channel closed).
            defer { quota.release(uid) }
            // Three stages, so a pipelining client's requests overlap: the next request is parsed and decoded
            // while the core makes the calls of those before it, one after another on the core (no hop per
            // request), and the answers are turned into JSON and sent in request order.
            let (prepared, preparedSink) = AsyncStream.makeStream(of: [(RPCRouter.Prepared, Int)].self)
            let (answers, answerSink) = AsyncStream.makeStream(of: (RPCRouter.Answer, Int).self)
            await withDiscardingTaskGroup { group in
                group.addTask {
                    for await lines in bursts {
                        preparedSink.yield(lines.map { line in
                            (router.prepare(line: line, connectionID: id, uid: uid, groups: groups, outbox: outbox),
                             line.count)
                        })
                    }
                    preparedSink.finish()
                }
                group.addTask {
                    await core.serve(prepared, router: router) { answer, bytes in answerSink.yield((answer, bytes)) }
                    answerSink.finish()
                }
                for await (answer, bytes) in answers {
                    if let response = router.response(answer) {
                        outbox.send(response: response)
                    }
                    let resume = backlog.withLockedValue { b -> Bool in
                        let released = b.release(for: bytes)
                        return b.answered(bytes, released: released, uidFull: input.release(uid, released))
                    }
                    if resume {
                        channel.eventLoop.execute {
                            // A line of the same read may have paused it again meanwhile (its uid full once more):
                            // then it stays paused, and a later answer resumes it.
                            guard !backlog.withLockedValue({ $0.paused }) else { return }
                            channel.setOption(ChannelOptions.autoRead, value: true).whenSuccess { channel.read() }
                        }
                    }
                }
            }
            // Every request read is answered. The stream of them ends when the client shut its write side
            // (`nc -N`, `socat`) or the connection closed: close it once the answers are out, unless it still
            // receives events.
            if await !core.keepsOpenAfterLastRequest(id) { outbox.closeWhenFlushed() }
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let bytes = Array(buffer.readableBytesView)
        if bytes.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) { return } // blank line
        let uid = peerUID, input = limits.input
        let pause = backlog.withLockedValue { b -> Bool in
            guard let uid, b.charges else { return b.read(bytes.count, charged: false, uidFull: false) }
            return b.read(bytes.count, charged: true, uidFull: input.charge(uid, bytes.count))
        }
        if pause { context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in } }
        burst.append(bytes)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if !burst.isEmpty {
            continuation?.yield(burst)
            burst = []
        }
        context.fireChannelReadComplete()
    }

    /// The client shut its write side after its last request (the channel allows half-closure): those read
    /// so far, the decoder's last unterminated line included, are still answered.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            if !burst.isEmpty {
                continuation?.yield(burst)
                burst = []
            }
            continuation?.finish()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !burst.isEmpty {
            continuation?.yield(burst)
            burst = []
        }
        continuation?.finish()
        outbox?.close()
        let core = self.core
        let id = connectionID
        Task { await core.connectionClosed(id) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if error is LineFrameDecoder.LineTooLong {
            let response = RPCResponse(id: nil, error: .parse("request line longer than \(HalfTunes.maxLineBytes) bytes; closing the connection"))
            if let line = try? WireCoding.line(response) {
                let channel = context.channel
                let buffer = channel.allocator.buffer(bytes: line)
                context.writeAndFlush(NIOAny(buffer)).whenComplete { _ in channel.close(promise: nil) }
                return
            }
        }
        logger.debug("connection error: \(error)")
        context.close(promise: nil)
    }

    /// struct ucred (Glibc hides it without _GNU_SOURCE).
    struct PeerCredentials: Sendable { var pid: Int32 = 0; var uid: UInt32 = 0; var gid: UInt32 = 0 }

    /// The peer's credentials from SO_PEERCRED, taken at accept time.
    static func peerCredentials(_ channel: Channel) -> EventLoopFuture<PeerCredentials>? {
        guard let provider = channel as? SocketOptionProvider else { return nil }
        return provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
    }

    /// SO_PEERGROUPS (Linux 4.13): the peer's supplementary groups as the kernel recorded them at connect, so
    /// they count even where the daemon may not read the client's /proc entry. Room for 1,024 groups (a peer
    /// with more gets ERANGE, and the /proc fallback). NIO zero-fills the buffer and does not return the
    /// length: `PeerAccess.groups(peerGroups:primary:)` reads it.
    static func peerGroups(_ channel: Channel) -> EventLoopFuture<[gid_t]>? {
        #if os(Linux)
        guard let provider = channel as? SocketOptionProvider else { return nil }
        let buffer: EventLoopFuture<InlineArray<1024, gid_t>> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(59 /* SO_PEERGROUPS */))
        return buffer.map { raw in (0..<raw.count).map { raw[$0] } }
        #else
        return nil
        #endif
    }
}
