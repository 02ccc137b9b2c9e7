// Upload and data tasks in the core: task.create's checks and the task they create (attempts: +Attempts).
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

    /// The row of a new upload or data task (the URL was checked by `prepareCreate`).
    func exchangeTask(_ p: TaskCreateParams, _ fields: ExchangeFields, url: String, in s: ManagedSession) -> TaskRecord {
        let now = clock()
        var record = TaskRecord(
            session: p.session, kind: fields.kind.rawValue, url: url, state: .suspended, destination: "",
            partialPath: "", headers: p.headers ?? [:], description: p.description, createdAt: now, updatedAt: now,
            resourceDeadline: now + (s.record.configuration.resourceTimeout ?? SessionConfiguration.defaultResourceTimeout),
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
