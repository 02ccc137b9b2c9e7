/// Receives a background session's events, like `URLSessionDownloadDelegate`. Every method has an
/// empty default implementation. Calls arrive in event order on one background thread.
public protocol BackgroundSessionDelegate: AnyObject, Sendable {
    /// Progress (live only). `totalBytesExpectedToWrite` is -1 when the length is unknown.
    func session(_ s: BackgroundSession, task: Int64, didWriteData bytesWritten: Int64, totalBytesWritten: Int64,
                 totalBytesExpectedToWrite: Int64)
    /// A transfer (re)started at `offset`; `expectedTotalBytes` is -1 when unknown.
    func session(_ s: BackgroundSession, task: Int64, didResumeAtOffset offset: Int64, expectedTotalBytes: Int64)
    /// A download created without a destination got its file name from the response (Content-Disposition, else
    /// the URL after redirects): it will be published at `destination`.
    func session(_ s: BackgroundSession, task: Int64, didChangeDestination destination: String, suggestedFilename: String?)
    /// The file is complete at `location`.
    func session(_ s: BackgroundSession, task: Int64, didFinishDownloadingTo location: String)
    /// Upload progress (live only). `totalBytesExpectedToSend` is -1 when the length is unknown.
    func session(_ s: BackgroundSession, task: Int64, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
                 totalBytesExpectedToSend: Int64)
    /// Always a task's last event; `error` is nil on success.
    func session(_ s: BackgroundSession, task: Int64, didCompleteWithError error: TaskError?)
    /// An upload's or data task's last event, with its response (nil when no response arrived);
    /// by default it calls `didCompleteWithError`.
    func session(_ s: BackgroundSession, task: Int64, didCompleteWithError error: TaskError?, response: TaskResponse?)
    func session(_ s: BackgroundSession, task: Int64, didChangeState state: TaskState)
    /// Every event that queued up while no one listened has been delivered; live events follow.
    func didFinishEvents(forBackgroundSession s: BackgroundSession)
    /// The session finished invalidating (after `finishTasksAndInvalidate()` / `invalidateAndCancel()`).
    func sessionDidBecomeInvalid(_ s: BackgroundSession)
    /// The event connection ended without `detach()` (the daemon stopped, or a read failed).
    /// Attach again, with `after` set to the last sequence number seen, to continue.
    func session(_ s: BackgroundSession, didDisconnectWithError error: HalfTunesClientError?)
}

public extension BackgroundSessionDelegate {
    func session(_ s: BackgroundSession, task: Int64, didWriteData bytesWritten: Int64, totalBytesWritten: Int64,
                 totalBytesExpectedToWrite: Int64) {}
    func session(_ s: BackgroundSession, task: Int64, didResumeAtOffset offset: Int64, expectedTotalBytes: Int64) {}
    func session(_ s: BackgroundSession, task: Int64, didChangeDestination destination: String, suggestedFilename: String?) {}
    func session(_ s: BackgroundSession, task: Int64, didFinishDownloadingTo location: String) {}
    func session(_ s: BackgroundSession, task: Int64, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
                 totalBytesExpectedToSend: Int64) {}
    func session(_ s: BackgroundSession, task: Int64, didCompleteWithError error: TaskError?) {}
    func session(_ s: BackgroundSession, task: Int64, didCompleteWithError error: TaskError?, response: TaskResponse?) {
        self.session(s, task: task, didCompleteWithError: error)
    }
    func session(_ s: BackgroundSession, task: Int64, didChangeState state: TaskState) {}
    func didFinishEvents(forBackgroundSession s: BackgroundSession) {}
    func sessionDidBecomeInvalid(_ s: BackgroundSession) {}
    func session(_ s: BackgroundSession, didDisconnectWithError error: HalfTunesClientError?) {}
}

extension BackgroundSessionDelegate {
    /// Calls the delegate method that matches `event`.
    func deliver(_ event: Event, from session: BackgroundSession) {
        let task = event.task ?? 0
        switch event.payload {
        case let .stateChanged(state, _, _):
            self.session(session, task: task, didChangeState: state)
        case let .didWriteData(written, total, expected):
            self.session(session, task: task, didWriteData: written, totalBytesWritten: total,
                         totalBytesExpectedToWrite: expected ?? -1)
        case let .didResumeAtOffset(offset, expected, _, _):
            self.session(session, task: task, didResumeAtOffset: offset, expectedTotalBytes: expected ?? -1)
        case let .didFinishDownloading(location):
            self.session(session, task: task, didFinishDownloadingTo: location)
        case let .didChangeDestination(destination, suggested):
            self.session(session, task: task, didChangeDestination: destination, suggestedFilename: suggested)
        case let .didSendBodyData(sent, total, expected):
            self.session(session, task: task, didSendBodyData: sent, totalBytesSent: total,
                         totalBytesExpectedToSend: expected ?? -1)
        case let .didComplete(error, response):
            self.session(session, task: task, didCompleteWithError: error, response: response)
        case .didFinishEvents:
            didFinishEvents(forBackgroundSession: session)
        case .didBecomeInvalid:
            sessionDidBecomeInvalid(session)
        }
    }
}
