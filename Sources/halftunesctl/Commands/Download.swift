import ArgumentParser
import HalfTunesKit

struct Download: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "download",
        abstract: "Download a URL in the background (or continue from resume data).",
        discussion: "Prints the task id and returns at once; with --wait, follows the task until it completes.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The URL to download (not needed with --resume-data).") var url: String?
    @Option(help: "The session to create the task in.") var session = "halftunesctl"
    @Option(help: "Where the file goes (relative to the current directory; a directory gets the URL's file name).")
    var destination: String?
    @Option(name: .customLong("header"), help: ArgumentHelp("An HTTP header; repeatable.", valueName: "Name: value"))
    var headerLines: [String] = []
    @Option(help: "A label for the task.") var description: String?
    @Option(help: "Resume data from `halftunesctl cancel --resume-data`.") var resumeData: String?
    @Option(help: ArgumentHelp("The file's expected SHA-256: it is published only if it matches.", valueName: "hex"))
    var sha256: String?
    @Option(help: ArgumentHelp("high, normal (default) or low: queued tasks start by priority.", valueName: "priority"))
    var priority: TaskPriority?
    @Option(name: .customLong("limit-rate"), help: ArgumentHelp(
        "This task's bandwidth limit: bytes per second, k/M/G suffixes in powers of 1024 (e.g. 512k, 2M).",
        valueName: "rate"))
    var limitRate: String?
    @Option(help: ArgumentHelp(
        "The most HTTP connections this download may use, 1-16 (default: the session's, 8); 1 never splits it.",
        valueName: "n"))
    var connections: Int?
    @Option(help: ArgumentHelp(
        "Do not begin before this time: an RFC 3339 date-time (2026-11-25T22:00:00Z) or + and a duration from now (+30m).",
        valueName: "when"))
    var at: String?
    @Flag(help: "Replace a file that exists at the --destination once the download is complete (default: never; a name from the URL or the server is always made free).")
    var overwrite = false
    @Flag(help: "Follow the task until it completes (exit 0 done, 1 failed, 4 canceled).") var wait = false

    func validate() throws {
        if url == nil && resumeData == nil { throw ValidationError("give a URL or --resume-data") }
        _ = try DownloadArguments.headers(headerLines)
        if let sha256 { _ = try ControlArguments.checksum(sha256: sha256) }
        if let limitRate { _ = try ControlArguments.rate(limitRate, option: "--limit-rate") }
        if let connections, !SessionConfiguration.maxConnectionsRange.contains(connections) {
            throw ValidationError("--connections must be from 1 to 16")
        }
        if let at { _ = try ControlArguments.beginDate(at) }
    }

    func run() throws {
        let client = try options.client()
        let opened = try client.openSession(session)
        // Subscribe before creating, so no event of the new task can be missed.
        let events = wait ? try client.events(session: session, after: opened.session.lastEventSeq) : nil
        let task = try client.createTask(TaskCreateParams(
            session: session, url: url, destination: try DownloadArguments.destination(destination, url: url),
            headers: try DownloadArguments.headers(headerLines), description: description,
            resumeData: resumeData, start: true, checksum: try sha256.map(ControlArguments.checksum(sha256:)),
            priority: priority, bandwidthLimit: try limitRate.map { try ControlArguments.rate($0, option: "--limit-rate") },
            overwrite: overwrite ? true : nil, maxConnections: connections,
            earliestBeginDate: try at.map { try ControlArguments.beginDate($0) }))
        if options.json { try Console.json(task) } else { Console.out(TaskText.headline(task)) }
        guard let events else { return }
        var follower = TaskFollower(task: task, json: options.json)
        let status = try follower.follow(events)
        if status != ExitStatus.ok { throw ExitCode(status) }
    }
}
