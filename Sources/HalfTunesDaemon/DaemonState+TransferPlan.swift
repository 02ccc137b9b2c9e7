// What an attempt asks for, as the state decides it from the task's row and its session's configuration: the runner adds only what is live.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

/// How a download writes its partial file, as the daemon is configured (`checkpoint-interval`: how often what is
/// written is made durable and journaled; `min-free-space`: the free space no download may take).
struct PartialWriting: Equatable, Sendable {
    var checkpointInterval: Double = 1
    var freeSpaceFloor: FreeSpaceFloor = .automatic
}

/// An attempt's request as the state decides it (`DaemonState.transferPlan`). The runner builds the engine's
/// `AttemptRequest` from it and adds only live resources: the bandwidth buckets, the disk ledger's account, the
/// netrc file's credentials when `netrc` says so.
struct TransferPlan: Equatable, Sendable {
    struct Header: Equatable, Sendable {
        var name: String
        var value: String
    }

    /// A download's side: its partial file, what is durable in it and what is known of the resource.
    struct Download: Equatable, Sendable {
        var partialPath: String
        var durable: ByteRanges
        /// From an earlier response (nil: none, the attempt starts at 0).
        var validators: Validators?
        var expectedLength: Int64?
        /// The most requests at once: the task's, else its session's, else the default.
        var maxConnections: Int
        /// The daemon's checkpoint interval and free-space floor.
        var writing = PartialWriting()
    }

    var taskID: Int64
    var kind: TaskKind
    var url: String
    var method: String
    /// The session's headers with the task's over them, by name.
    var headers: [Header]
    var requestTimeout: Double
    /// The task's own limit in bytes per second (0: none).
    var bandwidthLimit: Int64
    var allowInsecureRedirects: Bool
    /// The session's proxy rules, else the daemon's: the ones the queue counted the first hop's proxy by.
    var proxyRules: ProxyRules
    /// Each for its origin: the task's own (for its URL's origin) first, then its session's. Entries journaled
    /// without an origin are not among them: they are sent nowhere.
    var credentials: [OriginCredentials]
    /// The daemon's netrc entry for the URL's host answers its origin too: a task of the daemon's own user that
    /// has no credentials for it.
    var netrc: Bool
    /// A download's partial file (nil: an upload or data task, whose response is kept in memory).
    var download: Download?
    /// An upload's file.
    var body: UploadBody?
    /// An upload's or data task's response: at most this kept.
    var responseLimit: ResponseLimit?
}

extension DaemonState {
    /// The plan of an attempt of task `id` now (nil: the state holds no such task or its session). A pure function
    /// of the state: the runner asks it when it carries out `startAttempt`.
    func transferPlan(_ id: Int64) -> TransferPlan? {
        guard let t = tasks[id], let s = sessions[t.record.session] else { return nil }
        let r = t.record
        let config = s.record.configuration
        let kind = TaskKind(rawValue: r.kind) ?? .download
        let headers = (config.headers ?? [:]).merging(r.headers) { _, task in task }
            .sorted { $0.key < $1.key }.map { TransferPlan.Header(name: $0.key, value: $0.value) }
        let origin = HTTPAuthentication.origin(r.url)
        let own = r.credentials.map { [OriginCredentials(origin: origin, user: $0.user, password: $0.password)] } ?? []
        // A task's own credentials answer its origin whatever the realm: the session's for it (a realm's would be
        // chosen first) stand aside.
        let credentials = own + (config.credentials ?? []).filter { entry in
            guard let named = entry.origin else { return false }
            return own.isEmpty || HTTPAuthentication.origin(named) != origin
        }
        let covered = credentials.contains { $0.origin.map(HTTPAuthentication.origin) == origin }
        var plan = TransferPlan(
            taskID: id, kind: kind, url: r.url,
            method: kind == .download ? "GET" : r.method ?? ((try? ExchangeRules.method(nil, kind: kind).get()) ?? "GET"),
            headers: headers,
            requestTimeout: config.requestTimeout ?? SessionConfiguration.defaultRequestTimeout,
            bandwidthLimit: r.bandwidthLimit ?? 0, allowInsecureRedirects: config.allowInsecureRedirects ?? false,
            proxyRules: proxyRules(session: r.session), credentials: credentials,
            netrc: !covered && t.owner == daemonUID)
        switch kind {
        case .download:
            let validators = (r.etag != nil || r.lastModified != nil) ? Validators(etag: r.etag, lastModified: r.lastModified) : nil
            plan.download = TransferPlan.Download(
                partialPath: r.partialPath, durable: r.durableRanges, validators: validators, expectedLength: r.bytesExpected,
                maxConnections: r.maxConnections ?? config.maxConnectionsPerTask ?? SessionConfiguration.defaultMaxConnectionsPerTask,
                writing: partialWriting)
        case .upload:
            plan.body = r.file.map { UploadBody(path: $0, fileID: r.fileID.flatMap(FileID.init(text:))) }
            plan.responseLimit = .upload
        case .data:
            plan.responseLimit = .data(maxBytes: r.maxResponseBytes)
        }
        return plan
    }
}
