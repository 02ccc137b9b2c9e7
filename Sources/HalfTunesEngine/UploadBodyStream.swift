// Streams an upload's source file as the request body: one chunk read and written at a time, metered.
import AsyncHTTPClient
import Dispatch
import NIOCore
import HalfTunesProtocol

/// The request body of an upload. Chunks are read with `pread` on a queue of their own (never on the event
/// loop) and handed to AsyncHTTPClient one at a time: the next chunk is read only once the previous write
/// was accepted, and AsyncHTTPClient holds writes back while the socket is not writable. So at most one
/// chunk is in memory per upload, and a slow server slows the reading down. Bandwidth limits delay each
/// chunk before it is written. Each call of the stream closure (a 307/308 redirect calls it again) sends the
/// file from byte 0. Before the last chunk is written the file is checked for changes
/// (`UploadSource.verifyUnchanged`), so a server never receives a whole body of a file that changed.
final class UploadBodyStream: Sendable {
    static let chunkSize = 256 << 10

    private let source: UploadSource
    private let eventLoop: EventLoop
    private let limiter: RateLimiter?
    private let readQueue: DispatchQueue
    /// Event-loop state: whether the stream itself (reading the disk, waiting for the limits) holds the
    /// body back, so the idle timeout does not blame the server for it.
    private let busy: NIOLoopBoundBox<Bool>
    /// Set by `close()`: no chunk is read any more.
    private let closed: NIOLoopBoundBox<Bool>

    init(source: UploadSource, eventLoop: EventLoop, limiter: RateLimiter?, label: String) {
        self.source = source
        self.eventLoop = eventLoop
        self.limiter = limiter
        self.readQueue = DispatchQueue(label: label)
        self.busy = .makeBoxSendingValue(false, eventLoop: eventLoop)
        self.closed = .makeBoxSendingValue(false, eventLoop: eventLoop)
    }

    /// Ends the stream for good (event loop only) and closes the source once a read in flight is over.
    func close() {
        closed.value = true
        busy.value = false
        let source = self.source
        readQueue.async { source.close() }
    }

    /// True while a chunk is being read or held back for the bandwidth limits (event loop only).
    var isHoldingBack: Bool { busy.value }

    var body: HTTPClient.Body {
        .stream(contentLength: source.size) { writer in self.send(writer) }
    }

    private func send(_ writer: HTTPClient.Body.StreamWriter) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        eventLoop.execute { self.step(writer, offset: 0, promise) }
        return promise.futureResult
    }

    private func step(_ writer: HTTPClient.Body.StreamWriter, offset: Int64, _ promise: EventLoopPromise<Void>) {
        guard !closed.value else { return promise.fail(EngineAbort.stopped) }
        busy.value = true
        let source = self.source, eventLoop = self.eventLoop
        readQueue.async {
            let result: Result<ByteBuffer?, UploadSourceError>
            do throws(UploadSourceError) {
                if offset >= source.size {
                    if source.size == 0 { try source.verifyUnchanged() }
                    result = .success(nil)
                } else {
                    let chunk = try source.read(at: offset, count: Self.chunkSize)
                    // Checked before the last chunk goes out: the server never sees a whole body of a changed file.
                    if offset + Int64(chunk.readableBytes) >= source.size { try source.verifyUnchanged() }
                    result = .success(chunk)
                }
            } catch {
                result = .failure(error)
            }
            eventLoop.execute { self.chunkRead(result, writer, offset: offset, promise) }
        }
    }

    private func chunkRead(_ result: Result<ByteBuffer?, UploadSourceError>, _ writer: HTTPClient.Body.StreamWriter,
                           offset: Int64, _ promise: EventLoopPromise<Void>) {
        switch result {
        case .failure(let error):
            busy.value = false
            promise.fail(error)
        case .success(nil):
            busy.value = false
            promise.succeed(())
        case .success(let chunk?):
            let n = chunk.readableBytes
            guard let limiter else { return write(chunk, writer, offset: offset, promise) }
            let reservation = limiter.reserve(n)
            holdBack(reservation) { self.write(chunk, writer, offset: offset, promise) }
        }
    }

    /// Runs `then` once the limits let the reserved bytes pass, asking again every `maximumWaitSlice` so a
    /// changed limit applies at once.
    private func holdBack(_ reservation: RateLimiter.Reservation, then: @escaping () -> Void) {
        guard let limiter else { return then() }
        let delay = limiter.delay(for: reservation)
        guard delay > 0.0005, !closed.value else { return then() }
        let slice = min(delay, RateLimiter.maximumWaitSlice)
        eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Seconds.nanoseconds(slice))) {
            self.holdBack(reservation, then: then)
        }
    }

    private func write(_ chunk: ByteBuffer, _ writer: HTTPClient.Body.StreamWriter, offset: Int64,
                       _ promise: EventLoopPromise<Void>) {
        busy.value = false
        guard !closed.value else { return promise.fail(EngineAbort.stopped) }
        let next = offset + Int64(chunk.readableBytes)
        writer.write(.byteBuffer(chunk)).hop(to: eventLoop).assumeIsolated().whenComplete { result in
            switch result {
            case .success: self.step(writer, offset: next, promise)
            case .failure(let error): promise.fail(error)
            }
        }
    }
}
