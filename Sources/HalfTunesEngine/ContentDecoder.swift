// A response body's content coding undone (gzip, deflate) for the bodies kept in memory: data and upload tasks.
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPCompression

/// Decodes a body sent with `Content-Encoding: gzip` (or `x-gzip`) or `deflate` (zlib), part by part, through
/// swift-nio-extras' decompressor (zlib) on a private embedded pipeline; used on the attempt's event loop
/// only. Downloads never decode: they ask for `identity` (a `Range` of an encoding made on the fly means
/// nothing) and keep whatever bytes the server sends.
final class ContentDecoder {
    /// What a memory sink asks for.
    static let acceptEncoding = "gzip, deflate"

    private let channel = EmbeddedChannel()
    /// The coding named by the response, as its header said it.
    let coding: String
    /// Whether any coded byte arrived (an empty body, e.g. a 204 or a HEAD's, decodes to nothing).
    private var fed = false
    private var closed = false

    /// nil when the response names no coding this decoder undoes (none, `identity`, or one not asked for:
    /// those bodies are kept as sent). `maxDecodedBytes` bounds what the whole body may inflate to, so a small
    /// coded part never inflates past it in memory (a decompression bomb): beyond it, `decode` throws `tooLarge`.
    init?(headers: [(String, String)], maxDecodedBytes: Int) {
        let codings = headers.filter { $0.0.lowercased() == "content-encoding" }
            .flatMap { $0.1.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
        // One coding, and one we asked for; stacked codings (`gzip, gzip`) are kept as sent.
        guard codings.count == 1, let only = codings.first else { return nil }
        let name: String
        switch only {
        case "gzip", "x-gzip": name = "gzip"
        case "deflate": name = "deflate"
        default: return nil
        }
        coding = only
        try? channel.pipeline.syncOperations.addHandler(NIOHTTPResponseDecompressor(limit: .size(maxDecodedBytes)))
        var head = HTTPResponseHead(version: .http1_1, status: .ok)
        head.headers.add(name: "Content-Encoding", value: name)
        do {
            try channel.writeInbound(HTTPClientResponsePart.head(head))
            _ = try channel.readInbound(as: HTTPClientResponsePart.self)
        } catch {
            return nil
        }
    }

    /// Lets the private pipeline go; call it on the thread that made the decoder (the attempt's event loop), once
    /// the body ended or was abandoned (an embedded channel is not thread-safe, so nothing is left to `deinit`).
    func close() {
        guard !closed else { return }
        closed = true
        _ = try? channel.finish()
    }

    /// Raised for a body that is not valid data of its coding (or ends before its coded stream does), or that
    /// inflates past `maxDecodedBytes` (`tooLarge`).
    struct Invalid: Error {
        var reason: String
        var tooLarge = false
    }

    /// The decoded bytes of one part of the coded body.
    func decode(_ part: ByteBuffer) throws(Invalid) -> [ByteBuffer] {
        if part.readableBytes > 0 { fed = true }
        return try run(.body(part))
    }

    /// The body's end: the decoded bytes still held; throws when the coded stream is incomplete. An empty body
    /// (a 204, a HEAD's answer, `Content-Length: 0`) is nothing, whatever its header said.
    func finish() throws(Invalid) -> [ByteBuffer] {
        guard fed else { return [] }
        return try run(.end(nil))
    }

    private func run(_ part: HTTPClientResponsePart) throws(Invalid) -> [ByteBuffer] {
        do {
            try channel.writeInbound(part)
            try channel.throwIfErrorCaught()
            var out: [ByteBuffer] = []
            while let next = try channel.readInbound(as: HTTPClientResponsePart.self) {
                if case .body(let buffer) = next, buffer.readableBytes > 0 { out.append(buffer) }
            }
            return out
        } catch let error as NIOHTTPDecompression.DecompressionError where error == .limit {
            throw Invalid(reason: "it inflates past the limit", tooLarge: true)
        } catch {
            throw Invalid(reason: "\(error)")
        }
    }
}
