// How the end of a download's request, its partial file's final state and stop() combine into one outcome.
import HalfTunesProtocol

enum PartialFileOutcome {
    /// Precedence: a body that arrived completely (and checks out) completes; then stop() gives `.stopped`;
    /// then a file error; then the engine's own decision on the response; then the idle timeout; then the
    /// transport error.
    static func outcome(result: Result<Void, Error>, stopRequested: Bool, info: PartialFileSink.FinishInfo,
                        snapshot: PartialWriter.Snapshot, url: String) -> AttemptOutcome {
        let durable = snapshot.durable
        if case .alreadyComplete(let total, let start)? = info.decided {
            if let error = snapshot.error { return fileFailure(error, durable: durable) }
            if durable == total { return .completed(totalBytes: total, validators: start.validators) }
        }
        if case .success = result, let start = info.start, info.decided == nil {
            if let error = snapshot.error { return fileFailure(error, durable: durable) }
            return verifyLength(start: start, expectedEnd: info.expectedEnd, written: snapshot.written,
                                durable: durable, url: info.finalURL)
        }
        if stopRequested { return .stopped(durableBytes: durable) }
        if let error = snapshot.error { return fileFailure(error, durable: durable) }
        switch info.decided {
        case .fail(let error, let transient, let retryAfter)?:
            return .failed(TransferFailure(error: error, isTransient: transient, retryAfter: retryAfter,
                                           durableBytes: durable))
        case .discard(let reason)?:
            let error = TaskError(code: TaskErrorCode.invalidResponse,
                                  message: "Unusable range response from \(info.finalURL): \(reason); "
                                      + "the partial file was discarded and the next attempt starts from byte 0")
            return .failed(TransferFailure(error: error, isTransient: true, durableBytes: durable))
        case .alreadyComplete?, nil:
            break
        }
        if info.timedOut {
            let error = TaskError(code: TaskErrorCode.timedOut,
                                  message: "No data from \(ErrorMapping.hostDescription(info.finalURL)) within the request timeout")
            return .failed(TransferFailure(error: error, isTransient: true, durableBytes: durable))
        }
        switch result {
        case .failure(let error):
            let (taskError, transient) = ErrorMapping.classify(error, url: info.finalURL)
            return .failed(TransferFailure(error: taskError, isTransient: transient, durableBytes: durable))
        case .success:
            // The request succeeded without a response head the engine accepted: cannot happen with AHC.
            let error = TaskError(code: TaskErrorCode.internalError,
                                  message: "The request to \(url) ended without a usable response")
            return .failed(TransferFailure(error: error, isTransient: true, durableBytes: durable))
        }
    }

    static func fileFailure(_ error: FileIOError, durable: Int64) -> AttemptOutcome {
        .failed(TransferFailure(error: error.taskError, isTransient: error.isTransient, durableBytes: durable))
    }

    /// A body that ended normally completes only if it has every announced byte (and no more).
    static func verifyLength(start: ResponseStart, expectedEnd: Int64?, written: Int64, durable: Int64,
                             url: String) -> AttemptOutcome {
        let announced = [expectedEnd, start.expectedTotal].compactMap { $0 }
        if let short = announced.filter({ written < $0 }).max() {
            let error = TaskError(code: TaskErrorCode.connectionLost,
                                  message: "The response from \(url) ended after byte \(written) of \(short)")
            return .failed(TransferFailure(error: error, isTransient: true, durableBytes: durable))
        }
        if let limit = announced.min(), written > limit {
            let error = TaskError(code: TaskErrorCode.invalidResponse,
                                  message: "The response from \(url) carried \(written) bytes, more than the \(limit) it announced")
            return .failed(TransferFailure(error: error, isTransient: false, durableBytes: durable))
        }
        guard durable == written else {
            let error = TaskError(code: TaskErrorCode.ioError,
                                  message: "Only \(durable) of \(written) bytes reached the disk")
            return .failed(TransferFailure(error: error, isTransient: true, durableBytes: durable))
        }
        return .completed(totalBytes: written, validators: start.validators)
    }
}
