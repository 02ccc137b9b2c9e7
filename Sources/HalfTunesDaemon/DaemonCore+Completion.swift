// The end of a download in the core: the runner of `DaemonState`'s completion actions (digest and move off the actor).
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Crash point: the digest is being computed (the task is still `running` in phase `transfer`).
    static let crashWhileVerifying = "checksum.verifying"

    /// Finishes a publish whose intent was journaled before a crash, idempotently (during `recover`).
    func recoverCompletion(_ id: Int64) {
        guard let t = state.tasks[id] else { return }
        let location = t.record.location ?? t.record.destination
        let recovery = FilePublisher.recover(partialPath: t.record.partialPath, destination: location)
        if recovery == .published {
            diskLedger.remove(t.record.partialPath)
            logger.info("completing a download whose publish was interrupted", metadata: ["task": "\(id)"])
        }
        let total = PartialFile.length(path: t.record.partialPath) ?? t.record.bytesDurable
        feedAndRun(.recoveredCompletion(id, recovery, totalBytes: total))
    }

    /// A result from off the actor, for `DaemonState` (which drops stale ones).
    func completionInput(_ id: Int64, attempt: Int, _ input: CompletionMachine.Input) {
        feedAndRun(.completion(id, attempt: attempt, input))
    }

    /// Suspend and cancel wait here while the task's file is being moved into place, then act on the state
    /// the move left (usually `completed`, which they may not change).
    func waitUntilMoved(_ id: Int64) async {
        while state.isMoving(id) {
            logger.debug("waiting for the file to be moved into place", metadata: ["task": "\(id)"])
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                moveWaiters[id, default: []].append(waiter)
            }
        }
    }

    /// The runner's part of `DaemonState`'s completion actions.
    func chooseNameAndGoOn(_ id: Int64, attempt: Int, avoiding: Set<String>) {
        completionInput(id, attempt: attempt, .nameChosen(chooseName(id, avoiding: avoiding)))
    }

    func completionEnded(_ id: Int64, location: String?, error: TaskError?) {
        if let location {
            logger.info("download complete", metadata: ["task": "\(id)", "location": "\(location)"])
        } else if let error {
            logger.warning("\(error.message)", metadata: ["task": "\(id)"])
        }
        for waiter in moveWaiters.removeValue(forKey: id) ?? [] { waiter.resume() }
    }

    /// Crash point: the partial is open for its checksum and about to be read (tests swap it here).
    static let holdWhileVerifying = "checksum.opened"

    /// Opens the complete partial (`OpenPartial`: no symlink followed, the daemon's own file) and reads its
    /// digest through that descriptor, off the actor. The open file is kept for the move when the state goes on
    /// to publish it.
    func computeDigest(_ id: Int64, attempt: Int, path: String) {
        logger.debug("verifying checksum", metadata: ["task": "\(id)"])
        let journal = self.journal
        Task.detached { [weak self] in
            let (result, file) = await BlockingWork.run { () -> (Result<Checksum, TaskError>, OpenPartial?) in
                journal.waitUntilWritten() // the length journaled before verifying survives a crash meanwhile
                CrashPoints.hit(Self.crashWhileVerifying)
                let file: OpenPartial
                do throws(FileIOError) {
                    file = try OpenPartial.open(path)
                } catch {
                    return (.failure(error.taskError), nil)
                }
                CrashPoints.hold(Self.holdWhileVerifying)
                return (Result { () throws(FileIOError) -> Checksum in try file.sha256() }.mapError(\.taskError), file)
            }
            await self?.digestComputed(id, attempt: attempt, result, file: file)
        }
    }

    private func digestComputed(_ id: Int64, attempt: Int, _ result: Result<Checksum, TaskError>, file: OpenPartial?) {
        verifiedPartials[id] = file // taken by the move this input may start at once
        completionInput(id, attempt: attempt, .digestComputed(result))
        verifiedPartials[id] = nil // not taken: the task stopped or failed meanwhile (closes the file)
    }

    /// The name to publish at: the journaled location (or the destination) unless it exists or is in
    /// `avoiding`, else the first free `name (n).ext` that no other unfinished task holds.
    private func chooseName(_ id: Int64, avoiding: Set<String>) -> String {
        guard let t = state.tasks[id] else { return "" }
        let own = t.record.destination
        let location = t.record.location ?? own
        guard !t.record.overwrite else { return location }
        return FilePublisher.publishName(preferred: location, destination: own, avoiding: avoiding,
                                         isReserved: { $0 != own && state.tasks.isReserved($0) })
    }

    /// The origin URL (credentials stripped), a `Referer` header of the task, and (unless the session says
    /// otherwise) the response's `Last-Modified` as the mtime, for the published file.
    func publishMetadata(_ id: Int64) -> PublishMetadata {
        guard let t = state.tasks[id], t.record.kind == TaskKind.download.rawValue else { return PublishMetadata() }
        let preserve = state.sessions[t.record.session]?.record.configuration.preserveModificationTime ?? true
        return PublishMetadata.of(url: t.record.url, headers: t.record.headers, lastModified: t.record.lastModified,
                                  preserveModificationTime: preserve)
    }

    /// Syncs the journal (the recorded intent), then moves the complete partial file into place, off the actor
    /// and off the cooperative pool (`BlockingWork`: fsyncs of the file and both directories).
    ///
    /// Every step goes through one descriptor of the partial (`OpenPartial`: the one its checksum was read from,
    /// else opened here without following a symlink): the metadata (`fsetxattr`, `futimens`), the fsync and the
    /// link of that very inode, after checking that the path still names it. A partial swapped for a symlink, a
    /// hard link or another file fails the task, and nothing else is touched.
    func move(_ id: Int64, attempt: Int, partial: String, to location: String, replacing: Bool, partialIsDurable durable: Bool) {
        let journal = self.journal
        let metadata = publishMetadata(id)
        let logger = self.logger
        let verified = verifiedPartials.removeValue(forKey: id)
        Task.detached { [weak self] in
            let (outcome, opened) = await BlockingWork.run { () -> (CompletionMachine.MoveOutcome, OpenPartial?) in
                // The intent is on disk before the file moves (recovery finishes the move); waited for here,
                // not on the actor.
                journal.sync()
                CrashPoints.hit(CrashPoints.publishAfterIntent)
                let file: OpenPartial
                if let verified {
                    file = verified
                } else {
                    do throws(FileIOError) {
                        file = try OpenPartial.open(partial)
                    } catch {
                        return (.failed(error.description), nil)
                    }
                }
                CrashPoints.hold(CrashPoints.publishMoving)
                // Where it came from, set on the complete file before it appears (the publish's fsyncs cover it).
                let problems = metadata.apply(to: file)
                if !problems.isEmpty {
                    logger.warning("could not record where the file came from", metadata: [
                        "task": "\(id)", "problems": "\(problems.joined(separator: "; "))"])
                }
                do {
                    try FilePublisher.publish(file, destination: location, replacing: replacing,
                                              partialIsDurable: durable)
                    CrashPoints.hit(CrashPoints.publishAfterMove)
                    return (.published, file)
                } catch PublishError.destinationExists {
                    return (.destinationExists, file)
                } catch {
                    return (.failed("\(error)"), file)
                }
            }
            await self?.moveEnded(id, attempt: attempt, outcome, file: opened)
        }
    }

    /// A name taken meanwhile sends the file to another name: the same open file goes there (the move that
    /// follows takes it), never the path opened again.
    private func moveEnded(_ id: Int64, attempt: Int, _ outcome: CompletionMachine.MoveOutcome, file: OpenPartial?) {
        if outcome == .destinationExists { verifiedPartials[id] = file }
        if outcome == .published, let partial = state.tasks[id]?.record.partialPath { diskLedger.remove(partial) }
        completionInput(id, attempt: attempt, .moveEnded(outcome))
        verifiedPartials[id] = nil
    }
}
