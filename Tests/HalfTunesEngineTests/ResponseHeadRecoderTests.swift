// ISO-8859-1 bytes of response heads read as Latin-1, valid UTF-8 and bodies untouched, however the reads split.
@testable import HalfTunesEngine
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@Suite struct ResponseHeadRecoderTests {
    static func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
    /// `s` as ISO-8859-1 (one byte per scalar up to U+00FF): heads as a server of Latin-1 writes them.
    static func latin1(_ s: String) -> [UInt8] { s.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) } }

    /// Feeds `input` in reads cut at `cuts` and returns what is passed on.
    static func run(_ recoder: inout ResponseHeadRecoder, _ input: [UInt8], cuts: [Int] = []) -> [UInt8] {
        var out: [UInt8] = []
        var start = 0
        for end in (cuts.filter { $0 > 0 && $0 < input.count }.sorted() + [input.count]) where end >= start {
            let piece = Array(input[start..<end])
            switch recoder.feed(piece) {
            case .unchanged: out += piece
            case .replaced(let b): out += b
            }
            start = end
        }
        return out
    }

    /// The head as the oracle reads it: the standard library's UTF-8 parser; each byte it rejects is Latin-1.
    static func oracle(_ head: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        while i < head.count {
            var parser = Unicode.UTF8.ForwardParser()
            var it = head[i...].makeIterator()
            switch parser.parseScalar(from: &it) {
            case .valid(let encoded):
                out += encoded
                i += encoded.count
            case .error, .emptyInput:
                out += Array(String(Character(Unicode.Scalar(head[i]))).utf8)
                i += 1
            }
        }
        return out
    }

    @Test func aLatin1FilenameBecomesItsLetter() {
        var r = ResponseHeadRecoder()
        let head = Self.latin1("HTTP/1.1 200 OK\r\nContent-Disposition: attachment; filename=\"foo-\u{E4}.html\"\r\n\r\n")
        let body: [UInt8] = [0xE4, 0xFF, 0x0D, 0x0A, 0x0D, 0x0A, 0xC3]
        let out = Self.run(&r, head + body)
        #expect(out == Self.bytes("HTTP/1.1 200 OK\r\nContent-Disposition: attachment; filename=\"foo-ä.html\"\r\n\r\n") + body)
        #expect(!r.readingHead)
        #expect(r.feed([0xE4, 0x80]) == .unchanged, "a body is never touched")
    }

    @Test func validUTF8AndASCIIPassAsTheyCame() {
        var r = ResponseHeadRecoder()
        let head = Self.bytes("HTTP/1.1 200 OK\r\nContent-Disposition: attachment; filename=\"résumé €😀.pdf\"\r\nETag: \"x\"\r\n\r\n")
        #expect(r.feed(head) == .unchanged)
        #expect(!r.readingHead)
    }

    /// A UTF-8 letter cut between two reads is held back and passed on whole, not read as two Latin-1 letters.
    @Test func aSequenceSplitBetweenReadsIsHeld() {
        let head = Self.bytes("HTTP/1.1 200 OK\r\nX: a😀b\r\n\r\n")
        let start = head.firstIndex(of: 0xF0)!
        for cut in start + 1...start + 3 {
            var r = ResponseHeadRecoder()
            guard case .replaced(let first) = r.feed(Array(head[..<cut])) else { Issue.record("not held"); return }
            #expect(first == Array(head[..<start]))
            #expect(Self.run(&r, Array(head[cut...])) == Array(head[start...]))
        }
        // ... and a sequence the next read breaks is Latin-1 after all.
        var r = ResponseHeadRecoder()
        _ = r.feed(Self.bytes("HTTP/1.1 200 OK\r\nX: ") + [0xC3])
        #expect(r.feed(Self.bytes("z\r\n\r\n")) == .replaced(Self.bytes("Ã") + Self.bytes("z\r\n\r\n")))
    }

    @Test func aHeadEndsAtItsEmptyLineWithBareLineFeedsToo() {
        var r = ResponseHeadRecoder()
        let out = Self.run(&r, Self.latin1("HTTP/1.1 200 OK\nX: \u{E9}\n\n") + [0xE9])
        #expect(out == Self.bytes("HTTP/1.1 200 OK\nX: é\n\n") + [0xE9])
        // Empty lines before the start line do not end a head (the decoder skips them).
        var s = ResponseHeadRecoder()
        #expect(Self.run(&s, Self.latin1("\r\n\r\nHTTP/1.1 200 OK\r\nX: \u{E9}\r\n\r\n") + [0xE9])
                == Self.bytes("\r\n\r\nHTTP/1.1 200 OK\r\nX: é\r\n\r\n") + [0xE9])
    }

    /// An interim 100 is followed by the final head, which is read as a head; 101 is followed by another protocol.
    @Test func interimResponsesAreFollowedByAHead() {
        var r = ResponseHeadRecoder()
        let stream = Self.latin1("HTTP/1.1 100 Continue\r\nX: \u{E4}\r\n\r\nHTTP/1.1 200 OK\r\nY: \u{F6}\r\n\r\n") + [0xF6]
        #expect(Self.run(&r, stream) == Self.bytes("HTTP/1.1 100 Continue\r\nX: ä\r\n\r\nHTTP/1.1 200 OK\r\nY: ö\r\n\r\n") + [0xF6])
        var s = ResponseHeadRecoder()
        #expect(Self.run(&s, Self.bytes("HTTP/1.1 101 Switching Protocols\r\n\r\n") + [0xF6]) == Self.bytes("HTTP/1.1 101 Switching Protocols\r\n\r\n") + [0xF6])
        #expect(ResponseHeadRecoder.statusCode(Self.bytes("HTTP/1.1 103 Early")) == 103)
        #expect(ResponseHeadRecoder.statusCode(Self.bytes("HTTP/1.1 2x0")) == nil)
        #expect(ResponseHeadRecoder.statusCode(Self.bytes("garbage")) == nil)
    }

    /// A start line whose code is cut short at its end ("HTTP/1.1 20", "ERROR 42") read one byte past it and
    /// trapped, for any server's first line: it has no status code.
    @Test func aStatusCodeCutShortAtTheEndOfTheLineIsNone() {
        for line in ["HTTP/1.1 20", "ERROR 42", "HTTP/1.1 2", "HTTP/1.1 ", " ", "HTTP/1.100000 20"] {
            #expect(ResponseHeadRecoder.statusCode(Self.bytes(line)) == nil, "\(line)")
            var r = ResponseHeadRecoder()
            let head = Self.bytes(line + "\r\n\r\n")
            #expect(Self.run(&r, head) == head)
        }
        #expect(ResponseHeadRecoder.statusCode(Self.bytes("HTTP/1.1 204")) == 204)
    }

    @Test func overlongsSurrogatesAndStrayBytesAreLatin1() {
        for seq: [UInt8] in [[0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x80], [0xFF], [0xF5]] {
            var r = ResponseHeadRecoder()
            let head = Self.bytes("HTTP/1.1 200 OK\r\nX: ") + seq + Self.bytes("\r\n\r\n")
            #expect(Self.run(&r, head) == Self.oracle(head), "\(seq)")
            #expect(Self.oracle(head) != head)
        }
    }

    /// Random heads (ASCII, UTF-8, stray bytes) and bodies (any bytes) over a kept-alive connection, cut at random:
    /// each head comes out as the oracle reads it, each body byte for byte.
    @Test func randomResponsesCutAnywhere() {
        var rng = SplitMix64(seed: 27_0001)
        let pieces: [[UInt8]] = [Self.bytes("a"), Self.bytes(" "), Self.bytes("ä"), Self.bytes("€"), Self.bytes("😀"),
                                 [0xE4], [0xC3], [0xE2, 0x82], [0xF0, 0x9F], [0x80], [0xFF], Self.bytes(";")]
        for _ in 0..<500 {
            var recoder = ResponseHeadRecoder()
            var received: [UInt8] = []
            var expected: [UInt8] = []
            for response in 0..<Int.random(in: 1...3, using: &rng) {
                if response > 0 { recoder.expectHead() }
                var head = Self.bytes("HTTP/1.1 200 OK\r\n")
                if Bool.random(using: &rng) { head = Self.bytes("HTTP/1.1 100 Continue\r\n\r\n") + head }
                for _ in 0..<Int.random(in: 0...4, using: &rng) {
                    head += Self.bytes("X-F: ")
                    for _ in 0..<Int.random(in: 0...12, using: &rng) { head += pieces.randomElement(using: &rng)! }
                    head += Self.bytes("\r\n")
                }
                head += Self.bytes("\r\n")
                var body = (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                if Bool.random(using: &rng) { body += Self.bytes("\r\n\r\n") + [0xE4] }
                let stream = head + body
                let cuts = (0..<Int.random(in: 0...6, using: &rng)).map { _ in Int.random(in: 0...stream.count, using: &rng) }
                received += Self.run(&recoder, stream, cuts: cuts)
                expected += Self.oracle(head) + body
            }
            #expect(received == expected)
            if received != expected { return }
        }
    }

    /// Through swift-nio's own decoder, as on a connection: the header value holds "ä", the body is as sent, and
    /// the next request's response is read as a head again.
    @Test func throughTheDecoderOfAConnection() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHTTPClientHandlers()
        try ResponseHeadRecodingHandler.install(in: channel.pipeline.syncOperations)
        defer { _ = try? channel.finish() }
        for (letter, byte) in [("ä", UInt8(0xE4)), ("é", UInt8(0xE9))] {
            try channel.writeOutbound(HTTPClientRequestPart.head(.init(version: .http1_1, method: .GET, uri: "/")))
            try channel.writeOutbound(HTTPClientRequestPart.end(nil))
            while try channel.readOutbound(as: ByteBuffer.self) != nil {}
            let head = Self.bytes("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Disposition: attachment; filename=\"foo-")
                + [byte] + Self.bytes(".html\"\r\n\r\n")
            let wire = head + [byte, 0xFF, 0x0A]
            for b in wire {  // one byte per read: every cut at once
                try channel.writeInbound(channel.allocator.buffer(bytes: [b]))
            }
            guard case .head(let h) = try channel.readInbound(as: HTTPClientResponsePart.self) else {
                Issue.record("no head"); return
            }
            #expect(h.headers["Content-Disposition"] == ["attachment; filename=\"foo-\(letter).html\""])
            var body: [UInt8] = []
            while let part = try channel.readInbound(as: HTTPClientResponsePart.self) {
                if case .body(let b) = part { body += Array(b.readableBytesView) }
            }
            #expect(body == [byte, 0xFF, 0x0A])
        }
    }
}
