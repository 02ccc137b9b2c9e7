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

    /// nil when the response names no coding this decoder undoes (none, `identity`, or one not asked for:
    /// those bodies are kept as sent).
    init?(headers: [(String, String)]) {
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
        // The decompressor's own limit is off: the sink's `ResponseLimit` counts the decoded bytes.
        try? channel.pipeline.syncOperations.addHandler(NIOHTTPResponseDecompressor(limit: .none))
        var head = HTTPResponseHead(version: .http1_1, status: .ok)
        head.headers.add(name: "Content-Encoding", value: name)
        do {
            try channel.writeInbound(HTTPClientResponsePart.head(head))
            _ = try channel.readInbound(as: HTTPClientResponsePart.self)
        } catch {
            return nil
        }
    }

    deinit {
        _ = try? channel.finish()
    }

    /// Raised for a body that is not valid data of its coding (or ends before its coded stream does).
    struct Invalid: Error {
        var reason: String
    }

    /// The decoded bytes of one part of the coded body.
    func decode(_ part: ByteBuffer) throws(Invalid) -> [ByteBuffer] {
        try run(.body(part))
    }

    /// The body's end: the decoded bytes still held; throws when the coded stream is incomplete.
    func finish() throws(Invalid) -> [ByteBuffer] {
        try run(.end(nil))
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
        } catch {
            throw Invalid(reason: "\(error)")
        }
    }
}
