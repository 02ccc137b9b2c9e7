@testable import HalfTunesDaemon
import NIOCore
import NIOEmbedded
import Testing

@Suite("Line framing")
struct LineFrameDecoderTests {
    func channel(max: Int = 16) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineFrameDecoder(maxLength: max)))
        return channel
    }

    func lines(_ channel: EmbeddedChannel) throws -> [String] {
        var out: [String] = []
        while let buffer = try channel.readInbound(as: ByteBuffer.self) {
            out.append(String(buffer: buffer))
        }
        return out
    }

    @Test func splitsOnNewlinesAcrossArbitraryChunks() throws {
        let ch = try channel()
        for piece in ["ab", "c\nde", "f\n\ng", "h\r\n"] {
            try ch.writeInbound(ByteBuffer(string: piece))
        }
        #expect(try lines(ch) == ["abc", "def", "", "gh"])
        #expect(try ch.finish().isClean)
    }

    @Test func aLastLineWithoutNewlineIsStillDeliveredAtEOF() throws {
        let ch = try channel()
        try ch.writeInbound(ByteBuffer(string: "x\ntail"))
        #expect(try lines(ch) == ["x"])
        _ = try ch.finish()
        #expect(try lines(ch) == ["tail"])
    }

    @Test func refusesOverlongLinesWithoutWaitingForTheirEnd() throws {
        let ch = try channel(max: 8)
        #expect(throws: LineFrameDecoder.LineTooLong.self) {
            try ch.writeInbound(ByteBuffer(string: "123456789"))
        }
        let ch2 = try channel(max: 8)
        #expect(throws: LineFrameDecoder.LineTooLong.self) {
            try ch2.writeInbound(ByteBuffer(string: "1234\n123456789\n"))
        }
    }

    @Test func exactlyMaxLengthIsAccepted() throws {
        let ch = try channel(max: 8)
        try ch.writeInbound(ByteBuffer(string: "12345678\n"))
        #expect(try lines(ch) == ["12345678"])
    }
}
