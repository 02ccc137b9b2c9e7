// Transfers in the core: attempts of every task kind, upload and data tasks' checks, each user's disk share, and a
// download's end (its digest and its move into place, off the actor).
import AsyncHTTPClient
import Foundation
import HalfTunesCore
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Starts one attempt of a task (the state counted it and set its progress): a download resumes from its
    /// durable offset; an upload or data task starts from byte 0, whatever happened before.
    func startTransfer(_ id: Int64) {
        guard let t = state.tasks[id], let plan = state.transferPlan(id) else {
            // Not reached: the state starts only tasks it holds, of sessions it holds. Were it reached, the attempt
            // the state counted (its slot) ends at once rather than being held for ever.
            logger.error("an attempt was to start for a task or session the state does not hold", metadata: ["task": "\(id)"])
            feedAndRun(.attemptEnded(id, .stopped(durable: state.tasks[id]?.record.durableRanges ?? ByteRanges()), jitterSample: 0))
            return
        }
        var request = attemptRequest(plan, owner: t.owner)
        let bandwidth = BandwidthBucket(rate: plan.bandwidthLimit) // fresh: a resumed transfer never bursts
        request.rateLimiter = RateLimiter(buckets: [services.globalBandwidth, bandwidth])
        let runtime = TaskRuntime(taskID: id, connections: hostConnections, host: t.hostKey)
        var taskLogger = logger
        taskLogger[metadataKey: "task"] = "\(id)"
        let leases = LeaseReports(clients: clients.leases(uid: t.owner, now: clock), runtime: runtime)
        let attempt = Attempt(request: request, clients: leases, observer: runtime,
                              logger: taskLogger)
        let reports = Task { [weak self] in
            for await message in runtime.messages {
                guard let self else { return }
                await self.handle(message, from: runtime)
            }
        }
        attempts[id] = LiveAttempt(runtime: runtime, bandwidth: bandwidth, reports: reports)
        crashRecord?.running(id) // until its attempt ends without a completion, or its completion ends
        CrashPoints.trapIfArmed(url: plan.url)
        runtime.start(attempt)
        logger.debug("transfer started", metadata: [
            "task": "\(id)", "kind": "\(plan.kind.rawValue)", "method": "\(plan.method)",
            "durable": "\(plan.download?.durable ?? ByteRanges())", "maxConnections": "\(plan.download?.maxConnections ?? 1)",
            "proxy": "\(request.proxy.map(String.init(describing:)) ?? "none")",
        ])
    }

    /// The engine's request for `plan` (the state's), with what only the runner has: the owner's disk account, and
    /// the netrc file's credentials when the plan says so. The bandwidth buckets are added by the caller.
    private func attemptRequest(_ plan: TransferPlan, owner: UInt32) -> AttemptRequest {
        let headers = plan.headers.map { (name: $0.name, value: $0.value) }
        var request: AttemptRequest
        if let d = plan.download {
            request = .download(taskID: plan.taskID, url: plan.url, headers: headers, partialPath: d.partialPath,
                                durable: d.durable, validators: d.validators, expectedLength: d.expectedLength,
                                requestTimeout: plan.requestTimeout, checkpointInterval: d.writing.checkpointInterval,
                                maxConnections: d.maxConnections, freeSpaceFloor: d.writing.freeSpaceFloor,
                                diskAccount: diskLedger.account(uid: owner, path: d.partialPath))
        } else {
            request = AttemptRequest(taskID: plan.taskID, url: plan.url, method: plan.method, headers: headers,
                                     body: plan.body, sink: .memory(plan.responseLimit ?? .upload),
                                     requestTimeout: plan.requestTimeout)
        }
        request.allowInsecureRedirects = plan.allowInsecureRedirects
        request.proxyRules = plan.proxyRules
        request.credentials = plan.credentials
        if plan.netrc, let entry = services.netrc?.credentials(for: plan.url, now: clock()) {
            request.credentials.append(OriginCredentials(origin: HTTPAuthentication.origin(plan.url), user: entry.user,
                                                         password: entry.password))
        }
        return request
    }

    /// What the attempt reports goes to the state as its progress; its end, as `attemptEnded`.
    func handle(_ message: TaskRuntime.Message, from runtime: TaskRuntime) {
        let id = runtime.taskID
        guard attempts[id]?.runtime === runtime else { return }
        switch message {
        case .progress(let progress):
            switch progress {
            case .started(let start):
                if start.discardedBytes > 0 || start.reason != nil {
                    logger.notice("restarting from zero", metadata: ["task": "\(id)", "reason": "\(start.reason ?? "")"])
                }
            case .received(let delta, _, _):
                meters.received.add(delta, at: clock())
            case .sent(let delta, _, _):
                meters.sent.add(delta, at: clock())
            case .bodyOpened, .checkpointed, .proxyLeased:
                break
            }
            feedAndRun(.attemptProgress(id, progress))
        case .finished(let outcome):
            attempts[id] = nil // its clients' leases ended with it
            attemptEnded(id, outcome)
        }
    }

    /// `chooseResponseName`: the name the first response gave, made a free path in the same directory (the file
    /// system is looked at here, off the state), fed back as `responseNamed`. Always a free name: the server chose
    /// it, so it never replaces a file (`overwrite` needs an explicit destination, which is never renamed).
    /// When the bounded search finds none free, the name reserved at create (`reserved`) stays.
    func chooseResponseName(_ id: Int64, candidate: String, suggested: String, reserved: String) {
        // The name reserved at create is kept when it is one of the candidate's free names (`f (3)` for `f`).
        let free = FilePublisher.availableName(for: candidate, isReserved: { self.state.isReserved($0, byAnotherThan: id) },
                                               preferring: reserved)
        if free == nil {
            logger.warning("no free name near the one the response gives; the task keeps its name",
                           metadata: ["task": "\(id)", "candidate": "\(candidate)", "destination": "\(reserved)"])
        }
        let destination = free ?? reserved
        logger.info("the response names the file", metadata: ["task": "\(id)", "destination": "\(destination)"])
        feedAndRun(.responseNamed(id, destination: destination, suggestedFilename: suggested))
    }

    /// The attempt ended: `DaemonState` decides what that means for the task (`AttemptVerdict`) and frees
    /// its slot; the actions are carried out here.
    func attemptEnded(_ id: Int64, _ outcome: AttemptOutcome) {
        // Fed even for a task the state no longer holds (nothing lets one go while its attempt is in flight
        // today): what the attempt held, its proxies, is given back whatever happened to the task.
        if let t = state.tasks[id], !state.shuttingDown, t.machine.state == .running {
            switch outcome {
            case .responded(let response):
                logger.info("\(t.record.kind) task complete", metadata: ["task": "\(id)", "status": "\(response.status)",
                                                                         "bodyBytes": "\(response.bodyBytes)"])
            case .failed(let failure, _):
                logger.info("\(t.record.kind) attempt failed: \(failure.error.message)",
                            metadata: ["task": "\(id)", "transient": "\(failure.isTransient)"])
            case .completed, .stopped:
                break
            }
        }
        let input = DaemonState.Input.attemptEnded(id, outcome, jitterSample: Double.random(in: 0..<1))
        feedAndRun(input)
        if state.completions[id] == nil { crashRecord?.stopped(id) } // else it runs on until `completionEnded`
    }
}

// MARK: - Upload and data tasks in the core: task.create's checks and the task they create (their attempts: above).

/// What task.create accepted for an upload or data task.
struct ExchangeFields: Sendable, Equatable {
    var kind: TaskKind
    var method: String
    /// Uploads: the source file (absolute path) and its length at creation.
    var file: String?
    var fileBytes: Int64?
    /// Uploads: the file that was checked and opened, which every attempt must open again.
    var fileID: FileID?
    /// Data tasks: the response body cap.
    var maxResponseBytes: Int64?
}

extension DaemonCore {
    /// task.create's checks for upload and data tasks (nil for a download, after refusing upload/data-only
    /// fields on it).
    func validateExchange(_ p: TaskCreateParams, caller: Caller) throws(RPCError) -> ExchangeFields? {
        let kind = p.kind ?? .download
        guard kind != .download else {
            if p.method != nil || p.file != nil || p.maxResponseBytes != nil {
                let field = p.method != nil ? "method" : p.file != nil ? "file" : "maxResponseBytes"
                throw RPCError.invalidParams("\(field) applies to upload and data tasks only; give kind \"upload\" or \"data\"")
            }
            return nil
        }
        if p.resumeData != nil {
            throw RPCError.invalidParams("resumeData applies to downloads only (this is a \(kind.rawValue) task)")
        }
        if p.overwrite != nil {
            throw RPCError.invalidParams("overwrite applies to downloads only (this is a \(kind.rawValue) task)")
        }
        if p.destination != nil {
            throw RPCError.invalidParams(kind == .upload
                ? "destination applies to downloads only; an upload sends `file` to `url`"
                : "destination applies to downloads only; a data task's body comes back in its didComplete event")
        }
        let method: String
        switch ExchangeRules.method(p.method, kind: kind) {
        case .success(let m): method = m
        case .failure(let refusal): throw RPCError.invalidParams(refusal.message)
        }
        var fields = ExchangeFields(kind: kind, method: method)
        switch kind {
        case .upload:
            if p.maxResponseBytes != nil {
                throw RPCError.invalidParams("maxResponseBytes applies to data tasks only; an upload's completion carries the first \(ResponseLimit.upload.maxBytes) bytes of the response body")
            }
            guard let file = p.file else {
                throw RPCError.invalidParams("file is required for an upload: the absolute path of the file to send")
            }
            // Never send a file the client itself could not read (the daemon may have more rights): the
            // file judged is the file opened (a path swapped in between is refused), and every attempt
            // must open that same file again.
            var checked: FileID?
            switch caller.readCheck(file) {
            case .refused(let problem): throw RPCError.invalidParams("file: \(problem); uploads send only files you can read")
            case .allowed(let id): checked = id
            }
            do {
                let source = try UploadSource.open(path: file, expected: checked)
                defer { source.close() }
                fields.fileBytes = source.size
                fields.fileID = source.fileID
            } catch {
                throw RPCError.invalidParams(error.message)
            }
            fields.file = file
        case .data:
            if p.file != nil {
                throw RPCError.invalidParams("file applies to uploads only; a data task sends no body")
            }
            if let cap = p.maxResponseBytes, !(1...ResponseLimit.dataDefaultBytes).contains(cap) {
                throw RPCError.invalidParams("maxResponseBytes must be from 1 to \(ResponseLimit.dataDefaultBytes) (16 MiB), got \(cap)")
            }
            fields.maxResponseBytes = p.maxResponseBytes ?? ResponseLimit.dataDefaultBytes
        case .download:
            break
        }
        return fields
    }

    /// The row of a new upload or data task (the URL was checked by `prepareCreate`).
    func exchangeTask(_ p: TaskCreateParams, _ fields: ExchangeFields, url: String) -> TaskRecord {
        let now = clock()
        var record = TaskRecord(
            session: p.session, kind: fields.kind.rawValue, url: url, state: .suspended, destination: "",
            partialPath: "", headers: p.headers ?? [:], description: p.description, createdAt: now, updatedAt: now,
            method: fields.method, file: fields.file, maxResponseBytes: fields.maxResponseBytes)
        record.fileID = fields.fileID?.description
        applyControls(p, to: &record)
        return record
    }
}

extension EventPayload {
    /// A `didComplete` given the task's response (other payloads unchanged).
    func carrying(_ response: TaskResponse?) -> EventPayload {
        guard let response, case .didComplete(let error, nil) = self else { return self }
        return .didComplete(error: error, response: response)
    }
}

extension TaskInfo {
    /// The task without its response body (task.list: bodies of data tasks can be megabytes each).
    var withoutResponseBody: TaskInfo {
        guard response?.body != nil else { return self }
        var copy = self
        copy.response?.body = nil
        return copy
    }
}

// MARK: - Each user's share of the disk (`max-disk-per-uid`): the ledger's charges kept by the runner as partials come and go.

extension DaemonCore {
    /// The ledger of `configuration.maxDiskPerUID`: a percentage is of the downloads directory's file system
    /// (the nearest existing directory on its way), as it is at start; the `exempt` uids (the state's) are not
    /// limited.
    static func diskLedger(for configuration: DaemonConfiguration, exempt: Set<UInt32>) -> DiskLedger {
        var fs = statvfs()
        var path = configuration.downloadsDirectory
        while statvfs(path, &fs) != 0, path != "/" {
            path = (path as NSString).deletingLastPathComponent
            if path.isEmpty { path = "/" }
        }
        let size = fileSystemSize(fs).total
        var limit = configuration.maxDiskPerUID.bytes(ofFileSystemSize: size)
        if case .percent = configuration.maxDiskPerUID, size <= 0 { limit = nil } // a size nobody could read: no share
        return DiskLedger(limit: limit, exempt: exempt)
    }

    /// Removes a partial file the daemon made (`PartialFile.remove`) and its charge.
    func discardPartial(_ path: String) {
        PartialFile.remove(path: path)
        diskLedger.remove(path)
    }

    /// A new download's owner's share of the disk, for `admitting` (nil: no limit for the owner).
    func diskShare(owner: UInt32) -> DaemonState.DiskShare? {
        diskLedger.limit(for: owner).map { DaemonState.DiskShare(held: diskLedger.charged(owner), limit: $0) }
    }

    /// At start, after the tasks (whose partials `recover` charges as it reads them): what each kept resume-data
    /// partial holds.
    func chargeResumeDataPartials() async throws {
        guard diskLedger.limitsAnyone else { return }
        for token in try await journal.reading({ try $0.resumeTokens(createdBefore: .infinity) }) {
            guard let uid = state.sessions[token.session]?.record.uid, diskLedger.limit(for: uid) != nil else { continue }
            let held = token.ranges.clipped(to: PartialFile.length(path: token.partialPath) ?? 0).count
            diskLedger.set(token.partialPath, uid: uid, bytes: held)
        }
    }
}

// MARK: - The end of a download in the core: the runner of `DaemonState`'s completion actions (digest and move off the actor).

extension DaemonCore {
    /// Crash point: the digest is being computed (the task is still `running` in phase `transfer`).
    static let crashWhileVerifying = "checksum.verifying"

    /// `recoverPublish`: what the file system shows of a publish whose intent was journaled before a crash
    /// (during `recover`); the state finishes it, idempotently.
    func recoverPublish(_ id: Int64, partial: String, location: String) {
        let recovery = FilePublisher.recover(partialPath: partial, destination: location)
        if recovery == .published {
            diskLedger.remove(partial)
            logger.info("completing a download whose publish was interrupted", metadata: ["task": "\(id)"])
        }
        feedAndRun(.recoveredCompletion(id, recovery, totalBytes: PartialFile.length(path: partial)))
    }

    /// A result from off the actor, for `DaemonState` (which drops stale ones).
    func completionInput(_ id: Int64, attempt: Int, _ input: CompletionMachine.Input) {
        feedAndRun(.completion(id, attempt: attempt, input))
    }

    /// Returns once the move into place under way for the task has ended (`completionEnded`): what a
    /// `heldWhileMoving` input waits for before it is fed again, and shutdown for each move under way.
    func moveEnded(_ id: Int64) async {
        guard state.isMoving(id) else { return }
        logger.debug("waiting for the file to be moved into place", metadata: ["task": "\(id)"])
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            transfers.moveWaiters[id, default: []].append(waiter)
        }
    }

    /// The runner's part of `DaemonState`'s completion actions.
    /// `chooseName`: the state's preferred name unless it exists or is to be avoided, else a free `name (n).ext` of
    /// the destination that no other task holds (`FilePublisher.publishName`: it looks at the file system).
    func chooseNameAndGoOn(_ id: Int64, attempt: Int, preferred: String, destination: String, avoiding: Set<String>) {
        let name = FilePublisher.publishName(preferred: preferred, destination: destination, avoiding: avoiding,
                                             isReserved: { state.isReserved($0, byAnotherThan: id) })
        completionInput(id, attempt: attempt, name.map { .nameChosen($0) } ?? .noFreeName(near: destination))
    }

    func completionEnded(_ id: Int64, location: String?, error: TaskError?) {
        crashRecord?.stopped(id)
        if let location {
            logger.info("download complete", metadata: ["task": "\(id)", "location": "\(location)"])
        } else if let error {
            logger.warning("\(error.message)", metadata: ["task": "\(id)"])
        }
        for waiter in transfers.moveWaiters.removeValue(forKey: id) ?? [] { waiter.resume() }
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
        transfers.verifiedPartials[id] = file // taken by the move this input may start at once
        completionInput(id, attempt: attempt, .digestComputed(result))
        transfers.verifiedPartials[id] = nil // not taken: the task stopped or failed meanwhile (closes the file)
    }


    /// Syncs the journal (the recorded intent), then moves the complete partial file into place, off the actor
    /// and off the cooperative pool (`BlockingWork`: fsyncs of the file and both directories).
    ///
    /// Every step goes through one descriptor of the partial (`OpenPartial`: the one its checksum was read from,
    /// else opened here without following a symlink): the metadata (`fsetxattr`, `futimens`), the fsync and the
    /// link of that very inode, after checking that the path still names it. A partial swapped for a symlink, a
    /// hard link or another file fails the task, and nothing else is touched.
    func move(_ id: Int64, attempt: Int, partial: String, to location: String, replacing: Bool, partialIsDurable durable: Bool,
              metadata: PublishMetadata) {
        let journal = self.journal
        let logger = self.logger
        let verified = transfers.verifiedPartials.removeValue(forKey: id)
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
        if outcome == .destinationExists { transfers.verifiedPartials[id] = file }
        if outcome == .published, let partial = state.tasks[id]?.record.partialPath { diskLedger.remove(partial) }
        completionInput(id, attempt: attempt, .moveEnded(outcome))
        transfers.verifiedPartials[id] = nil
    }
}
