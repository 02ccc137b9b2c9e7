// AttemptVerdict: what the end of an attempt means for its task, for every kind, outcome and task state.
import HalfTunesCore
import HalfTunesProtocol
import Testing

@Suite("The end of an attempt")
struct AttemptVerdictTests {
    let response = TaskResponse(status: 404, headers: [], body: nil, bodyBytes: 0, truncated: false)
    let ok = TaskResponse(status: 201, headers: [], body: "b2s=", bodyBytes: 2, truncated: false)
    let busy = TaskError(code: TaskErrorCode.serverBusy, message: "503", httpStatus: 503)
    let gone = TaskError(code: TaskErrorCode.httpStatus, message: "404", httpStatus: 404)

    @Test func aDownloadRecordsItsDurableLengthWhateverHappened() {
        let outcomes: [(AttemptOutcome, Int64)] = [
            (.completed(totalBytes: 900, validators: Validators(etag: "\"e\"", lastModified: nil)), 900),
            (.stopped(durableBytes: 300), 300),
            (.failed(TransferFailure(error: busy, isTransient: true, durableBytes: 200)), 200),
        ]
        for (outcome, durable) in outcomes {
            for running in [true, false] {
                #expect(AttemptVerdict.of(outcome, kind: .download, stillRunning: running, jitterSample: 0.5).durableBytes == durable)
            }
        }
        // Uploads and data tasks keep nothing between attempts.
        for kind in [TaskKind.upload, .data] {
            #expect(AttemptVerdict.of(.stopped(durableBytes: 0), kind: kind, stillRunning: false, jitterSample: 0).durableBytes == nil)
            #expect(AttemptVerdict.of(.responded(ok), kind: kind, stillRunning: true, jitterSample: 0).durableBytes == nil)
        }
    }

    @Test func aTaskNoLongerRunningOnlyHasItsRowRecorded() {
        let outcomes: [AttemptOutcome] = [
            .completed(totalBytes: 10, validators: Validators(etag: nil, lastModified: nil)), .responded(ok),
            .stopped(durableBytes: 5), .failed(TransferFailure(error: gone, isTransient: false, durableBytes: 0), response: response),
        ]
        for outcome in outcomes {
            for kind in TaskKind.allCases {
                #expect(AttemptVerdict.of(outcome, kind: kind, stillRunning: false, jitterSample: 0.3).next == .record,
                        "\(outcome) \(kind)")
            }
        }
    }

    @Test func aRunningTaskGoesOnAsItsOutcomeSays() {
        #expect(AttemptVerdict.of(.completed(totalBytes: 42, validators: Validators(etag: nil, lastModified: nil)),
                                  kind: .download, stillRunning: true, jitterSample: 0).next == .beginCompletion(totalBytes: 42))
        #expect(AttemptVerdict.of(.responded(ok), kind: .data, stillRunning: true, jitterSample: 0).next == .complete(ok))

        // Transient: the state machine waits and retries with the given jitter; no response is kept.
        let transient = AttemptVerdict.of(.failed(TransferFailure(error: busy, isTransient: true, retryAfter: 7, durableBytes: 0),
                                                  response: response), kind: .upload, stillRunning: true, jitterSample: 0.25)
        #expect(transient.next == .fail(.transferFailed(busy, transient: true, retryAfter: 7, jitterSample: 0.25), keepResponse: nil))
        // Permanent: the task fails and keeps the response that explains it.
        let permanent = AttemptVerdict.of(.failed(TransferFailure(error: gone, isTransient: false, durableBytes: 0), response: response),
                                          kind: .data, stillRunning: true, jitterSample: 0.9)
        #expect(permanent.next == .fail(.transferFailed(gone, transient: false, retryAfter: nil, jitterSample: 0.9), keepResponse: response))
        // Stopped without being asked: retried soon, as a lost connection.
        guard case let .fail(.transferFailed(error, transient, retryAfter, sample), kept) =
                AttemptVerdict.of(.stopped(durableBytes: 9), kind: .download, stillRunning: true, jitterSample: 0.1).next else {
            Issue.record("a stop nobody asked for must be retried")
            return
        }
        #expect(error.code == TaskErrorCode.connectionLost && transient && retryAfter == nil && sample == 0.1 && kept == nil)
    }
}
