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
        let view = buffer.readableBytesView
        let start = view.index(view.startIndex, offsetBy: min(scanned, view.count))
        guard let newline = view[start...].firstIndex(of: UInt8(ascii: "\n")) else {
            scanned = view.count
            if view.count > maxLength { throw LineTooLong() }
            return .needMoreData
        }
        let length = newline - view.startIndex
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
