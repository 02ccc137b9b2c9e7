// The end of a download as inputs of the core's state: verify, choose a name, record the intent, move, complete.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

/// A download between "every byte is durable" and completed/failed (`DaemonState.completions`).
struct Completion: Equatable {
    var machine: CompletionMachine
    /// The task's attempt number when it began: a result from an earlier attempt is stale.
    let attempt: Int
    /// Every byte of the partial was fsynced by the transfer that just completed (not so after a restart).
    var partialIsDurable = false
}

extension DaemonState {
    /// Whether the task's file is being moved into place: it takes no lifecycle input until the move's outcome
    /// (a client's suspend and cancel are held until it ends, `heldWhileMoving`; a session invalidation or a resource
    /// deadline lets it finish), so the journal always says whether the file moved.
    func isMoving(_ id: Int64) -> Bool { completions[id]?.machine.isMoving == true }

    /// The transfer delivered every byte: verify, choose a name, record the intent, move.
    mutating func beginCompletion(_ id: Int64, total: Int64, now: Double, into actions: inout [Action]) {
        guard var t = tasks[id] else { return }
        t.completing = true // its slot is free for the next transfer
        t.bytesReceived = total
        t.record.bytesDurable = total
        if t.record.bytesExpected == nil { t.record.bytesExpected = total }
        let (machine, steps) = CompletionMachine.transferCompleted(total: total, checksum: t.record.checksum)
        // Verifying takes a while: journal the length first, so a crash meanwhile does not fetch it again.
        // (Without a checksum the intent, journaled at once, records it.)
        let row: TaskRecord? = steps.contains(.computeDigest) ? t.record.written() : nil
        tasks[id] = t
        if let row { actions.append(.journal(row, [])) }
        completions[id] = Completion(machine: machine, attempt: t.record.attempts, partialIsDurable: true)
        carryOut(steps, for: id, now: now, into: &actions)
    }

    /// A publish whose intent was journaled before a crash: `recovery` is what the file system shows now.
    mutating func recoveredCompletion(_ id: Int64, _ recovery: PublishRecovery, total: Int64, now: Double,
                                      into actions: inout [Action]) {
        guard let t = tasks[id] else { return }
        tasks[id]?.completing = true
        let location = t.record.location ?? t.record.destination
        let (machine, steps) = CompletionMachine.recovered(recovery, location: location, total: total)
        completions[id] = Completion(machine: machine, attempt: t.record.attempts)
        carryOut(steps, for: id, now: now, into: &actions)
    }

    /// A result from off the core. Stale ones (the task was suspended, canceled or restarted meanwhile) are
    /// dropped; so is a digest once the daemon is stopping (the task resumes and is verified on the next start).
    /// A move's outcome is always taken: the file has moved or not, and the journal must say which.
    mutating func completionInput(_ id: Int64, attempt: Int, _ input: CompletionMachine.Input, now: Double,
                                  into actions: inout [Action]) {
        guard var c = completions[id], c.attempt == attempt, tasks[id]?.machine.state == .running else { return }
        if shuttingDown, case .digestComputed = input { return }
        let steps = c.machine.handle(input)
        completions[id] = c
        carryOut(steps, for: id, now: now, into: &actions)
    }

    /// A task that stopped running (suspend, cancel) leaves its completion; a move in flight is never left.
    mutating func leaveCompletionIfStopped(_ id: Int64) {
        guard let c = completions[id], !c.machine.isMoving, tasks[id]?.machine.state != .running else { return }
        completions[id] = nil
        tasks[id]?.completing = false
    }

    /// What a running task is doing once its transfer ended (nil while it transfers, and in any other state).
    func completionPhase(_ id: Int64) -> TaskCompletionPhase? {
        guard let c = completions[id] else { return nil }
        return c.machine.state == .verifying ? .verifying : .publishing
    }

    private mutating func carryOut(_ steps: [CompletionMachine.Action], for id: Int64, now: Double,
                                   into actions: inout [Action]) {
        guard let c = completions[id], let t = tasks[id] else { return }
        for step in steps {
            switch step {
            case .computeDigest:
                actions.append(.computeDigest(id, attempt: c.attempt, path: t.record.partialPath))
            case .chooseName(let avoiding):
                guard t.record.overwrite else {
                    actions.append(.chooseName(id, attempt: c.attempt, preferred: t.record.location ?? t.record.destination,
                                               destination: t.record.destination, avoiding: avoiding))
                    break
                }
                // `overwrite`: the client's own destination, replaced in one step; never another name.
                completionInput(id, attempt: c.attempt, .nameChosen(t.record.location ?? t.record.destination),
                                now: now, into: &actions)
            case .recordIntent(let location):
                guard var intent = tasks[id] else { return }
                intent.record.phase = .publishing
                intent.record.location = location
                let row = intent.record.written()
                tasks[id] = intent
                actions.append(.journal(row, [])) // synced by the move first
            case .move(let location):
                actions.append(.move(id, attempt: c.attempt, partial: t.record.partialPath, location: location,
                                     replacing: t.record.overwrite, partialIsDurable: c.partialIsDurable,
                                     metadata: publishMetadata(of: t)))
            case .complete(let location):
                completions[id] = nil
                tasks[id]?.completing = false
                _ = try? apply(.completed, to: id, extra: [.didFinishDownloading(location: location)], update: {
                    $0.phase = .transfer
                    $0.location = location
                }, now: now, into: &actions)
                actions.append(.completionEnded(id, location: location, error: nil))
            case .fail(let error):
                completions[id] = nil
                tasks[id]?.completing = false
                _ = try? apply(.transferFailed(error, transient: false, retryAfter: nil), to: id, update: {
                    $0.phase = .transfer
                    $0.location = nil
                }, now: now, into: &actions)
                actions.append(.completionEnded(id, location: nil, error: error))
            }
        }
    }

    /// What a published download's file is given: its origin URL (credentials stripped), the task's `Referer`
    /// header, and, unless its session says otherwise (`preserveModificationTime`), the response's `Last-Modified`
    /// as its modification time.
    func publishMetadata(of t: ManagedTask) -> PublishMetadata {
        guard t.record.kind == TaskKind.download.rawValue else { return PublishMetadata() }
        let preserve = sessions[t.record.session]?.record.configuration.preserveModificationTime ?? true
        return PublishMetadata.of(url: t.record.url, headers: t.record.headers, lastModified: t.record.lastModified,
                                  preserveModificationTime: preserve)
    }

    /// Whether another task than `id` holds the path (its destination or location): a name chosen for `id` avoids
    /// it (`chooseName`).
    func isReserved(_ path: String, byAnotherThan id: Int64) -> Bool {
        path != tasks[id]?.record.destination && tasks.isReserved(path)
    }
}
