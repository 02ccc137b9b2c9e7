import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    func startTransfer(_ id: Int64) {
        if let kind = tasks[id]?.record.kind, kind != TaskKind.download.rawValue { return startExchange(id) }
        guard var t = tasks[id], let s = sessions[t.record.session] else { return }
        let config = s.record.configuration
        let headers = (config.headers ?? [:]).merging(t.record.headers) { _, task in task }
            .sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        let validators = (t.record.etag != nil || t.record.lastModified != nil)
            ? Validators(etag: t.record.etag, lastModified: t.record.lastModified) : nil
        var request = TransferRequest(
            taskID: id, url: t.record.url, headers: headers, partialPath: t.record.partialPath,
            durableOffset: t.record.bytesDurable, validators: validators, expectedLength: t.record.bytesExpected,
            requestTimeout: config.requestTimeout ?? SessionConfiguration.defaultRequestTimeout,
            checkpointInterval: configuration.checkpointInterval)
        request.rateLimiter = makeRateLimiter(for: &t)
        request.allowInsecureRedirects = config.allowInsecureRedirects ?? false
        let runtime = TaskRuntime(taskID: id, journal: journal, durableBytes: t.record.bytesDurable)
        var taskLogger = logger
        taskLogger[metadataKey: "task"] = "\(id)"
        let transfer = Transfer(request: request, client: httpClient, observer: runtime, logger: taskLogger)
        t.runtime = runtime
        t.record.attempts += 1
        t.bytesReceived = t.record.bytesDurable
        tasks[id] = t
        runtime.start(transfer)
        Task { [weak self] in
            for await message in runtime.messages {
                guard let self else { return }
                await self.handle(message, from: runtime)
            }
        }
        logger.debug("transfer started", metadata: ["task": "\(id)", "offset": "\(t.record.bytesDurable)"])
    }

    func handle(_ message: TaskRuntime.Message, from runtime: TaskRuntime) {
        let id = runtime.taskID
        guard var t = tasks[id], t.runtime === runtime else { return }
        switch message {
        case .started(let start):
            t.bytesReceived = start.offset
            t.record.etag = start.validators.etag
            t.record.lastModified = start.validators.lastModified
            t.record.bytesExpected = start.expectedTotal
            t.record.currentURL = start.finalURL
            tasks[id] = t
            var payloads: [EventPayload] = []
            if start.discardedBytes > 0 || start.reason != nil {
                payloads.append(.didResumeAtOffset(offset: 0, expectedTotalBytes: start.expectedTotal,
                                                   discardedBytes: start.discardedBytes, reason: start.reason))
                logger.notice("restarting from zero", metadata: ["task": "\(id)", "reason": "\(start.reason ?? "")"])
            } else if start.offset > 0 {
                payloads.append(.didResumeAtOffset(offset: start.offset, expectedTotalBytes: start.expectedTotal,
                                                   discardedBytes: nil, reason: nil))
            }
            commitRunning(id, payloads)

        case let .progress(delta, total, expected):
            t.bytesReceived = total
            if delta > 0, t.machine.consecutiveFailures > 0 { _ = try? t.machine.handle(.madeProgress, now: clock()) }
            tasks[id] = t
            rateMeter.add(delta, at: clock())
            guard t.machine.state == .running, delta > 0 else { return }
            broadcast([Event(seq: nil, session: t.record.session, task: id, time: Timestamp.format(clock()),
                             payload: .didWriteData(bytesWritten: delta, totalBytesWritten: total,
                                                    totalBytesExpectedToWrite: expected ?? t.record.bytesExpected))])

        case .finished(let outcome):
            transferEnded(id, outcome)

        case .exchange(let message):
            handleExchange(message, from: runtime)
        }
    }

    /// Writes a running task's row with the durable length held still, so a concurrent checkpoint is
    /// never overwritten by an older value.
    private func commitRunning(_ id: Int64, _ payloads: [EventPayload]) {
        guard var t = tasks[id], let runtime = t.runtime else { return commit(id, payloads) }
        runtime.withDurableBytes { durable in
            t.record.bytesDurable = durable
            tasks[id] = t
            commit(id, payloads)
        }
    }

    private func transferEnded(_ id: Int64, _ outcome: TransferOutcome) {
        guard var t = tasks[id] else { return }
        t.runtime = nil
        switch outcome {
        case .stopped(let durable): t.record.bytesDurable = durable
        case .failed(let failure): t.record.bytesDurable = failure.durableBytes
        case .completed(let total, _): t.record.bytesDurable = total
        }
        if t.discardPartialWhenStopped {
            PartialFile.remove(path: t.record.partialPath)
            t.record.bytesDurable = 0
            t.discardPartialWhenStopped = false
        }
        tasks[id] = t
        defer {
            finishInvalidationIfDone(t.record.session)
            pump()
        }
        if shuttingDown || t.machine.state != .running {
            // Stopped on purpose (suspend, cancel, shutdown): keep the state; just record the length.
            _ = try? journal.updateTask(t.record, events: [])
            evictIfFinished(id)
            return
        }
        switch outcome {
        case .completed(let total, _):
            beginCompletion(id, total: total)
        case .failed(let failure):
            logger.info("transfer failed: \(failure.error.message)",
                        metadata: ["task": "\(id)", "transient": "\(failure.isTransient)"])
            _ = try? apply(.transferFailed(failure.error, transient: failure.isTransient, retryAfter: failure.retryAfter,
                                           jitterSample: Double.random(in: 0..<1)), to: id)
        case .stopped:
            // Stopped without being asked (should not happen): retry soon rather than lose the task.
            _ = try? apply(.transferFailed(TaskError(code: TaskErrorCode.connectionLost, message: "The transfer stopped unexpectedly"),
                                       transient: true, retryAfter: nil), to: id)
        }
    }
}
