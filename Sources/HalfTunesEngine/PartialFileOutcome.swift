// How the end of a download's request, its partial file's final state and stop() combine into one outcome.
import HalfTunesProtocol

enum PartialFileOutcome {
    /// Precedence: a body that arrived completely (and checks out) completes; then stop() gives `.stopped`;
    /// then a file error; then the engine's own decision on the response; then the idle timeout; then the
    /// transport error.
    static func outcome(result: Result<Void, Error>, stopRequested: Bool, info: PartialFileSink.FinishInfo,
                        snapshot: PartialWriter.Snapshot, url: String, proxy: ProxyServer? = nil) -> AttemptOutcome {
        let durable = snapshot.durableRanges
        if case .alreadyComplete(let total, let start)? = info.decided {
            if let error = snapshot.error { return fileFailure(error, durable: durable) }
            if durable.covers(total: total) { return .completed(totalBytes: total, validators: start.validators) }
        }
        if case .success = result, let start = info.start, info.decided == nil {
            if let error = snapshot.error { return fileFailure(error, durable: durable) }
            return verifyLength(start: start, expectedEnd: info.expectedEnd, written: snapshot.writtenRanges,
                                durable: durable, url: info.finalURL)
        }
        if stopRequested { return .stopped(durable: durable) }
        if let error = snapshot.error { return fileFailure(error, durable: durable) }
        switch info.decided {
        case .fail(let error, let transient, let retryAfter)?:
            return .failed(TransferFailure(error: error, isTransient: transient, retryAfter: retryAfter,
                                           durable: durable))
        case .discard(let reason)?:
            let error = TaskError(code: TaskErrorCode.invalidResponse,
                                  message: "Unusable range response from \(info.finalURL): \(reason); "
                                      + "the partial file was discarded and the next attempt starts from byte 0")
            return .failed(TransferFailure(error: error, isTransient: true, durable: durable))
        case .changed(let reason)?:
            let error = TaskError(code: TaskErrorCode.invalidResponse,
                                  message: "The resource at \(info.finalURL) changed (\(reason)); the partial file was "
                                      + "discarded and the next attempt starts from byte 0")
            return .failed(TransferFailure(error: error, isTransient: true, durable: durable))
        case .alreadyComplete?, .segment?, nil:
            break
        }
        if info.timedOut {
            return .failed(TransferFailure(error: ErrorMapping.idleTimeout(info.finalURL), isTransient: true,
                                           durable: durable))
        }
        switch result {
        case .failure(let error):
            let (taskError, transient) = ErrorMapping.classify(error, url: info.finalURL, proxy: proxy)
            return .failed(TransferFailure(error: taskError, isTransient: transient, durable: durable))
        case .success:
            // The request succeeded without a response head the engine accepted: cannot happen with AHC.
            let error = TaskError(code: TaskErrorCode.internalError,
                                  message: "The request to \(url) ended without a usable response")
            return .failed(TransferFailure(error: error, isTransient: true, durable: durable))
        }
    }

    static func fileFailure(_ error: FileIOError, durable: ByteRanges) -> AttemptOutcome {
        .failed(TransferFailure(error: error.taskError, isTransient: error.isTransient, durable: durable))
    }

    /// A body that ended normally completes only if the file has every announced byte (and no more): the
    /// written ranges must be one range from 0, and all of it durable.
    static func verifyLength(start: ResponseStart, expectedEnd: Int64?, written writtenRanges: ByteRanges,
                             durable: ByteRanges, url: String) -> AttemptOutcome {
        let written = writtenRanges.upperBound
        let announced = [expectedEnd, start.expectedTotal].compactMap { $0 }
        if let short = announced.filter({ written < $0 }).max() {
            let error = TaskError(code: TaskErrorCode.connectionLost,
                                  message: "The response from \(url) ended after byte \(written) of \(short)")
            return .failed(TransferFailure(error: error, isTransient: true, durable: durable))
        }
        if let limit = announced.min(), written > limit {
            let error = TaskError(code: TaskErrorCode.invalidResponse,
                                  message: "The response from \(url) carried \(written) bytes, more than the \(limit) it announced")
            return .failed(TransferFailure(error: error, isTransient: false, durable: durable))
        }
        guard writtenRanges.isPrefix else {
            let error = TaskError(code: TaskErrorCode.connectionLost,
                                  message: "The file from \(url) still misses bytes \(ByteRanges(writtenRanges.gaps(total: written)))")
            return .failed(TransferFailure(error: error, isTransient: true, durable: durable))
        }
        guard durable == writtenRanges else {
            let error = TaskError(code: TaskErrorCode.ioError,
                                  message: "Only \(durable.count) of \(written) bytes reached the disk")
            return .failed(TransferFailure(error: error, isTransient: true, durable: durable))
        }
        return .completed(totalBytes: written, validators: start.validators)
    }
}
