// Attempts in the core, for every task kind: start one, take its progress, and act on its outcome.
import AsyncHTTPClient
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Starts one attempt of a task (the state counted it and set its progress): a download resumes from its
    /// durable offset; an upload or data task starts from byte 0, whatever happened before.
    func startTransfer(_ id: Int64) {
        guard let t = state.tasks[id], let s = state.sessions[t.record.session] else { return }
        let config = s.record.configuration
        let headers = (config.headers ?? [:]).merging(t.record.headers) { _, task in task }
            .sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        let requestTimeout = config.requestTimeout ?? SessionConfiguration.defaultRequestTimeout
        let kind = TaskKind(rawValue: t.record.kind) ?? .download
        var request: AttemptRequest
        var durable = ByteRanges()
        var maxConnections = 1
        switch kind {
        case .download:
            let validators = (t.record.etag != nil || t.record.lastModified != nil)
                ? Validators(etag: t.record.etag, lastModified: t.record.lastModified) : nil
            durable = t.record.durableRanges
            maxConnections = self.maxConnections(of: t, session: config)
            request = .download(taskID: id, url: t.record.url, headers: headers, partialPath: t.record.partialPath,
                                durable: durable, validators: validators, expectedLength: t.record.bytesExpected,
                                requestTimeout: requestTimeout, checkpointInterval: configuration.checkpointInterval,
                                maxConnections: maxConnections, freeSpaceFloor: configuration.minFreeSpace,
                                diskAccount: diskLedger.account(uid: t.owner, path: t.record.partialPath))
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
        }
        let bandwidth = BandwidthBucket(rate: t.record.bandwidthLimit ?? 0) // fresh: a resumed transfer never bursts
        request.rateLimiter = RateLimiter(buckets: [globalBandwidth, bandwidth])
        request.allowInsecureRedirects = config.allowInsecureRedirects ?? false
        request.proxy = configuration.proxyRules.forSession(proxy: config.proxy, bypass: config.proxyBypass)
            .proxy(for: t.record.url)
        let client: HTTPClient
        do {
            client = try clients.lease(for: request.proxy, uid: t.owner)
        } catch {
            // The uid's transfers already go through as many proxies as allowed: this one waits and is retried.
            let message = "uid \(error.uid) already has transfers through \(error.limit) different proxies, the most at "
                + "once; this task goes on when one of them is free"
            let failure = TransferFailure(error: TaskError(code: TaskErrorCode.proxyFailure, message: message),
                                          isTransient: true, durable: durable)
            // Not on this call: the slot it frees would start the next task here, which may be refused too.
            Task { [weak self] in await self?.attemptEnded(id, .failed(failure, response: nil)) }
            return
        }
        let runtime = TaskRuntime(taskID: id, journal: journal, durable: durable, connections: hostConnections,
                                  host: t.hostKey)
        var taskLogger = logger
        taskLogger[metadataKey: "task"] = "\(id)"
        let attempt = Attempt(request: request, client: client, observer: runtime, logger: taskLogger)
        attempts[id] = LiveAttempt(runtime: runtime, bandwidth: bandwidth, proxy: request.proxy, uid: t.owner)
        runtime.start(attempt)
        Task { [weak self] in
            for await message in runtime.messages {
                guard let self else { return }
                await self.handle(message, from: runtime)
            }
        }
        logger.debug("transfer started", metadata: [
            "task": "\(id)", "kind": "\(kind.rawValue)", "method": "\(request.method)", "durable": "\(durable)",
            "maxConnections": "\(maxConnections)", "proxy": "\(request.proxy.map(String.init(describing:)) ?? "none")",
        ])
    }

    /// What the attempt reports goes to the state as its progress; its end, as `attemptEnded`.
    func handle(_ message: TaskRuntime.Message, from runtime: TaskRuntime) {
        let id = runtime.taskID
        guard attempts[id]?.runtime === runtime else { return }
        let progress: DaemonState.Progress
        switch message {
        case .started(let start):
            if start.discardedBytes > 0 || start.reason != nil {
                logger.notice("restarting from zero", metadata: ["task": "\(id)", "reason": "\(start.reason ?? "")"])
            }
            if let named = nameFromResponse(id, start) {
                feedAndRun(.responseNamed(id, destination: named.destination, suggestedFilename: named.suggested))
            }
            progress = .started(start)
        case let .received(delta, total, expected):
            rateMeter.add(delta, at: clock())
            progress = .received(delta: delta, total: total, expected: expected)
        case .bodyOpened(let bytes):
            progress = .bodyOpened(bytes: bytes)
        case let .sent(delta, total, expected):
            uploadRateMeter.add(delta, at: clock())
            progress = .sent(delta: delta, total: total, expected: expected)
        case .finished(let outcome):
            if let live = attempts.removeValue(forKey: id) { clients.release(live.proxy, uid: live.uid, now: clock()) }
            return attemptEnded(id, outcome)
        }
        feedAndRun(.attemptProgress(id, progress))
    }

    /// The name the state takes from the first response (`DaemonState.responseName`), made a free path in the
    /// same directory (the file system is looked at here, off the state). nil when the task's name is settled.
    func nameFromResponse(_ id: Int64, _ start: ResponseStart) -> (destination: String, suggested: String)? {
        guard let name = state.responseName(id, start) else { return nil }
        guard name.candidate != name.current else { return (name.current, name.suggested) }
        let current = name.current
        let isReserved = { (path: String) in path != current && self.state.tasks.isReserved(path) }
        // Always a free name: the server chose it, so it never replaces a file (`overwrite` needs an explicit
        // destination, which is never renamed).
        let destination = FilePublisher.availableName(for: name.candidate, isReserved: isReserved)
        logger.info("the response names the file", metadata: ["task": "\(id)", "destination": "\(destination)"])
        return (destination, name.suggested)
    }

    /// The attempt ended: `DaemonState` decides what that means for the task (`AttemptVerdict`) and frees
    /// its slot; the actions are carried out here.
    func attemptEnded(_ id: Int64, _ outcome: AttemptOutcome) {
        guard let t = state.tasks[id] else { return }
        if !state.shuttingDown, t.machine.state == .running {
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
    }
}
