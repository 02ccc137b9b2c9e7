import ArgumentParser
import Foundation
import HalfTunesKit

struct SessionOpen: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open", abstract: "Create a session, or change an existing session's configuration.",
        discussion: "Options not given keep their current value (a new session starts from the defaults). "
            + "Durations are seconds with an optional s, m, h or d suffix (90, 30m, 7d). Changes apply to tasks "
            + "created and attempts started from now on; a higher --max-concurrent starts held tasks at once.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The session identifier, e.g. com.example.backup.") var identifier: String
    @Option(help: ArgumentHelp("Where tasks without a destination write (absolute).", valueName: "dir"))
    var directory: String?
    @Option(name: .customLong("header"), help: ArgumentHelp(
        "An HTTP header sent with every request of the session; repeatable. Replaces the session's headers.",
        valueName: "Name: value"))
    var headerLines: [String] = []
    @Flag(name: .customLong("clear-headers"), help: "Remove the session's headers.") var clearHeaders = false
    @Option(name: .customLong("request-timeout"), help: ArgumentHelp(
        "Idle timeout, reset by every byte received (default 60).", valueName: "duration"))
    var requestTimeout: String?
    @Option(name: .customLong("resource-timeout"), help: ArgumentHelp(
        "Whole-task limit from its creation; then it fails (default 7d).", valueName: "duration"))
    var resourceTimeout: String?
    @Option(name: .customLong("max-concurrent"), help: ArgumentHelp(
        "Transfers of this session running at once (1-1000; 0: only the daemon-wide limits).", valueName: "n"))
    var maxConcurrent: Int?
    @Option(name: .customLong("retry-initial"), help: ArgumentHelp("Delay before the first retry (default 1).", valueName: "duration"))
    var retryInitial: String?
    @Option(name: .customLong("retry-max"), help: ArgumentHelp("Longest retry delay before jitter (default 300).", valueName: "duration"))
    var retryMax: String?
    @Option(name: .customLong("retry-jitter"), help: ArgumentHelp("Random spread of each delay, 0 to 1 (default 0.2).", valueName: "fraction"))
    var retryJitter: Double?
    @Option(name: .customLong("max-retry-after"), help: ArgumentHelp(
        "Longest Retry-After honoured (default 1h; 0 ignores Retry-After).", valueName: "duration"))
    var maxRetryAfter: String?
    @Option(name: .customLong("max-attempts"), help: ArgumentHelp(
        "Transient failures in a row without progress before a task fails (0: no limit, the default).", valueName: "n"))
    var maxAttempts: Int?
    @Option(name: .customLong("max-connections-per-task"), help: ArgumentHelp(
        "The most HTTP connections one download may use, 1-16 (default 8; 1: downloads are never split).",
        valueName: "n"))
    var maxConnectionsPerTask: Int?
    @Flag(name: .customLong("insecure-redirects"), inversion: .prefixedNo, help: "Follow redirects from https to http (default: refused).")
    var insecureRedirects: Bool?
    @Flag(name: .customLong("expensive-network"), inversion: .prefixedNo, help: ArgumentHelp(
        "Transfer over a metered network (default); --no-expensive-network waits for an unmetered one."))
    var expensiveNetwork: Bool?
    @Flag(name: .customLong("wait-for-connectivity"), inversion: .prefixedNo, help: ArgumentHelp(
        "While offline, tasks wait for the network (default); --no-wait-for-connectivity fails them at once."))
    var waitForConnectivity: Bool?
    @Flag(name: .customLong("discretionary"), inversion: .prefixedNo, help: ArgumentHelp(
        "Transfer only on an unmetered network and on power (default: --no-discretionary)."))
    var discretionary: Bool?
    @Option(name: .customLong("launch-unit"), help: ArgumentHelp(
        "A systemd user service started when the session's events wait and no client is subscribed "
            + "(name.service, or name@.service: the session identifier is its instance).", valueName: "unit"))
    var launchUnit: String?
    @Flag(name: .customLong("no-launch-unit"), help: "Start no unit for the session's events.") var noLaunchUnit = false
    @Flag(name: .customLong("preserve-mtime"), inversion: .prefixedNo, help: ArgumentHelp(
        "Give downloaded files the server's Last-Modified time (default); --no-preserve-mtime keeps the download's own."))
    var preserveMtime: Bool?
    @Option(name: .customLong("proxy"), help: ArgumentHelp(
        "The session's proxy: http://[user:password@]host:port, socks5://host:port, socks5h://host:port; direct for "
            + "none; default for the daemon's.", valueName: "url"))
    var proxy: String?
    @Option(name: .customLong("proxy-bypass"), help: ArgumentHelp(
        "Hosts that skip the proxy, like no_proxy: names (with their subdomains), IP addresses, CIDR ranges, * "
            + "(comma-separated); default for the daemon's.", valueName: "hosts"))
    var proxyBypass: String?
    @Flag(name: .customLong("proxy-tunnel"), inversion: .prefixedNo, help: ArgumentHelp(
        "Send plain http through the HTTP proxy's CONNECT tunnel too, like curl's --proxytunnel (for proxies that "
            + "only tunnel); default --no-proxy-tunnel: plain http is forwarded, https always tunnelled."))
    var proxyTunnel: Bool?
    @Option(name: .customLong("notifications"), help: ArgumentHelp(
        "Desktop notifications for the session's finished tasks (posted by your agent, or your own daemon): none, completed "
            + "(downloads that completed or failed) or all (every finished task); default none, completed for the "
            + "halftunesctl session.", valueName: "which"))
    var notifications: SessionNotifications?
    @Option(name: .customLong("finished-task-retention"), help: ArgumentHelp(
        "How long a finished task stays listed once its events are acknowledged, then it is deleted (default 24h; "
            + "0: at once).", valueName: "duration"))
    var finishedTaskRetention: String?
    @Option(name: .customLong("user"), help: ArgumentHelp(
        "The user name answering the --origin's servers when they ask for credentials (Basic, Digest), sent to no "
            + "other; the password comes from --password-file. Replaces the credentials for that origin (and "
            + "--realm); an empty name removes them.", valueName: "name"))
    var user: String?
    @Option(name: .customLong("origin"), help: ArgumentHelp(
        "The origin --user's credentials are for: https://host or http://host:port (credentials for https are "
            + "never sent over plain http).", valueName: "url"))
    var origin: String?
    @Option(name: .customLong("realm"), help: ArgumentHelp(
        "Answer only this realm's challenges of the --origin (default: any realm).", valueName: "realm"))
    var realm: String?
    @Flag(name: .customLong("clear-credentials"), help: "Remove every credential of the session.")
    var clearCredentials = false
    @Option(name: .customLong("password-file"), help: ArgumentHelp(
        "A file whose first line is the password for --user (a file, so the password is not in the process list).",
        valueName: "path"))
    var passwordFile: String?

    var changesConfiguration: Bool {
        directory != nil || !headerLines.isEmpty || clearHeaders || requestTimeout != nil || resourceTimeout != nil
            || maxConcurrent != nil || retryInitial != nil || retryMax != nil || retryJitter != nil
            || maxRetryAfter != nil || maxAttempts != nil || insecureRedirects != nil || maxConnectionsPerTask != nil
            || expensiveNetwork != nil || waitForConnectivity != nil || discretionary != nil || launchUnit != nil
            || noLaunchUnit || preserveMtime != nil || proxy != nil || proxyBypass != nil || proxyTunnel != nil
            || finishedTaskRetention != nil || notifications != nil
            || user != nil || clearCredentials
    }

    func validate() throws {
        if clearHeaders && !headerLines.isEmpty { throw ValidationError("give --header or --clear-headers, not both") }
        _ = try DownloadArguments.headers(headerLines)
        for (text, option) in [(requestTimeout, "--request-timeout"), (resourceTimeout, "--resource-timeout"),
                               (retryInitial, "--retry-initial"), (retryMax, "--retry-max"),
                               (maxRetryAfter, "--max-retry-after"), (finishedTaskRetention, "--finished-task-retention")] {
            if let text { _ = try SessionArguments.duration(text, option: option) }
        }
        if let maxConcurrent, maxConcurrent < 0 { throw ValidationError("--max-concurrent must be 0 or more") }
        if let maxAttempts, maxAttempts < 0 { throw ValidationError("--max-attempts must be 0 or more") }
        if launchUnit != nil && noLaunchUnit { throw ValidationError("give --launch-unit or --no-launch-unit, not both") }
        if let n = maxConnectionsPerTask, !SessionConfiguration.maxConnectionsRange.contains(n) {
            throw ValidationError("--max-connections-per-task must be from 1 to 16")
        }
        if passwordFile != nil && (user ?? "").isEmpty { throw ValidationError("--password-file needs --user") }
        if let user, !user.isEmpty, passwordFile == nil { throw ValidationError("--user needs --password-file") }
        if user != nil, origin == nil {
            throw ValidationError("--user needs --origin: credentials are sent only to the origin they name "
                + "(e.g. --origin https://files.example)")
        }
        if (origin != nil || realm != nil), user == nil { throw ValidationError("--origin and --realm go with --user") }
    }

    /// The first line of --password-file.
    func password() throws -> String {
        guard let passwordFile, let data = FileManager.default.contents(atPath: passwordFile) else {
            throw ValidationError("cannot read --password-file \(passwordFile ?? "")")
        }
        return String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .first.map(String.init) ?? ""
    }

    func run() throws {
        let client = try options.client()
        var result = try client.openSession(identifier)
        let created = !result.reattached
        if changesConfiguration {
            result = try client.openSession(identifier, configuration: try merged(into: result.session.configuration))
            result.reattached = !created
        }
        if options.json { return try Console.json(result) }
        let verb = created ? "created" : changesConfiguration ? "configured" : "exists"
        Console.out("Session \(result.session.identifier) \(verb).")
        SessionText.print(result.session)
    }

    /// The stored configuration with the given options applied.
    func merged(into current: SessionConfiguration) throws -> SessionConfiguration {
        var c = current
        if let directory { c.destinationDirectory = try DownloadArguments.destination(directory, url: nil) ?? directory }
        if clearHeaders { c.headers = [:] }
        if let headers = try DownloadArguments.headers(headerLines) { c.headers = headers }
        if let t = requestTimeout { c.requestTimeout = try SessionArguments.duration(t, option: "--request-timeout") }
        if let t = resourceTimeout { c.resourceTimeout = try SessionArguments.duration(t, option: "--resource-timeout") }
        if let n = maxConcurrent { c.maxConcurrent = n == 0 ? nil : n }
        var retry = c.retry ?? RetryPolicy()
        if let t = retryInitial { retry.initialDelay = try SessionArguments.duration(t, option: "--retry-initial") }
        if let t = retryMax { retry.maxDelay = try SessionArguments.duration(t, option: "--retry-max") }
        if let j = retryJitter { retry.jitter = j }
        if let t = maxRetryAfter { retry.maxRetryAfter = try SessionArguments.duration(t, option: "--max-retry-after") }
        if let n = maxAttempts { retry.maxAttempts = n == 0 ? nil : n }
        c.retry = retry
        if let insecureRedirects { c.allowInsecureRedirects = insecureRedirects }
        if let n = maxConnectionsPerTask { c.maxConnectionsPerTask = n }
        if let expensiveNetwork { c.allowsExpensiveNetworkAccess = expensiveNetwork }
        if let waitForConnectivity { c.waitsForConnectivity = waitForConnectivity }
        if let discretionary { c.isDiscretionary = discretionary }
        if let launchUnit { c.launchUnit = launchUnit }
        if let t = finishedTaskRetention {
            c.finishedTaskRetention = try SessionArguments.duration(t, option: "--finished-task-retention")
        }
        if noLaunchUnit { c.launchUnit = nil }
        if let preserveMtime { c.preserveModificationTime = preserveMtime }
        if let proxy { c.proxy = proxy == "default" ? nil : proxy }
        if let proxyBypass { c.proxyBypass = proxyBypass == "default" ? nil : proxyBypass }
        if let proxyTunnel { c.proxyTunnel = proxyTunnel }
        if let notifications { c.notifications = notifications }
        if clearCredentials { c.credentials = nil }
        if let user, let origin {
            // The daemon normalizes origins; compare as it writes them so a second --user replaces the first.
            let target = OriginCredentials.normalizedOrigin(origin) ?? origin
            var list = (c.credentials ?? []).filter { !($0.origin == target && $0.realm == realm) }
            if !user.isEmpty {
                list.append(OriginCredentials(origin: origin, realm: realm, user: user, password: try password()))
            }
            c.credentials = list.isEmpty ? nil : list
        }
        return c
    }
}

/// Values of `session open`'s options.
enum SessionArguments {
    /// Seconds from "90", "1.5", "30s", "10m", "2h", "7d".
    static func duration(_ text: String, option: String) throws -> Double {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var number = Substring(text)
        var factor = 1.0
        if let last = number.last, let unit = units[last] {
            factor = unit
            number = number.dropLast()
        }
        guard let value = Double(number), value.isFinite, value >= 0 else {
            throw ValidationError("\(option) '\(text)' must be a duration: seconds, or a number with s, m, h or d (e.g. 30m)")
        }
        return value * factor
    }
}
