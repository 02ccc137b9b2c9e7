import NIOCore
import Testing
@testable import HalfTunesEngine

/// A coded body is decoded part by part, whatever the parts' boundaries; a body that is not its coding's data, or
/// ends before its coded stream does, is refused; responses with no coding we asked for are not decoded.
@Suite struct ContentDecoderTests {
    static let plain = Array(String(repeating: "halftunesd decodes gzip and deflate bodies of data tasks\n", count: 1000).utf8)
    /// `gzip.compress(plain, mtime=0)` (Python).
    static let gzipped: [UInt8] = [
        31,139,8,0,0,0,0,0,2,3,237,203,193,9,2,49,16,0,192,191,85,108,107,171,155,120,135,199,69,72,252,88,189,90,134,
        48,223,129,217,242,232,235,117,182,89,81,237,54,170,205,184,191,247,103,228,249,131,126,228,106,113,29,181,
        127,125,244,168,92,25,43,231,99,94,54,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,
        81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,
        81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,
        81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,
        81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,197,255,140,
        31,214,134,206,86,168,222,0,0,
    ]
    /// `zlib.compress(plain)` (Python): what `Content-Encoding: deflate` means (RFC 9110 8.4.1.2).
    static let zlibbed: [UInt8] = [
        120,156,237,203,193,9,2,49,16,0,192,191,85,108,107,171,155,120,135,199,69,72,252,88,189,90,134,48,223,129,217,
        242,232,235,117,182,89,81,237,54,170,205,184,191,247,103,228,249,131,126,228,106,113,29,181,127,125,244,168,
        92,25,43,231,99,94,54,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,
        69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,
        69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,
        69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,
        69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,69,81,20,197,255,140,31,72,172,128,32,
    ]

    static func decodeAll(_ coded: [UInt8], coding: String, partSize: Int) throws -> [UInt8] {
        let decoder = try #require(ContentDecoder(headers: [("Content-Encoding", coding)], maxDecodedBytes: 1 << 20))
        var out: [UInt8] = []
        var start = 0
        while start < coded.count {
            let end = min(coded.count, start + partSize)
            for b in try decoder.decode(ByteBuffer(bytes: coded[start..<end])) { out += b.readableBytesView }
            start = end
        }
        for b in try decoder.finish() { out += b.readableBytesView }
        return out
    }

    @Test(arguments: [1, 7, 100, 100_000])
    func gzipAndDeflateDecodeInAnyParts(partSize: Int) throws {
        #expect(try Self.decodeAll(Self.gzipped, coding: "gzip", partSize: partSize) == Self.plain)
        #expect(try Self.decodeAll(Self.gzipped, coding: "x-gzip", partSize: partSize) == Self.plain)
        #expect(try Self.decodeAll(Self.zlibbed, coding: "Deflate", partSize: partSize) == Self.plain)
    }

    @Test func aTruncatedOrCorruptBodyIsRefused() throws {
        #expect(throws: ContentDecoder.Invalid.self) {
            _ = try Self.decodeAll(Array(Self.gzipped.prefix(100)), coding: "gzip", partSize: 50)
        }
        #expect(throws: ContentDecoder.Invalid.self) {
            _ = try Self.decodeAll(Array("not gzip at all".utf8), coding: "gzip", partSize: 5)
        }
    }

    /// An empty body (a HEAD's or 204's answer with the header) is nothing; a body that inflates past the limit is
    /// refused as too large while it is decoded, not once it is all in memory.
    @Test func anEmptyBodyIsNothingAndABombIsStoppedEarly() throws {
        let empty = try #require(ContentDecoder(headers: [("Content-Encoding", "gzip")], maxDecodedBytes: 100))
        #expect(try empty.finish().isEmpty)
        empty.close()
        let small = try #require(ContentDecoder(headers: [("Content-Encoding", "gzip")], maxDecodedBytes: 10_000))
        do {
            _ = try small.decode(ByteBuffer(bytes: Self.gzipped))
            Issue.record("57,000 decoded bytes passed a limit of 10,000")
        } catch {
            #expect(error.tooLarge)
        }
        small.close()
    }

    @Test func onlyOneCodingWeAskedForIsDecoded() {
        #expect(ContentDecoder(headers: [], maxDecodedBytes: 1 << 20) == nil)
        #expect(ContentDecoder(headers: [("Content-Encoding", "identity")], maxDecodedBytes: 1 << 20) == nil)
        #expect(ContentDecoder(headers: [("Content-Encoding", "br")], maxDecodedBytes: 1 << 20) == nil)
        #expect(ContentDecoder(headers: [("Content-Encoding", "gzip, gzip")], maxDecodedBytes: 1 << 20) == nil)
        #expect(ContentDecoder(headers: [("content-encoding", " GZIP ")], maxDecodedBytes: 1 << 20) != nil)
    }
}
