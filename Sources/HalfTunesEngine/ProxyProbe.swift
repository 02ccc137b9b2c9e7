// Asks an HTTP proxy that refused a tunnel what its answer was (AsyncHTTPClient keeps only "not 2xx").
import Foundation
import HalfTunesCore
import NIOCore
import NIOPosix

/// After AsyncHTTPClient's `invalidProxyResponse`, one CONNECT like its own, to read the proxy's status line, so
/// the task's `proxyFailure` can say "401 Unauthorized" or "403 Forbidden" instead of "not 2xx". Only on a failed
/// attempt; a probe that gets no status line changes nothing.
enum ProxyProbe {
    struct Answer: Equatable {
        var status: Int
        var reason: String
    }

    /// The status line of `proxy`'s answer to `CONNECT host:port` (from `url`), within `timeout` seconds.
    static func connectAnswer(proxy: ProxyServer, url: String, eventLoop: EventLoop, timeout: Int64 = 10) async -> Answer? {
        guard let target = URLComponents(string: url), var host = target.host, !host.isEmpty else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let port = target.port ?? (target.scheme?.lowercased() == "https" ? 443 : 80)
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var request = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n"
        if let user = proxy.username {
            let token = Data("\(user):\(proxy.password ?? "")".utf8).base64EncodedString()
            request += "Proxy-Authorization: Basic \(token)\r\n"
        }
        request += "\r\n"
        let promise = eventLoop.makePromise(of: String?.self)
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(.seconds(timeout))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(FirstLineHandler(promise: promise))
                }
            }
        let channel: Channel
        do {
            channel = try await bootstrap.connect(host: proxy.host, port: proxy.port).get()
        } catch {
            promise.succeed(nil)
            return nil
        }
        let deadline = eventLoop.scheduleTask(in: .seconds(timeout)) { promise.succeed(nil) }
        channel.writeAndFlush(channel.allocator.buffer(string: request), promise: nil)
        let line = (try? await promise.futureResult.get()) ?? nil
        deadline.cancel()
        try? await channel.close()
        return line.flatMap(parse)
    }

    /// "HTTP/1.1 403 Forbidden" → (403, "Forbidden").
    static func parse(_ line: String) -> Answer? {
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]), (100...999).contains(status) else {
            return nil
        }
        return Answer(status: status, reason: parts.count > 2 ? String(parts[2]) : "")
    }

    /// Collects bytes up to the first CRLF (at most 8 KiB) and completes `promise` with that line (nil: the
    /// connection ended first).
    private final class FirstLineHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        private let promise: EventLoopPromise<String?>
        private var bytes: [UInt8] = []

        init(promise: EventLoopPromise<String?>) { self.promise = promise }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            bytes += buffer.readBytes(length: buffer.readableBytes) ?? []
            if let end = bytes.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: bytes[..<end], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                promise.succeed(line)
                context.close(promise: nil)
            } else if bytes.count > 8192 {
                promise.succeed(nil)
                context.close(promise: nil)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            promise.succeed(nil)
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            promise.succeed(nil)
            context.close(promise: nil)
        }
    }
}
