#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import NIOCore

/// Splits the byte stream into `\n`-terminated lines (a trailing `\r` is dropped), refusing any line
/// longer than `maxLength` without buffering it whole.
struct LineFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    struct LineTooLong: Error {}

    let maxLength: Int
    private var scanned = 0

    init(maxLength: Int) { self.maxLength = maxLength }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let available = buffer.readableBytes
        let from = min(scanned, available)
        let found: Int? = buffer.withUnsafeReadableBytes { raw in
            guard let base = raw.baseAddress, from < raw.count,
                  let hit = memchr(base + from, Int32(UInt8(ascii: "\n")), raw.count - from) else { return nil }
            return UnsafeRawPointer(hit) - base
        }
        guard let length = found else {
            scanned = available
            if available > maxLength { throw LineTooLong() }
            return .needMoreData
        }
        scanned = 0
        if length > maxLength { throw LineTooLong() }
        var line = buffer.readSlice(length: length)!
        buffer.moveReaderIndex(forwardBy: 1)
        if line.readableBytesView.last == UInt8(ascii: "\r") { line = line.getSlice(at: line.readerIndex, length: length - 1)! }
        context.fireChannelRead(wrapInboundOut(line))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        if buffer.readableBytes > 0, seenEOF {
            // A last request without its newline: still answer it.
            let line = buffer.readSlice(length: buffer.readableBytes)!
            context.fireChannelRead(wrapInboundOut(line))
        }
        return .needMoreData
    }
}
