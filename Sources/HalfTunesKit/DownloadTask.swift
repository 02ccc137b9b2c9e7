import Foundation
/// A download in a background session, like `URLSessionDownloadTask`. Its `info` is the task as last
/// fetched from the daemon; every method that changes the task refreshes it.
public final class DownloadTask: @unchecked Sendable {
    public let taskIdentifier: Int64
    private let client: HalfTunesClient
    private let lock = Lock()
    private var lastInfo: TaskInfo

    init(client: HalfTunesClient, info: TaskInfo) {
        self.client = client
        self.taskIdentifier = info.id
        self.lastInfo = info
    }

    /// The task as last fetched (`refresh()` fetches it again).
    public var info: TaskInfo { lock.withLock { lastInfo } }
    public var state: TaskState { info.state }
    public var originalURL: String { info.url }
    public var currentURL: String { info.currentURL ?? info.url }
    public var taskDescription: String? { info.description }
    public var countOfBytesReceived: Int64 { info.bytesReceived }
    /// -1 when the length is not known (like `NSURLSessionTransferSizeUnknown`).
    public var countOfBytesExpectedToReceive: Int64 { info.bytesExpected ?? -1 }
    /// Why the task failed (nil unless `failed` or `canceled`).
    public var error: TaskError? { info.error }
    /// Not before this time (`BackgroundSession.downloadTask(with:earliestBeginDate:)`); nil: at once.
    public var earliestBeginDate: Date? {
        info.earliestBeginDate.flatMap(Timestamp.parse).map { Date(timeIntervalSince1970: $0) }
    }

    /// Starts (queues) a new or suspended task.
    public func resume() throws { update(try client.resume(taskIdentifier)) }

    /// Pauses the task: no traffic, no timeouts, the bytes so far are kept.
    public func suspend() throws { update(try client.suspend(taskIdentifier)) }

    /// Cancels the task; it completes with a `canceled` error.
    public func cancel() throws { update(try client.cancel(taskIdentifier).task) }

    /// Cancels the task and, when asked and possible, returns resume data for
    /// `BackgroundSession.downloadTask(withResumeData:)`; nil when the download cannot be resumed.
    public func cancel(byProducingResumeData: Bool = true) throws -> String? {
        let result = try client.cancel(taskIdentifier, produceResumeData: byProducingResumeData)
        update(result.task)
        return result.resumeData
    }

    @discardableResult
    public func refresh() throws -> TaskInfo {
        let info = try client.task(taskIdentifier)
        update(info)
        return info
    }

    private func update(_ info: TaskInfo) { lock.withLock { lastInfo = info } }
}
