// The end of a download in the core: carries out `CompletionMachine`'s actions (digest and move off the actor).
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

/// A download between "every byte is durable" and completed/failed (`DaemonCore.completions`).
struct Completion {
    var machine: CompletionMachine
    /// The task's attempt number when it began: a result from an earlier attempt is stale.
    let attempt: Int
    /// Every byte of the partial was fsynced by the transfer that just completed (not so after a restart).
    var partialIsDurable = false
    /// Suspend/cancel requests waiting for a move in flight to end.
    var waiters: [CheckedContinuation<Void, Never>] = []
}

extension DaemonCore {
    /// Crash point: the digest is being computed (the task is still `running` in phase `transfer`).
    static let crashWhileVerifying = "checksum.verifying"

    /// The transfer delivered every byte: verify, choose a name, record the intent, move.
    func beginCompletion(_ id: Int64, total: Int64) {
        guard var t = tasks[id] else { return }
        t.bytesReceived = total
        t.record.bytesDurable = total
        if t.record.bytesExpected == nil { t.record.bytesExpected = total }
        tasks[id] = t
        let (machine, actions) = CompletionMachine.transferCompleted(total: total, checksum: t.record.checksum)
        if actions.contains(.computeDigest) {
            // Verifying takes a while: journal the length first, so a crash meanwhile does not fetch it again.
            // (Without a checksum the intent, journaled at once below, records it.)
            _ = try? journal.updateTask(t.record, events: [])
        }
        completions[id] = Completion(machine: machine, attempt: t.record.attempts, partialIsDurable: true)
        carryOut(actions, for: id)
    }

    /// Finishes a publish whose intent was journaled before a crash, idempotently (during `recover`).
    func recoverCompletion(_ id: Int64) {
        guard let t = tasks[id] else { return }
        let location = t.record.location ?? t.record.destination
        let recovery = FilePublisher.recover(partialPath: t.record.partialPath, destination: location)
        if recovery == .published {
            logger.info("completing a download whose publish was interrupted", metadata: ["task": "\(id)"])
        }
        let total = PartialFile.length(path: t.record.partialPath) ?? t.record.bytesDurable
        let (machine, actions) = CompletionMachine.recovered(recovery, location: location, total: total)
        completions[id] = Completion(machine: machine, attempt: t.record.attempts)
        carryOut(actions, for: id)
    }

    /// A result from off the actor. Stale ones (the task was suspended, canceled or restarted meanwhile) are
    /// dropped; so is a digest once the daemon is stopping (the task resumes and is verified on the next start).
    /// A move's outcome is always taken: the file has moved or not, and the journal must say which.
    func completionInput(_ id: Int64, attempt: Int, _ input: CompletionMachine.Input) {
        guard var c = completions[id], c.attempt == attempt, tasks[id]?.machine.state == .running else { return }
        if shuttingDown, case .digestComputed = input { return }
        let actions = c.machine.handle(input)
        completions[id] = c
        if !c.machine.isMoving { state.moving.remove(id) }
        carryOut(actions, for: id)
    }

    /// Suspend and cancel wait here while the task's file is being moved into place, then act on the state
    /// the move left (usually `completed`, which they may not change).
    func waitUntilMoved(_ id: Int64) async {
        while let c = completions[id], c.machine.isMoving {
            logger.debug("waiting for the file to be moved into place", metadata: ["task": "\(id)"])
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                completions[id]?.waiters.append(waiter)
            }
        }
    }

    /// A task that stopped running (suspend, cancel) leaves its completion; a move in flight is never left.
    func leaveCompletionIfStopped(_ id: Int64) {
        guard let c = completions[id], !c.machine.isMoving, tasks[id]?.machine.state != .running else { return }
        completions[id] = nil
    }

    private func carryOut(_ actions: [CompletionMachine.Action], for id: Int64) {
        guard let attempt = completions[id]?.attempt else { return }
        for action in actions {
            switch action {
            case .computeDigest:
                computeDigest(id, attempt: attempt)
            case .chooseName(let avoiding):
                completionInput(id, attempt: attempt, .nameChosen(chooseName(id, avoiding: avoiding)))
            case .recordIntent(let location):
                guard var t = tasks[id] else { return }
                t.record.phase = .publishing
                t.record.location = location
                tasks[id] = t
                _ = try? journal.updateTask(t.record, events: []) // synced by `move` before anything moves
            case .move(let location):
                state.moving.insert(id) // no lifecycle input until the move's outcome
                move(id, attempt: attempt, to: location)
            case .complete(let location):
                let waiters = endCompletion(id)
                logger.info("download complete", metadata: ["task": "\(id)", "location": "\(location)"])
                _ = try? apply(.completed, to: id, extra: [.didFinishDownloading(location: location)]) {
                    $0.phase = .transfer
                    $0.location = location
                }
                for waiter in waiters { waiter.resume() }
            case .fail(let error):
                let waiters = endCompletion(id)
                logger.warning("\(error.message)", metadata: ["task": "\(id)"])
                _ = try? apply(.transferFailed(error, transient: false, retryAfter: nil), to: id) {
                    $0.phase = .transfer
                    $0.location = nil
                }
                for waiter in waiters { waiter.resume() }
            }
        }
    }

    private func endCompletion(_ id: Int64) -> [CheckedContinuation<Void, Never>] {
        state.moving.remove(id)
        return completions.removeValue(forKey: id)?.waiters ?? []
    }

    private func computeDigest(_ id: Int64, attempt: Int) {
        guard let path = tasks[id]?.record.partialPath else { return }
        logger.debug("verifying checksum", metadata: ["task": "\(id)"])
        Task.detached { [weak self] in
            let result = await BlockingWork.run {
                CrashPoints.hit(Self.crashWhileVerifying)
                return Result { () throws(FileIOError) -> Checksum in try Checksum.sha256(ofFile: path) }
                    .mapError(\.taskError)
            }
            await self?.completionInput(id, attempt: attempt, .digestComputed(result))
        }
    }

    /// The name to publish at: the journaled location (or the destination) unless it exists or is in
    /// `avoiding`, else the first free `name (n).ext` that no other unfinished task holds.
    private func chooseName(_ id: Int64, avoiding: Set<String>) -> String {
        guard let t = tasks[id] else { return "" }
        let own = t.record.destination
        let location = t.record.location ?? own
        guard !t.record.overwrite else { return location }
        return FilePublisher.publishName(preferred: location, destination: own, avoiding: avoiding,
                                         isReserved: { $0 != own && tasks.isReserved($0) })
    }

    /// Syncs the journal (the recorded intent), then moves the complete partial file into place, off the actor
    /// and off the cooperative pool (`BlockingWork`: fsyncs of the file and both directories).
    private func move(_ id: Int64, attempt: Int, to location: String) {
        guard let t = tasks[id] else { return }
        let (partial, replacing) = (t.record.partialPath, t.record.overwrite)
        let durable = completions[id]?.partialIsDurable ?? false
        let journal = self.journal
        Task.detached { [weak self] in
            let outcome = await BlockingWork.run { () -> CompletionMachine.MoveOutcome in
                // The intent is on disk before the file moves (recovery finishes the move); waited for here,
                // not on the actor.
                journal.sync()
                CrashPoints.hit(CrashPoints.publishAfterIntent)
                CrashPoints.hold(CrashPoints.publishMoving)
                do {
                    try FilePublisher.publish(partialPath: partial, destination: location, replacing: replacing,
                                              partialIsDurable: durable)
                    CrashPoints.hit(CrashPoints.publishAfterMove)
                    return .published
                } catch PublishError.destinationExists {
                    return .destinationExists
                } catch {
                    return .failed("\(error)")
                }
            }
            await self?.completionInput(id, attempt: attempt, .moveEnded(outcome))
        }
    }
}
