import ArgumentParser
import HalfTunesKit

/// A session's details for people.
enum SessionText {
    static func print(_ s: SessionInfo) {
        let c = s.configuration
        let retry = c.retry ?? RetryPolicy()
        let headers = (c.headers ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        let counts = TaskState.allCases.compactMap { state in s.taskCounts[state.rawValue].map { "\($0) \(state.rawValue)" } }
        func d(_ seconds: Double?) -> String { seconds.map(Formatting.duration) ?? "default" }
        Console.out("  directory:          \(c.destinationDirectory ?? "(daemon default)")")
        Console.out("  headers:            \(headers.isEmpty ? "none" : headers.joined(separator: "; "))")
        Console.out("  request timeout:    \(d(c.requestTimeout)) idle")
        Console.out("  resource timeout:   \(d(c.resourceTimeout)) per task")
        Console.out("  retry:              after \(d(retry.initialDelay)), doubling up to \(d(retry.maxDelay)), "
            + "±\(Int(((retry.jitter ?? RetryPolicy.defaultJitter) * 100).rounded()))%; Retry-After honoured up to "
            + "\(d(retry.maxRetryAfter)); \(retry.maxAttempts.map { "gives up after \($0) failures in a row" } ?? "no attempt limit")")
        Console.out("  max concurrent:     \(c.maxConcurrent.map(String.init) ?? "daemon-wide limits only")")
        Console.out("  https→http:         \(c.allowInsecureRedirects == true ? "followed" : "refused")")
        Console.out("  connections:        at most \(c.maxConnectionsPerTask ?? SessionConfiguration.defaultMaxConnectionsPerTask) per download")
        Console.out("  network:            \(networkRules(c))")
        Console.out("  mtime:              \(c.preserveModificationTime == false ? "the download's own" : "the server's Last-Modified")")
        Console.out("  proxy:              \(proxyText(c))")
        Console.out("  credentials:        \(credentialsText(c.credentials ?? []))")
        Console.out("  launch unit:        \(launchText(s))")
        let name = s.identifier.split(separator: "/").last.map(String.init) ?? s.identifier
        Console.out("  notifications:      \(notificationsText(c.notifications ?? .defaultValue(forSession: name)))")
        Console.out("  tasks:              \(counts.isEmpty ? "none" : counts.joined(separator: ", "))")
        let keep = c.finishedTaskRetention ?? SessionConfiguration.defaultFinishedTaskRetention
        Console.out("  finished tasks:     \(keep == 0 ? "deleted" : "kept \(Formatting.duration(keep))") once acknowledged")
        Console.out("  events:             last #\(s.lastEventSeq), acknowledged through #\(s.ackedThrough)")
    }

    /// One line per origin; an entry journaled without one is said to be sent nowhere.
    static func credentialsText(_ list: [OriginCredentials]) -> String {
        guard !list.isEmpty else { return "none" }
        return list.map { c in
            guard let origin = c.origin else {
                return "user \(c.user), for no origin: sent nowhere (give it one: session open --user \(c.user) --origin URL)"
            }
            return "user \(c.user) at \(origin)\(c.realm.map { " realm \"\($0)\"" } ?? ""), password hidden"
        }.joined(separator: "\n                      ")
    }

    static func notificationsText(_ n: SessionNotifications) -> String {
        switch n {
        case .none: return "none"
        case .completed: return "when a download completes or fails"
        case .all: return "when any task finishes"
        }
    }

    /// The launch unit and how its last start went: "app@x.service; last started 2026-…: acknowledged".
    static func launchText(_ s: SessionInfo) -> String {
        guard let launch = s.launch else { return "none" }
        var text = launch.unit
        if let at = launch.lastLaunchAt {
            text += "; last started \(at)"
            if let result = launch.lastResult { text += ": \(result)" }
            if let message = launch.lastMessage { text += " (\(message))" }
        } else {
            text += "; not started yet"
        }
        if let next = launch.nextAttemptAt {
            text += "; started again at \(next) (\(launch.failures) failure\(launch.failures == 1 ? "" : "s") in a row)"
        }
        return text
    }

    /// The session's proxy: "the daemon's", "direct", or its URL (password `***`), with what bypasses it.
    static func proxyText(_ c: SessionConfiguration) -> String {
        var text = c.proxy ?? "the daemon's"
        if let bypass = c.proxyBypass { text += bypass.isEmpty ? "; no host bypasses it" : "; bypassed by \(bypass)" }
        if c.proxyTunnel == true { text += "; plain http tunnelled too" }
        return text
    }

    /// The session's network and power rules in a phrase.
    static func networkRules(_ c: SessionConfiguration) -> String {
        var rules = [c.allowsExpensiveNetworkAccess == false ? "waits for an unmetered network" : "metered networks allowed",
                     c.waitsForConnectivity == false ? "fails at once when offline" : "waits while offline"]
        if c.isDiscretionary == true { rules.append("discretionary: only unmetered and on power") }
        return rules.joined(separator: "; ")
    }
}
