// Pure rules of an exchange: methods, the capped response body, status classification.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HalfTunesProtocol

/// Gathers a response body up to its limit. No I/O.
public struct ResponseCollector: Sendable, Equatable {
    public let limit: ResponseLimit
    /// The kept beginning of the body (at most `limit.maxBytes`).
    public private(set) var kept: [UInt8] = []
    /// Every body byte received, kept or not.
    public private(set) var total: Int64 = 0

    public init(limit: ResponseLimit) {
        self.limit = limit
    }

    /// More bytes arrived than the limit keeps.
    public var isOverLimit: Bool { total > Int64(limit.maxBytes) }

    /// Adds a body part. Returns false when the body is over a limit whose overflow fails the exchange
    /// (nothing more should be read then).
    @discardableResult
    public mutating func append<Bytes: Collection>(_ bytes: Bytes) -> Bool where Bytes.Element == UInt8 {
        total += Int64(bytes.count)
        let room = limit.maxBytes - kept.count
        if room > 0 { kept.append(contentsOf: bytes.prefix(room)) }
        return !(isOverLimit && limit.overflow == .fail)
    }

    /// The response as reported: body base64 (nil when empty or, for a failing overflow, not kept).
    public func response(status: Int, headers: [(String, String)]) -> TaskResponse {
        let failing = isOverLimit && limit.overflow == .fail
        let body = failing || kept.isEmpty ? nil : Data(kept).base64EncodedString()
        return TaskResponse(status: status, headers: headers.map { [$0.0, $0.1] }, body: body, bodyBytes: total,
                            truncated: isOverLimit)
    }
}

public enum ExchangeRules {
    /// Methods an upload may use; the first is the default.
    public static let uploadMethods = ["PUT", "POST"]
    /// Methods a data task may use; the first is the default.
    public static let dataMethods = ["GET", "HEAD"]

    /// A method a task kind cannot use; `message` says which it can.
    public struct InvalidMethod: Error, Equatable {
        public var message: String
    }

    /// The method to use for a task kind (the default when none is given, upper-cased otherwise).
    public static func method(_ given: String?, kind: TaskKind) -> Result<String, InvalidMethod> {
        let allowed: [String]
        switch kind {
        case .upload: allowed = uploadMethods
        case .data: allowed = dataMethods
        case .download: allowed = ["GET"]
        }
        guard let given else { return .success(allowed[0]) }
        let upper = given.uppercased()
        guard allowed.contains(upper) else {
            let list = allowed.joined(separator: " or ")
            return .failure(InvalidMethod(message: "method '\(given)' is not supported for \(kind.rawValue) tasks; use \(list)"))
        }
        return .success(upper)
    }

    /// A response head refused before its body is read: a data task whose Content-Length is over its cap.
    public static func refusal(status: Int, headers: [(String, String)], method: String, limit: ResponseLimit,
                               url: String) -> TaskError? {
        guard limit.overflow == .fail, method != "HEAD",
              let length = ResumeDecision.contentLength(headers), length > Int64(limit.maxBytes) else { return nil }
        return tooLarge(url: url, bytes: length, limit: limit)
    }

    public static func tooLarge(url: String, bytes: Int64?, limit: ResponseLimit) -> TaskError {
        let size = bytes.map { "\($0) bytes" } ?? "more"
        return TaskError(code: TaskErrorCode.responseTooLarge,
                         message: "The response from \(url) has \(size), more than this data task's limit of "
                             + "\(limit.maxBytes) bytes (maxResponseBytes; at most \(ResponseLimit.dataDefaultBytes)); "
                             + "download it to a file instead")
    }

    /// A whole response: 2xx completes; other statuses fail like a download's (transient for 408, 429 and
    /// 5xx as `ResumeDecision` classifies them, honouring Retry-After), carrying the response.
    public static func outcome(status: Int, headers: [(String, String)], response: TaskResponse, now: Double,
                               url: String) -> AttemptOutcome {
        if (200...299).contains(status) { return .responded(response) }
        let decision = ResumeDecision.decide(requestedOffset: 0, status: status, headers: headers, now: now,
                                             sentIfRange: nil, url: url)
        if case let .fail(error, transient, retryAfter) = decision {
            return .failed(TransferFailure(error: error, isTransient: transient, retryAfter: retryAfter, durableBytes: 0),
                           response: response)
        }
        let error = TaskError(code: TaskErrorCode.httpStatus, message: "HTTP \(status) from \(url)", httpStatus: status)
        return .failed(TransferFailure(error: error, isTransient: false, durableBytes: 0), response: response)
    }
}

/// The most response body bytes kept, and what happens to a longer body.
public struct ResponseLimit: Sendable, Equatable {
    public enum Overflow: Sendable, Equatable {
        /// Keep the beginning, mark the response `truncated`, read and discard the rest (uploads).
        case truncate
        /// Fail the attempt with `responseTooLarge` (data tasks: the body is the result).
        case fail
    }

    public var maxBytes: Int
    public var overflow: Overflow

    public init(maxBytes: Int, overflow: Overflow) {
        self.maxBytes = maxBytes
        self.overflow = overflow
    }

    /// Uploads keep the first 64 KiB of the response body.
    public static let upload = ResponseLimit(maxBytes: 64 << 10, overflow: .truncate)
    /// Data tasks' default (and largest) body cap: 16 MiB.
    public static let dataDefaultBytes: Int64 = 16 << 20

    public static func data(maxBytes: Int64?) -> ResponseLimit {
        ResponseLimit(maxBytes: Int(min(max(maxBytes ?? dataDefaultBytes, 0), dataDefaultBytes)), overflow: .fail)
    }
}
