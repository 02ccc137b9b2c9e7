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

@Suite("Line framing, fuzzed")
struct LineFrameDecoderFuzzTests {
    /// Random streams of lines (some over the limit, some with \r, some empty) cut into random chunks: the
    /// decoder yields exactly the lines a reference splitter finds, or refuses the stream at the first line
    /// over the limit, having yielded every line before it. 3,000 streams, fixed seed.
    @Test func randomStreamsInRandomChunks() throws {
        var state: UInt64 = 0xDEC0_DE00
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let max = 64
        for _ in 0..<3000 {
            var stream: [UInt8] = []
            var expected: [[UInt8]] = []
            var tooLongAt: Int?
            for index in 0..<Int(next() % 12) {
                let length = Int(next() % 80)
                var line = (0..<length).map { _ in UInt8(truncatingIfNeeded: next() % 255) }.map { $0 == 10 ? 11 : $0 }
                if next() % 4 == 0 { line.append(13) }
                stream += line + [10]
                let content = line.last == 13 ? Array(line.dropLast()) : line
                if line.count > max, tooLongAt == nil { tooLongAt = index }
                if tooLongAt == nil { expected.append(content) }
            }
            let channel = EmbeddedChannel()
            try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineFrameDecoder(maxLength: max)))
            var got: [[UInt8]] = []
            var refused = false
            var offset = 0
            while offset < stream.count {
                let size = Swift.min(stream.count - offset, 1 + Int(next() % 40))
                do {
                    try channel.writeInbound(ByteBuffer(bytes: stream[offset..<(offset + size)]))
                } catch is LineFrameDecoder.LineTooLong {
                    refused = true
                    break
                }
                offset += size
                while let line = try channel.readInbound(as: ByteBuffer.self) { got.append(Array(line.readableBytesView)) }
            }
            while let line = try channel.readInbound(as: ByteBuffer.self) { got.append(Array(line.readableBytesView)) }
            #expect(refused == (tooLongAt != nil))
            #expect(got == expected)
            _ = try? channel.finish()
        }
    }
}
