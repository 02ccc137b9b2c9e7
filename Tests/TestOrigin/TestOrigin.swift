// TestOrigin: an HTTP/1.1 origin on 127.0.0.1 for tests, with Range/ETag like nginx and faults on demand.
import Crypto
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// An in-process HTTP/1.1 server (SwiftNIO) serving in-memory resources on 127.0.0.1 (or ::1), with an ephemeral port.
public final class TestOrigin: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let serverChannel: any Channel
    let core: OriginCore
    public let port: Int
    /// "https" when started with TLS, else "http".
    public let scheme: String
    /// The loopback address it listens on: "127.0.0.1", or "::1" (IPv6 only).
    public let host: String
    /// Linux thread id of the server's event loop thread (nil elsewhere), for leak checks after `shutdown()`.
    public let eventLoopThreadID: Int?

    private init(
        group: MultiThreadedEventLoopGroup, serverChannel: any Channel, core: OriginCore, port: Int, threadID: Int?,
        scheme: String, host: String
    ) {
        self.scheme = scheme
        self.host = host
        self.group = group
        self.serverChannel = serverChannel
        self.core = core
        self.port = port
        self.eventLoopThreadID = threadID
    }

    /// A certificate chain and its private key (PEM files) for serving https.
    public struct TLSFiles: Sendable {
        public var certificate: String
        public var privateKey: String
        public init(certificate: String, privateKey: String) {
            self.certificate = certificate
            self.privateKey = privateKey
        }
    }

    /// Starts a server on its own one-thread event loop group, bound to 127.0.0.1:0 (or `host`: "::1" listens on
    /// IPv6 loopback only); with `tls`, it speaks https (TLS in front of the same HTTP/1.1 handling, faults
    /// included).
    public static func start(tls: TLSFiles? = nil, host: String = "127.0.0.1") async throws -> TestOrigin {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let core = OriginCore()
        do {
            let sslContext = try tls.map { files in
                try NIOSSLContext(configuration: .makeServerConfiguration(
                    certificateChain: try NIOSSLCertificate.fromPEMFile(files.certificate).map { .certificate($0) },
                    privateKey: .privateKey(try NIOSSLPrivateKey(file: files.privateKey, format: .pem))))
            }
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelOption(.writeBufferWaterMark, value: .init(low: 512 * 1024, high: 1024 * 1024))
                .childChannelInitializer { channel in
                    let accepted = core.state.withLockedValue { s -> Bool in
                        guard !s.isShutDown else { return false }
                        s.channels[ObjectIdentifier(channel)] = channel
                        return true
                    }
                    guard accepted else { return channel.close() }
                    channel.closeFuture.whenComplete { _ in
                        core.state.withLockedValue { _ = $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
                    }
                    return channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        if let sslContext { try sync.addHandler(NIOSSLServerHandler(context: sslContext)) }
                        try sync.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
                        try sync.addHandler(OriginConnectionHandler(core: core))
                    }
                }
                .bind(host: host, port: 0)
                .get()
            guard let port = channel.localAddress?.port else {
                throw WaitError(description: "TestOrigin: listener has no local port")
            }
            let threadID = try await channel.eventLoop.submit { currentThreadID() }.get()
            return TestOrigin(group: group, serverChannel: channel, core: core, port: port, threadID: threadID,
                              scheme: tls == nil ? "http" : "https", host: host)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// "http://127.0.0.1:<port><path>" ("https://…" with TLS; "http://[::1]:<port>…" on IPv6); `path` starts
    /// with "/".
    public func url(_ path: String) -> String {
        url(path, hostName: host.contains(":") ? "[\(host)]" : host)
    }

    /// The URL of `path` with another name for this server's address (a name the client resolves to it).
    public func url(_ path: String, hostName: String) -> String {
        "\(scheme)://\(hostName):\(port)\(path)"
    }

    /// Closes the listener and every connection, fails pending waits, and shuts the event loop group down.
    /// Calling it again does nothing.
    public func shutdown() async throws {
        let state = core.state.withLockedValue { s -> ([any Channel], [OriginWaiter])? in
            guard !s.isShutDown else { return nil }
            s.isShutDown = true
            let w = Array(s.waiters.values)
            s.waiters = [:]
            s.stalls = [:]
            return (Array(s.channels.values), w)
        }
        guard let (channels, waiters) = state else { return }  // already shut down
        for w in waiters {
            w.continuation.resume(throwing: WaitError(description: "TestOrigin: shut down while waiting on \(w.path)"))
        }
        try? await serverChannel.close()
        for channel in channels { try? await channel.close() }
        try await group.shutdownGracefully()
    }

    // MARK: Resources

    /// Stores `body` at `path`. nil validators are generated: ETag "\"<8 hex of sha256>-<version>\"",
    /// Last-Modified an IMF-fixdate (now, and at least 1 s after the path's previous Last-Modified).
    public func put(_ path: String, _ body: [UInt8], etag: String? = nil, lastModified: String? = nil) {
        var buffer = ByteBuffer()
        buffer.writeBytes(body)
        store(path, buffer, sha: etag == nil ? Self.sha256Hex(body) : "", etag: etag, lastModified: lastModified)
    }

    /// Replaces the content of `path` (creating it if needed) with a new ETag and a later Last-Modified.
    public func change(_ path: String, to body: [UInt8]) {
        put(path, body)
    }

    public func remove(_ path: String) {
        core.state.withLockedValue { _ = $0.resources.removeValue(forKey: path) }
    }

    /// The validators currently served for `path` (even when `omitValidators` hides them), nil if absent.
    public func validators(_ path: String) -> (etag: String, lastModified: String)? {
        core.state.withLockedValue { s in s.resources[path].map { ($0.etag, $0.lastModified) } }
    }

    private func store(_ path: String, _ buffer: ByteBuffer, sha: String, etag: String?, lastModified: String?) {
        core.state.withLockedValue { s in
            let version = s.versions[path, default: 0] + 1
            s.versions[path] = version
            let previous = s.lastModifiedSeconds[path]
            let seconds: Int64
            if let lastModified, let parsed = HTTPDate.parse(lastModified) {
                seconds = parsed
            } else {
                seconds = max(HTTPDate.now(), previous.map { $0 + 1 } ?? .min)
            }
            s.lastModifiedSeconds[path] = seconds
            s.resources[path] = StoredResource(
                body: buffer,
                etag: etag ?? "\"\(sha.prefix(8))-\(version)\"",
                lastModified: lastModified ?? HTTPDate.format(seconds))
        }
    }

    // MARK: Behaviour

    /// Replaces the behaviour of `path` (its fault counters start afresh).
    public func setBehavior(_ path: String, _ b: Behavior) {
        core.state.withLockedValue { $0.behaviors[path] = b }
    }

    /// The behaviour of `path` now, with its counters as used so far.
    public func behavior(_ path: String) -> Behavior {
        core.state.withLockedValue { $0.behaviors[path] ?? Behavior() }
    }

    /// Stalled responses of `path` continue sending. Responses that stall later need another release.
    public func releaseStall(_ path: String) {
        core.releaseStalls(path: path)
    }

    // MARK: Observation

    /// Lets the event loop finish the I/O it is in the middle of, so that every body write the client could
    /// already have seen has been counted (a write's promise completes right after its write(2)).
    private func settle() {
        let loop = serverChannel.eventLoop
        guard !loop.inEventLoop, MultiThreadedEventLoopGroup.currentEventLoop == nil,
            !core.state.withLockedValue({ $0.isShutDown })
        else { return }
        try? loop.submit {}.wait()
    }

    /// Recorded requests in arrival order; nil → all paths. Waits for the event loop's current I/O first.
    public func requests(_ path: String? = nil) -> [RecordedRequest] {
        settle()
        return core.state.withLockedValue { s in
            guard let path else { return s.requests }
            return s.requests.filter { $0.path == path }
        }
    }

    /// The most resource bodies sent at once for `path` (nil: over every path) since the origin started:
    /// how many connections a client really used.
    public func mostConcurrentResponses(_ path: String? = nil) -> Int {
        settle()
        return core.state.withLockedValue { $0.mostSending[path ?? "", default: 0] }
    }

    /// Resource bodies being sent now for `path` (nil: every path).
    public func concurrentResponses(_ path: String? = nil) -> Int {
        settle()
        return core.state.withLockedValue { $0.sending[path ?? "", default: 0] }
    }

    /// Sum of `bodyBytesSent` over all requests for `path` (live; resource bodies only, not error pages).
    /// Waits for the event loop's current I/O first.
    public func bytesServed(_ path: String) -> Int64 {
        settle()
        return core.state.withLockedValue { $0.bytesByPath[path, default: 0] }
    }

    /// Resumes once at least `count` requests for `path` have arrived; throws `WaitError` on timeout.
    public func waitForRequests(_ path: String, count: Int, timeout: Duration = .seconds(30)) async throws {
        try await core.wait(path: path, .requests(count: count), timeout: timeout, what: "\(count) request(s) for \(path)")
    }

    /// Resumes once `bytesServed(path) >= atLeast`; throws `WaitError` on timeout.
    public func waitUntilBytesServed(_ path: String, atLeast: Int64, timeout: Duration = .seconds(30)) async throws {
        try await core.wait(
            path: path, .bytes(atLeast: atLeast), timeout: timeout, what: "\(atLeast) body byte(s) served for \(path)")
    }
}
