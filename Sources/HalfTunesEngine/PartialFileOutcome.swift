// How a download attempt's end, its partial file's final state and stop() combine into one outcome.
import HalfTunesCore
import HalfTunesProtocol

enum PartialFileOutcome {
    /// The outcome of a download attempt that ended as `finish` says, once its file is finished
    /// (`snapshot`), and the durable ranges to checkpoint (nil: none, because the download is complete and
    /// its length goes to the journal with the publish intent, one write fewer per file).
    static func conclude(_ finish: DownloadMachine.Finish, stopRequested: Bool, snapshot finished: PartialWriter.Snapshot)
        -> (outcome: AttemptOutcome, checkpoint: ByteRanges?) {
        var snapshot = finished
        let outcome: AttemptOutcome
        switch finish {
        case let .changed(reason, url):
            // Nothing of this version may stay next to another's: the next attempt starts from byte 0.
            let error = TaskError(code: TaskErrorCode.invalidResponse,
                                  message: "The resource at \(url) changed during the download (\(reason)); "
                                      + "what was written is discarded and the next attempt starts from byte 0")
            return (.failed(TransferFailure(error: error, isTransient: true, durable: snapshot.durableRanges)),
                    snapshot.durableRanges)
        case let .segmented(total, start, lastFailure, keepPrefixOnly):
            if keepPrefixOnly, !snapshot.durableRanges.covers(total: total) {
                // The server does not serve further ranges as asked: the next attempt resumes the part from
                // byte 0 with one request, which the bytes after it would only confuse.
                snapshot.durableRanges = ByteRanges(prefix: snapshot.durableRanges.prefixLength)
            }
            outcome = segmentedOutcome(total: total, start: start, stopRequested: stopRequested, snapshot: snapshot,
                                       lastFailure: lastFailure)
        case .single(let end):
            outcome = self.outcome(end: end, stopRequested: stopRequested, snapshot: snapshot)
        case .nothing(let error):
            let durable = snapshot.durableRanges
            outcome = error.map { .failed(TransferFailure(error: $0, isTransient: false, durable: durable)) }
                ?? .stopped(durable: durable)
        }
        if case .completed = outcome { return (outcome, nil) }
        return (outcome, snapshot.durableRanges)
    }

    static func segmentedOutcome(total: Int64, start: ResponseStart, stopRequested: Bool,
                                 snapshot: PartialWriter.Snapshot, lastFailure: TransferFailure?) -> AttemptOutcome {
        let durable = snapshot.durableRanges
        if let error = snapshot.error { return fileFailure(error, durable: durable) }
        if durable.covers(total: total), snapshot.writtenRanges == durable {
            return .completed(totalBytes: total, validators: start.validators)
        }
        if stopRequested { return .stopped(durable: durable) }
        var failure = lastFailure ?? TransferFailure(
            error: TaskError(code: TaskErrorCode.connectionLost,
                             message: "The download from \(start.finalURL) ended with bytes \(ByteRanges(durable.gaps(total: total))) missing"),
            isTransient: true, durable: durable)
        failure.durable = durable
        return .failed(failure)
    }

    /// One request's end. Precedence: a body that arrived completely (and checks out) completes; then stop()
    /// gives `.stopped`; then a file error; then the engine's own decision on the response; then the idle
    /// timeout; then the transport error.
    static func outcome(end info: DownloadMachine.RequestEnd, stopRequested: Bool,
                        snapshot: PartialWriter.Snapshot) -> AttemptOutcome {
        let durable = snapshot.durableRanges
        if case .alreadyComplete(let total, let start)? = info.decided {
            if let error = snapshot.error { return fileFailure(error, durable: durable) }
            if durable.covers(total: total) { return .completed(totalBytes: total, validators: start.validators) }
        }
        if info.transportFailure == nil, let start = info.start, info.decided == nil {
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
        if let failure = info.transportFailure {
            return .failed(TransferFailure(error: failure.error, isTransient: failure.isTransient, durable: durable))
        }
        // The request succeeded without a response head the engine accepted: cannot happen with AHC.
        let error = TaskError(code: TaskErrorCode.internalError,
                              message: "The request to \(info.finalURL) ended without a usable response")
        return .failed(TransferFailure(error: error, isTransient: true, durable: durable))
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
