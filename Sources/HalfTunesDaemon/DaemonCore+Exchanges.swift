// Upload and data tasks in the core: task.create checks, starting an Exchange, progress, the response.
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

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

    /// Creates an upload or data task (the URL was checked by `createTask`).
    func createExchangeTask(_ p: TaskCreateParams, _ fields: ExchangeFields, url: String,
                            in s: ManagedSession) throws(RPCError) -> TaskInfo {
        let now = clock()
        var record = TaskRecord(
            session: p.session, kind: fields.kind.rawValue, url: url, state: .suspended, destination: "",
            partialPath: "", headers: p.headers ?? [:], description: p.description, createdAt: now, updatedAt: now,
            resourceDeadline: now + (s.record.configuration.resourceTimeout ?? SessionConfiguration.defaultResourceTimeout),
            method: fields.method, file: fields.file, maxResponseBytes: fields.maxResponseBytes)
        record.fileID = fields.fileID?.description
        applyControls(p, to: &record)
        let created = try insertNewTask(record, start: p.start == true)
        guard var t = tasks[created.id], fields.kind == .upload else { return created }
        if t.bytesExpectedToSend == nil { t.bytesExpectedToSend = fields.fileBytes }
        tasks[created.id] = t
        return info(t)
    }

    /// Starts one attempt of an upload or data task (from byte 0, whatever happened before).
    func startExchange(_ id: Int64) {
        guard var t = tasks[id], let s = sessions[t.record.session] else { return }
        let config = s.record.configuration
        let headers = (config.headers ?? [:]).merging(t.record.headers) { _, task in task }
            .sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        let isUpload = t.record.kind == TaskKind.upload.rawValue
        let kind: TaskKind = isUpload ? .upload : .data
        let method = t.record.method ?? ((try? ExchangeRules.method(nil, kind: kind).get()) ?? "GET")
        var request = ExchangeRequest(
            taskID: id, url: t.record.url, method: method, headers: headers,
            uploadFile: isUpload ? t.record.file : nil,
            responseLimit: isUpload ? .upload : .data(maxBytes: t.record.maxResponseBytes),
            requestTimeout: config.requestTimeout ?? SessionConfiguration.defaultRequestTimeout)
        request.uploadFileID = t.record.fileID.flatMap(FileID.init(text:))
        request.rateLimiter = makeRateLimiter(for: &t)
        request.allowInsecureRedirects = config.allowInsecureRedirects ?? false
        let runtime = TaskRuntime(taskID: id, journal: journal, durableBytes: 0)
        var taskLogger = logger
        taskLogger[metadataKey: "task"] = "\(id)"
        let exchange = Exchange(request: request, client: httpClient, observer: runtime, logger: taskLogger)
        t.runtime = runtime
        t.record.attempts += 1
        t.bytesReceived = 0
        if isUpload { t.bytesSent = 0 }
        tasks[id] = t
        runtime.start(exchange)
        Task { [weak self] in
            for await message in runtime.messages {
                guard let self else { return }
                await self.handle(message, from: runtime)
            }
        }
        logger.debug("exchange started", metadata: ["task": "\(id)", "kind": "\(kind.rawValue)", "method": "\(method)"])
    }

    /// Progress and the end of an exchange (called by `handle` for `.exchange` messages).
    func handleExchange(_ message: TaskRuntime.ExchangeMessage, from runtime: TaskRuntime) {
        let id = runtime.taskID
        guard var t = tasks[id], t.runtime === runtime else { return }
        switch message {
        case .sourceOpened(let bytes):
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
        case let .received(delta, total, expected):
            t.bytesReceived = total
            if let expected { t.record.bytesExpected = expected }
            tasks[id] = t
            rateMeter.add(delta, at: clock())
        case .finished(let outcome):
            exchangeEnded(id, outcome)
        }
    }

    /// A 2xx response completes the task with it; a permanent failure fails it (with the response when one
    /// arrived); a transient one makes it wait and retry from the start.
    private func exchangeEnded(_ id: Int64, _ outcome: ExchangeOutcome) {
        guard var t = tasks[id] else { return }
        t.runtime = nil
        t.discardPartialWhenStopped = false
        tasks[id] = t
        defer {
            finishInvalidationIfDone(t.record.session)
            pump()
        }
        if shuttingDown || t.machine.state != .running {
            // Stopped on purpose (suspend, cancel, shutdown): the next attempt starts from byte 0 anyway.
            _ = try? journal.updateTask(t.record, events: [])
            evictIfFinished(id)
            return
        }
        switch outcome {
        case .completed(let response):
            logger.info("\(t.record.kind) task complete", metadata: ["task": "\(id)", "status": "\(response.status)",
                                                                     "bodyBytes": "\(response.bodyBytes)"])
            let upload = t.record.kind == TaskKind.upload.rawValue
            if let total = t.bytesExpectedToSend, upload { tasks[id]?.bytesSent = total }
            let sent = tasks[id]?.bytesSent
            _ = try? apply(.completed, to: id) { record in
                record.response = response
                if upload, let sent { record.bytesDurable = sent } // an upload's bytes sent, kept with the task
            }
        case let .failed(failure, response):
            logger.info("\(t.record.kind) attempt failed: \(failure.error.message)",
                        metadata: ["task": "\(id)", "transient": "\(failure.isTransient)"])
            let kept = failure.isTransient ? nil : response
            _ = try? apply(.transferFailed(failure.error, transient: failure.isTransient, retryAfter: failure.retryAfter,
                                           jitterSample: Double.random(in: 0..<1)), to: id) { record in
                if let kept { record.response = kept }
            }
        case .stopped:
            let error = TaskError(code: TaskErrorCode.connectionLost, message: "The transfer stopped unexpectedly")
            _ = try? apply(.transferFailed(error, transient: true, retryAfter: nil, jitterSample: Double.random(in: 0..<1)), to: id)
        }
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
