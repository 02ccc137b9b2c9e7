#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What happened. On the wire the payload's fields sit next to `type` in one flat object.
public enum EventPayload: Sendable, Equatable {
    /// The task moved between states. `reason` is set when the new state is `waiting` or `failed`.
    case stateChanged(state: TaskState, previous: TaskState?, reason: TaskError?)
    /// Progress (live only, never journaled, at most 4 per second per task).
    case didWriteData(bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64?)
    /// A transfer (re)started at `offset`. offset 0 with `discardedBytes > 0` means the server sent the
    /// whole resource again (it changed, or ignores ranges) and the partial data was discarded.
    case didResumeAtOffset(offset: Int64, expectedTotalBytes: Int64?, discardedBytes: Int64?, reason: String?)
    /// The file is complete at `location`.
    case didFinishDownloading(location: String)
    /// A download the client named no file for got its name from the first response (Content-Disposition, else
    /// the URL after redirects): it will be published at `destination` (a free name in the same directory).
    case didChangeDestination(destination: String, suggestedFilename: String?)
    /// Upload progress (live only, never journaled, at most 4 per second per task).
    case didSendBodyData(bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64?)
    /// Always the task's last event; `error` is nil on success. Uploads and data tasks carry the
    /// `response` (status, headers, bounded body), also when the status makes the task fail.
    case didComplete(error: TaskError?, response: TaskResponse? = nil)
    /// Every event journaled up to `through` has been delivered (replay done; live events follow).
    case didFinishEvents(through: Int64)
    /// The session finished invalidating (live only).
    case didBecomeInvalid

    public var type: String {
        switch self {
        case .stateChanged: return "stateChanged"
        case .didWriteData: return "didWriteData"
        case .didSendBodyData: return "didSendBodyData"
        case .didResumeAtOffset: return "didResumeAtOffset"
        case .didFinishDownloading: return "didFinishDownloading"
        case .didChangeDestination: return "didChangeDestination"
        case .didComplete: return "didComplete"
        case .didFinishEvents: return "didFinishEvents"
        case .didBecomeInvalid: return "didBecomeInvalid"
        }
    }

    /// Whether this is a task's `didComplete` (it finished: completed, failed or canceled).
    public var isDidComplete: Bool {
        if case .didComplete = self { return true }
        return false
    }

    /// Whether events of this type are written to the journal (and so replayed).
    public var isJournaled: Bool {
        switch self {
        case .stateChanged, .didResumeAtOffset, .didFinishDownloading, .didChangeDestination, .didComplete: return true
        case .didWriteData, .didSendBodyData, .didFinishEvents, .didBecomeInvalid: return false
        }
    }
}

/// An event as delivered in an `event` notification.
public struct Event: Codable, Sendable, Equatable {
    /// Journal sequence number; null for live-only events (didWriteData, didFinishEvents, didBecomeInvalid).
    public var seq: Int64?
    public var session: String
    public var task: Int64?
    public var time: String
    public var payload: EventPayload

    public var type: String { payload.type }

    public init(seq: Int64?, session: String, task: Int64?, time: String, payload: EventPayload) {
        self.seq = seq
        self.session = session
        self.task = task
        self.time = time
        self.payload = payload
    }

    enum CodingKeys: String, CodingKey {
        case seq, session, task, time, type
        case state, previousState, reason
        case bytesWritten, totalBytesWritten, totalBytesExpectedToWrite
        case bytesSent, totalBytesSent, totalBytesExpectedToSend, response
        case offset, expectedTotalBytes, discardedBytes
        case location, error, through, destination, suggestedFilename
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(seq, forKey: .seq)
        try c.encode(session, forKey: .session)
        try c.encode(task, forKey: .task)
        try c.encode(time, forKey: .time)
        try c.encode(payload.type, forKey: .type)
        switch payload {
        case let .stateChanged(state, previous, reason):
            try c.encode(state, forKey: .state)
            try c.encode(previous, forKey: .previousState)
            try c.encodeIfPresent(reason, forKey: .reason)
        case let .didWriteData(written, total, expected):
            try c.encode(written, forKey: .bytesWritten)
            try c.encode(total, forKey: .totalBytesWritten)
            try c.encode(expected ?? -1, forKey: .totalBytesExpectedToWrite)
        case let .didResumeAtOffset(offset, expected, discarded, reason):
            try c.encode(offset, forKey: .offset)
            try c.encode(expected ?? -1, forKey: .expectedTotalBytes)
            try c.encodeIfPresent(discarded, forKey: .discardedBytes)
            if let reason { try c.encode(reason, forKey: .reason) }
        case let .didFinishDownloading(location):
            try c.encode(location, forKey: .location)
        case let .didChangeDestination(destination, suggested):
            try c.encode(destination, forKey: .destination)
            try c.encodeIfPresent(suggested, forKey: .suggestedFilename)
        case let .didSendBodyData(sent, total, expected):
            try c.encode(sent, forKey: .bytesSent)
            try c.encode(total, forKey: .totalBytesSent)
            try c.encode(expected ?? -1, forKey: .totalBytesExpectedToSend)
        case let .didComplete(error, response):
            try c.encode(error, forKey: .error)
            try c.encodeIfPresent(response, forKey: .response)
        case let .didFinishEvents(through):
            try c.encode(through, forKey: .through)
        case .didBecomeInvalid:
            break
        }
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        seq = try c.decodeIfPresent(Int64.self, forKey: .seq)
        session = try c.decode(String.self, forKey: .session)
        task = try c.decodeIfPresent(Int64.self, forKey: .task)
        time = try c.decodeIfPresent(String.self, forKey: .time) ?? ""
        let type = try c.decode(String.self, forKey: .type)
        func expected(_ key: CodingKeys) throws -> Int64? {
            guard let v = try c.decodeIfPresent(Int64.self, forKey: key), v >= 0 else { return nil }
            return v
        }
        switch type {
        case "stateChanged":
            payload = .stateChanged(state: try c.decode(TaskState.self, forKey: .state),
                                    previous: try c.decodeIfPresent(TaskState.self, forKey: .previousState),
                                    reason: try c.decodeIfPresent(TaskError.self, forKey: .reason))
        case "didWriteData":
            payload = .didWriteData(bytesWritten: try c.decode(Int64.self, forKey: .bytesWritten),
                                    totalBytesWritten: try c.decode(Int64.self, forKey: .totalBytesWritten),
                                    totalBytesExpectedToWrite: try expected(.totalBytesExpectedToWrite))
        case "didResumeAtOffset":
            payload = .didResumeAtOffset(offset: try c.decode(Int64.self, forKey: .offset),
                                         expectedTotalBytes: try expected(.expectedTotalBytes),
                                         discardedBytes: try c.decodeIfPresent(Int64.self, forKey: .discardedBytes),
                                         reason: try? c.decodeIfPresent(String.self, forKey: .reason))
        case "didFinishDownloading":
            payload = .didFinishDownloading(location: try c.decode(String.self, forKey: .location))
        case "didChangeDestination":
            payload = .didChangeDestination(destination: try c.decode(String.self, forKey: .destination),
                                            suggestedFilename: try c.decodeIfPresent(String.self, forKey: .suggestedFilename))
        case "didComplete":
            payload = .didComplete(error: try c.decodeIfPresent(TaskError.self, forKey: .error),
                                   response: try c.decodeIfPresent(TaskResponse.self, forKey: .response))
        case "didSendBodyData":
            payload = .didSendBodyData(bytesSent: try c.decode(Int64.self, forKey: .bytesSent),
                                       totalBytesSent: try c.decode(Int64.self, forKey: .totalBytesSent),
                                       totalBytesExpectedToSend: try expected(.totalBytesExpectedToSend))
        case "didFinishEvents":
            payload = .didFinishEvents(through: try c.decodeIfPresent(Int64.self, forKey: .through) ?? 0)
        case "didBecomeInvalid":
            payload = .didBecomeInvalid
        default:
            throw DecodingError.dataCorruptedError(forKey: .type, in: c, debugDescription: "unknown event type '\(type)'")
        }
    }
}

public struct EventsSubscribeParams: Codable, Sendable {
    public var session: String
    /// Replay journaled events with seq > after (default 0: everything not yet pruned).
    public var after: Int64?
    public init(session: String, after: Int64? = nil) {
        self.session = session
        self.after = after
    }
}

public struct EventsSubscribeResult: Codable, Sendable {
    public var session: String
    public var after: Int64
    /// The lowest seq still in the journal for this session minus one: events at or below it were pruned
    /// by `events.ack`. If `after` is below this, some events you asked for were already acknowledged.
    public var prunedThrough: Int64
    public init(session: String, after: Int64, prunedThrough: Int64) {
        self.session = session
        self.after = after
        self.prunedThrough = prunedThrough
    }
}

public struct EventsAckParams: Codable, Sendable {
    public var session: String
    public var through: Int64
    public init(session: String, through: Int64) {
        self.session = session
        self.through = through
    }
}

public struct EventsAckResult: Codable, Sendable {
    public var ackedThrough: Int64
    public var pruned: Int
    public init(ackedThrough: Int64, pruned: Int) {
        self.ackedThrough = ackedThrough
        self.pruned = pruned
    }
}
