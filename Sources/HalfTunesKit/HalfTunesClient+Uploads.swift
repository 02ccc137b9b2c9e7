// Upload and data tasks: creating them (client and session), their progress and response on a task.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension HalfTunesClient {
    /// Creates an upload task: the file at `file` (an absolute path the daemon can read) is sent to `url`
    /// with `method` (PUT by default, or POST). Its completion carries the response status, headers and the
    /// first 64 KiB of the response body. Transient failures retry the upload from the start.
    public func createUpload(session: String, url: String, file: String, method: String? = nil,
                             headers: [String: String]? = nil, description: String? = nil, start: Bool = false,
                             priority: TaskPriority? = nil, bandwidthLimit: Int64? = nil) throws -> TaskInfo {
        try createTask(TaskCreateParams(session: session, url: url, headers: headers, description: description,
                                        start: start, kind: .upload, priority: priority,
                                        bandwidthLimit: bandwidthLimit, method: method, file: file))
    }

    /// Creates a data task: an in-memory `GET` (or `HEAD`) whose response body, at most `maxResponseBytes`
    /// (default and largest 16 MiB; a longer body fails the task with `responseTooLarge`), comes back in
    /// its `didComplete` event and in `TaskInfo.response`.
    public func createDataTask(session: String, url: String, method: String? = nil, headers: [String: String]? = nil,
                               maxResponseBytes: Int64? = nil, description: String? = nil, start: Bool = false,
                               priority: TaskPriority? = nil) throws -> TaskInfo {
        try createTask(TaskCreateParams(session: session, url: url, headers: headers, description: description,
                                        start: start, kind: .data, priority: priority, method: method,
                                        maxResponseBytes: maxResponseBytes))
    }
}

/// Any task of a background session (download, upload or data task): `DownloadTask` serves them all.
public typealias BackgroundTask = DownloadTask

extension BackgroundSession {
    /// A new upload task, created suspended like URLSession's: call `resume()` to start it.
    public func uploadTask(with url: String, fromFile file: String, method: String? = nil,
                           headers: [String: String]? = nil, description: String? = nil) throws -> BackgroundTask {
        let info = try client.createUpload(session: identifier, url: url, file: file, method: method,
                                           headers: headers, description: description)
        return DownloadTask(client: client, info: info)
    }

    /// A new data task (created suspended): its body arrives in `didCompleteWithError(_:response:)`.
    public func dataTask(with url: String, method: String? = nil, headers: [String: String]? = nil,
                         maxResponseBytes: Int64? = nil, description: String? = nil) throws -> BackgroundTask {
        let info = try client.createDataTask(session: identifier, url: url, method: method, headers: headers,
                                             maxResponseBytes: maxResponseBytes, description: description)
        return DownloadTask(client: client, info: info)
    }
}

extension BackgroundSession {
    /// URLSession's `data(from:)`: runs a data task to its end and returns the body and the response (any HTTP
    /// status; a transfer failure throws its `TaskError`). Its completion event is acknowledged once the body is
    /// read (the daemon then drops it); events of other tasks are left for whoever handles them.
    public func data(from url: String, method: String? = nil, headers: [String: String]? = nil,
                     maxResponseBytes: Int64? = nil, description: String? = nil) throws -> (body: [UInt8], response: TaskResponse) {
        // Subscribed before the task exists, after what the session already has (session.open answers it in O(1)).
        let events = try self.events(after: try client.openSession(identifier).session.lastEventSeq)
        defer { events.close() }
        let task = try dataTask(with: url, method: method, headers: headers, maxResponseBytes: maxResponseBytes,
                                description: description)
        try task.resume()
        while let event = try events.nextEvent() {
            guard event.task == task.taskIdentifier, case .didComplete(let error, _) = event.payload else { continue }
            let info = try task.refresh()
            if let seq = event.seq { _ = try? client.ack(session: identifier, through: seq) }
            if let error { throw error }
            guard let response = info.response else {
                throw HalfTunesClientError.protocolViolation("task \(task.taskIdentifier) completed without a response")
            }
            return (response.bodyBytesDecoded ?? [], response)
        }
        throw HalfTunesClientError.protocolViolation("the daemon closed the event stream before task \(task.taskIdentifier) completed")
    }

    /// The session's task with this identifier (what an app that kept only the identifier holds on to).
    public func task(withIdentifier id: Int64) throws -> DownloadTask {
        let info = try client.task(id)
        guard info.session == identifier else {
            throw HalfTunesClientError.protocolViolation("task \(id) is in session \(info.session), not \(identifier)")
        }
        return DownloadTask(client: client, info: info)
    }
}

extension DownloadTask {
    /// download, upload or data.
    public var kind: TaskKind { TaskKind(rawValue: info.kind) ?? .download }
    /// Uploads: bytes of the body sent in the current attempt (every attempt starts from 0).
    public var countOfBytesSent: Int64 { info.bytesSent ?? 0 }
    /// Uploads: the body's length; -1 when not known.
    public var countOfBytesExpectedToSend: Int64 { info.bytesExpectedToSend ?? -1 }
    /// Uploads and data tasks, once ended: the response (`task.list` leaves its body out; `refresh()` has it).
    public var response: TaskResponse? { info.response }
}

extension TaskResponse {
    /// The kept body's bytes (nil when there is none, or it is not valid base64).
    public var bodyBytesDecoded: [UInt8]? {
        guard let body, let data = Data(base64Encoded: body) else { return nil }
        return [UInt8](data)
    }

    /// The value of the first header field named `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers?.first { $0.count == 2 && $0[0].lowercased() == lower }?[1]
    }
}
