// Expected checksums: checked at task.create, verified off the actor before a download is published.
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Crash point: the digest is being computed (the task is still `running` in phase `transfer`).
    static let crashWhileVerifying = "checksum.verifying"

    /// Called by `publish` before anything is journaled. Returns true when the task has an expected checksum
    /// that was not verified yet: the digest is then computed off the actor, and the task is published (or
    /// fails with `checksumMismatch`, its partial data discarded) when it is known.
    ///
    /// Crash safety: `phase = publishing` is journaled only after a successful verification, and recovery
    /// publishes only tasks in that phase. A crash during verification leaves the task `running` in phase
    /// `transfer`: on restart it resumes at its full length (the server answers 416), and is verified again.
    func verifyChecksumFirst(_ id: Int64, total: Int64) -> Bool {
        guard let t = tasks[id], let text = t.record.checksum, t.record.phase == .transfer, !t.checksumVerified
        else { return false }
        guard let expected = Checksum(parsing: text) else {
            // Refused at task.create; a journal written by hand could still hold one.
            failChecksum(id, TaskError(code: TaskErrorCode.checksumMismatch,
                                       message: "The expected checksum '\(text)' cannot be read; the file was not published"))
            return true
        }
        let attempt = t.record.attempts
        let path = t.record.partialPath
        logger.debug("verifying checksum", metadata: ["task": "\(id)", "bytes": "\(total)"])
        Task.detached { [weak self] in
            CrashPoints.hit(Self.crashWhileVerifying)
            let result = Result { () throws(FileIOError) -> Checksum in try Checksum.sha256(ofFile: path) }
            await self?.checksumComputed(id, attempt: attempt, total: total, expected: expected, result: result)
        }
        return true
    }

    private func checksumComputed(_ id: Int64, attempt: Int, total: Int64, expected: Checksum,
                                  result: Result<Checksum, FileIOError>) {
        // Stale when the task was suspended, canceled or restarted meanwhile, or the daemon is stopping.
        guard !shuttingDown, var t = tasks[id], t.machine.state == .running, t.runtime == nil,
              t.record.attempts == attempt, t.record.phase == .transfer else { return }
        switch result {
        case .failure(let error):
            var err = error.taskError
            err.message = "Cannot read the downloaded data to verify its checksum: \(err.message)"
            logger.warning("checksum verification failed: \(err.message)", metadata: ["task": "\(id)"])
            _ = try? apply(.transferFailed(err, transient: false, retryAfter: nil), to: id)
        case .success(let actual) where actual == expected:
            logger.info("checksum verified", metadata: ["task": "\(id)", "sha256": "\(actual.hex)"])
            t.checksumVerified = true
            tasks[id] = t
            publish(id, total: total)
        case .success(let actual):
            failChecksum(id, TaskError(code: TaskErrorCode.checksumMismatch,
                                       message: "The downloaded file's checksum is \(actual), not the expected \(expected); "
                                           + "the file was not published and its data was discarded"))
        }
    }

    private func failChecksum(_ id: Int64, _ error: TaskError) {
        logger.warning("\(error.message)", metadata: ["task": "\(id)"])
        _ = try? apply(.transferFailed(error, transient: false, retryAfter: nil), to: id)
    }

    /// task.create's checks of the issue-4 controls: checksum (downloads only), bandwidth limit.
    func validateControls(_ p: TaskCreateParams) throws(RPCError) {
        if let checksum = p.checksum {
            guard p.kind == nil || p.kind == .download else {
                throw RPCError.invalidParams("checksum applies to downloads only (this is a \(p.kind!.rawValue) task)")
            }
            if let problem = Checksum.problem(with: checksum) {
                throw RPCError.invalidParams("checksum \(problem)")
            }
        }
        if let limit = p.bandwidthLimit, let problem = ByteRate.problem(with: limit) {
            throw RPCError.invalidParams("bandwidthLimit must be \(problem)")
        }
    }

    /// Stores the controls of `p` (already validated) in a new task's row.
    func applyControls(_ p: TaskCreateParams, to record: inout TaskRecord) {
        record.checksum = p.checksum.flatMap { Checksum(parsing: $0)?.description }
        record.priority = p.priority ?? .normal
        record.bandwidthLimit = p.bandwidthLimit.flatMap { $0 > 0 ? $0 : nil }
    }
}
