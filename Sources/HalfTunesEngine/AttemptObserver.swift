// Who hears an Attempt's progress: its start, bytes, checkpoints and the connections it asks for.
import HalfTunesCore
import HalfTunesProtocol

/// Receives an attempt's events. Calls are serial (never concurrent). A download's come from its partial
/// file's callback queue, so progress and checkpoints arrive in the order the data was written; an upload's
/// and a data task's come from the attempt's event loop.
public protocol AttemptObserver: AnyObject, Sendable {
    /// Downloads: once a response was accepted, after any truncation of the partial is durable, before any
    /// other call about the response.
    func attemptDidStart(_ attempt: Attempt, _ start: ResponseStart)
    /// Response body bytes received: at most every progressInterval, plus once when the body ends.
    /// `bytes` is the delta since the previous call; a download's totals are positions in the file (they
    /// include the resumed offset), others count from 0 in every attempt.
    func attemptDidReceive(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?)
    /// Downloads: called AFTER the `durable` ranges of the partial file are written and fsynced; each call's
    /// ranges hold the previous call's (fewer only after a restart from zero). The daemon journals inside.
    func attemptDidCheckpoint(_ attempt: Attempt, durable: ByteRanges)
    /// Uploads: the file was opened; this attempt sends `bytesExpectedToSend` bytes.
    func attemptDidOpenBody(_ attempt: Attempt, bytesExpectedToSend: Int64)
    /// Uploads: at most every progressInterval, plus once when the body is sent. Totals count from 0 in
    /// every attempt (and again after a redirect that sends the body anew).
    func attemptDidSend(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?)
    /// Downloads: the attempt wants one more connection besides those it has (to split the download); false
    /// and it opens none now (it asks again later). Each true is given back by `attemptReleasedConnection`
    /// once that request ended. Called on the attempt's event loop: answer at once, never block.
    func attemptWantsConnection(_ attempt: Attempt) -> Bool
    /// Downloads: a connection granted by `attemptWantsConnection` is no longer used.
    func attemptReleasedConnection(_ attempt: Attempt)
    /// Downloads: the server refused a further connection (429, 503), asking to wait `retryAfter` seconds if it
    /// said so. The attempt already uses fewer connections; the observer may give the host fewer as well.
    func attemptConnectionRefused(_ attempt: Attempt, retryAfter: Double?)
}

extension AttemptObserver {
    public func attemptDidStart(_ attempt: Attempt, _ start: ResponseStart) {}
    public func attemptDidOpenBody(_ attempt: Attempt, bytesExpectedToSend: Int64) {}
    public func attemptDidSend(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?) {}
    public func attemptWantsConnection(_ attempt: Attempt) -> Bool { true }
    public func attemptReleasedConnection(_ attempt: Attempt) {}
    public func attemptConnectionRefused(_ attempt: Attempt, retryAfter: Double?) {}
}
