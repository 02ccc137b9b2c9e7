// Which redirects a transfer follows: at most 10 hops, no loops, http(s) only, no https→http unless allowed.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HalfTunesProtocol

/// A pure decision on one response head of a request chain (no I/O).
public enum RedirectPolicy {
    /// Redirects followed within one attempt; the next one fails the task with `tooManyRedirects`.
    public static let maxRedirects = 10
    /// Statuses that redirect when they carry a `Location` (the ones AsyncHTTPClient follows).
    public static let redirectStatuses: Set<Int> = [301, 302, 303, 304, 305, 307, 308]

    public enum Verdict: Sendable, Equatable {
        /// Not a redirect (no redirect status, or no Location): the response is the answer.
        case notARedirect
        /// Follow to this absolute URL.
        case follow(String)
        /// Stop: the task fails with this (permanent) error.
        case refuse(TaskError)
    }

    /// - Parameters:
    ///   - from: the URL whose response this is.
    ///   - visited: every URL requested so far in this attempt, the original one first (so `visited.count - 1`
    ///     redirects were followed).
    ///   - allowInsecure: the session's `allowInsecureRedirects` (https → http).
    public static func evaluate(from: String, status: Int, location: String?, visited: [String],
                                allowInsecure: Bool) -> Verdict {
        guard redirectStatuses.contains(status), let location else { return .notARedirect }
        let trimmed = location.trimmingSpaces
        guard let base = URL(string: from), let resolved = URL(string: trimmed, relativeTo: base)?.absoluteURL,
              let scheme = resolved.scheme?.lowercased()
        else {
            return .refuse(TaskError(code: TaskErrorCode.redirectRefused,
                                     message: "Refused a redirect (HTTP \(status)) from \(from): the Location '\(trimmed)' is not a valid URL"))
        }
        let target = resolved.absoluteString
        guard scheme == "http" || scheme == "https" else {
            return .refuse(TaskError(code: TaskErrorCode.redirectRefused,
                                     message: "Refused a redirect from \(from) to \(target): only http and https URLs are followed"))
        }
        let fromScheme = URL(string: from)?.scheme?.lowercased()
        if fromScheme == "https", scheme == "http", !allowInsecure {
            return .refuse(TaskError(code: TaskErrorCode.redirectRefused,
                                     message: "Refused a redirect from \(from) to \(target): a downgrade from https to http; "
                                         + "set allowInsecureRedirects in the session configuration to follow it"))
        }
        if visited.contains(target) {
            let chain = (visited + [target]).joined(separator: " → ")
            return .refuse(TaskError(code: TaskErrorCode.tooManyRedirects,
                                     message: "Redirect loop: \(chain)"))
        }
        if visited.count > maxRedirects {
            return .refuse(TaskError(code: TaskErrorCode.tooManyRedirects,
                                     message: "Too many redirects (more than \(maxRedirects)) starting from \(visited.first ?? from)"))
        }
        return .follow(target)
    }
}
