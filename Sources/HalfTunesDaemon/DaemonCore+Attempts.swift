// Attempts in the core, for every task kind: start one, take its progress, and act on its outcome.
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Starts one attempt of a task: a download resumes from its durable offset; an upload or data task
    /// starts from byte 0, whatever happened before.
    func startTransfer(_ id: Int64) {
        guard var t = tasks[id], let s = sessions[t.record.session] else { return }
        let config = s.record.configuration
        let headers = (config.headers ?? [:]).merging(t.record.headers) { _, task in task }
            .sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        let requestTimeout = config.requestTimeout ?? SessionConfiguration.defaultRequestTimeout
        let kind = TaskKind(rawValue: t.record.kind) ?? .download
        var request: AttemptRequest
        var durable: Int64 = 0
        switch kind {
        case .download:
            let validators = (t.record.etag != nil || t.record.lastModified != nil)
                ? Validators(etag: t.record.etag, lastModified: t.record.lastModified) : nil
            durable = t.record.bytesDurable
            request = .download(taskID: id, url: t.record.url, headers: headers, partialPath: t.record.partialPath,
                                durableOffset: durable, validators: validators, expectedLength: t.record.bytesExpected,
                                requestTimeout: requestTimeout, checkpointInterval: configuration.checkpointInterval)
        case .upload, .data:
            let method = t.record.method ?? ((try? ExchangeRules.method(nil, kind: kind).get()) ?? "GET")
            let upload = kind == .upload
            request = AttemptRequest(
                taskID: id, url: t.record.url, method: method, headers: headers,
                body: upload ? t.record.file.map {
                    AttemptRequest.UploadBody(path: $0, fileID: t.record.fileID.flatMap(FileID.init(text:)))
                } : nil,
                sink: .memory(upload ? .upload : .data(maxBytes: t.record.maxResponseBytes)),
                requestTimeout: requestTimeout)
            if upload { t.bytesSent = 0 }
        }
        request.rateLimiter = makeRateLimiter(for: &t)
        request.allowInsecureRedirects = config.allowInsecureRedirects ?? false
        let runtime = TaskRuntime(taskID: id, journal: journal, durableBytes: durable)
        var taskLogger = logger
        taskLogger[metadataKey: "task"] = "\(id)"
        let attempt = Attempt(request: request, client: httpClient, observer: runtime, logger: taskLogger)
        t.runtime = runtime
        t.bytesReceived = durable
        tasks[id] = t
        runtime.start(attempt)
        Task { [weak self] in
            for await message in runtime.messages {
                guard let self else { return }
                await self.handle(message, from: runtime)
            }
        }
        logger.debug("transfer started", metadata: [
            "task": "\(id)", "kind": "\(kind.rawValue)", "method": "\(request.method)", "offset": "\(durable)",
        ])
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
            // A fresh start says nothing to journal: the response's validators and length reach the journal
            // with the first checkpoint (`TaskRuntime`), or with the row when the attempt ends.
            if !payloads.isEmpty { commitRunning(id, payloads) }

        case let .received(delta, total, expected):
            t.bytesReceived = total
            rateMeter.add(delta, at: clock())
            guard t.record.kind == TaskKind.download.rawValue else {
                // An upload's or data task's response: counted, reported with its completion.
                if let expected { t.record.bytesExpected = expected }
                tasks[id] = t
                return
            }
            // A download's bytes are kept, so they count as progress against the retry budget.
            if delta > 0, t.machine.consecutiveFailures > 0 { _ = try? t.machine.handle(.madeProgress, now: clock()) }
            tasks[id] = t
            guard t.machine.state == .running, delta > 0 else { return }
            broadcast([Event(seq: nil, session: t.record.session, task: id, time: Timestamp.format(clock()),
                             payload: .didWriteData(bytesWritten: delta, totalBytesWritten: total,
                                                    totalBytesExpectedToWrite: expected ?? t.record.bytesExpected))])

        case .bodyOpened(let bytes):
            t.bytesSent = 0
            t.bytesExpectedToSend = bytes
            tasks[id] = t

        case let .sent(delta, total, expected):
            t.bytesSent = total
            if let expected { t.bytesExpectedToSend = expected }
            tasks[id] = t
            uploadRateMeter.add(delta, at: clock())
            guard t.machine.state == .running, delta > 0 else { return }
            broadcast([Event(seq: nil, session: t.record.session, task: id, time: Timestamp.format(clock()),
                             payload: .didSendBodyData(bytesSent: delta, totalBytesSent: total,
                                                       totalBytesExpectedToSend: expected ?? t.bytesExpectedToSend))])

        case .finished(let outcome):
            attemptEnded(id, outcome)
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

    /// The attempt ended: `DaemonState` decides what that means for the task (`AttemptVerdict`) and frees
    /// its slot; the actions are carried out here.
    private func attemptEnded(_ id: Int64, _ outcome: AttemptOutcome) {
        guard let t = tasks[id] else { return }
        if !shuttingDown, t.machine.state == .running {
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
        let input = DaemonState.Input.attemptEnded(id, outcome, jitterSample: Double.random(in: 0..<1), slotLimits)
        run((try? state.handle(input, now: clock())) ?? [])
    }
}
