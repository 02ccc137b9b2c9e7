#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import ArgumentParser
import HalfTunesKit

struct Fetch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Fetch a URL into memory through the daemon (a data task) and print its body.",
        discussion: "Waits for the task to end. The body (at most 16 MiB) goes to stdout, or to --output FILE "
            + "(replaced if it exists). Transient failures are retried like downloads. Exit status: 0 on a 2xx "
            + "response, 1 when the task failed (an HTTP error status, a body over --max-bytes, ...), 4 canceled.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The URL to fetch.") var url: String
    @Option(help: "The session to create the task in.") var session = "halftunesctl"
    @Option(name: .customLong("header"), help: ArgumentHelp("An HTTP header; repeatable.", valueName: "Name: value"))
    var headerLines: [String] = []
    @Option(help: ArgumentHelp("GET (default) or HEAD.", valueName: "method")) var method: String?
    @Option(name: [.short, .customLong("output")],
            help: ArgumentHelp("Write the body to this file instead of stdout ('-': stdout).", valueName: "file"))
    var output: String?
    @Option(name: .customLong("max-bytes"), help: ArgumentHelp(
        "The longest body accepted (default and largest 16M; k/M suffixes); a longer one fails.", valueName: "bytes"))
    var maxBytes: String?
    @Option(help: "A label for the task.") var description: String?

    func validate() throws {
        if let method, !["GET", "HEAD"].contains(method.uppercased()) {
            throw ValidationError("--method must be GET or HEAD (got '\(method)')")
        }
        _ = try DownloadArguments.headers(headerLines)
        if let maxBytes { _ = try ExchangeArguments.byteCount(maxBytes, option: "--max-bytes") }
    }

    func run() throws {
        let client = try options.client()
        let opened = try client.openSession(session)
        let events = try client.events(session: session, after: opened.session.lastEventSeq)
        defer { events.close() }
        let task = try client.createDataTask(
            session: session, url: url, method: method?.uppercased(), headers: try DownloadArguments.headers(headerLines),
            maxResponseBytes: try maxBytes.map { try ExchangeArguments.byteCount($0, option: "--max-bytes") },
            description: description, start: true)
        var completion: (error: TaskError?, response: TaskResponse?)?
        while completion == nil, let event = try events.nextEvent() {
            guard event.task == task.id, case let .didComplete(error, response) = event.payload else { continue }
            completion = (error, response)
        }
        guard let (error, response) = completion else {
            Console.error("lost the connection to halftunesd while waiting for task \(task.id); it goes on in the "
                + "daemon: `halftunesctl show \(task.id)`")
            throw ExitCode(ExitStatus.failure)
        }
        if options.json { try Console.json(try client.task(task.id)) }
        if let error {
            if let response { Console.error("HTTP \(TaskText.statusLine(response))") }
            if error.code == TaskErrorCode.canceled {
                Console.error("task \(task.id) was canceled")
                throw ExitCode(ExitStatus.canceled)
            }
            Console.error("task \(task.id) failed: \(TaskText.errorText(error))")
            throw ExitCode(ExitStatus.failure)
        }
        guard !options.json else { return }
        let body = response?.bodyBytesDecoded ?? []
        if let output, output != "-" {
            try write(body, to: try ExchangeArguments.absolutePath(output))
        } else {
            Console.write(body, to: STDOUT_FILENO)
        }
    }

    private func write(_ body: [UInt8], to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            Console.error("cannot write \(path): \(String(cString: strerror(errno)))")
            throw ExitCode(ExitStatus.failure)
        }
        var offset = 0
        var failure: Int32 = 0
        body.withUnsafeBytes { raw in
            while offset < raw.count {
                let n = writeBytes(fd, raw.baseAddress! + offset, raw.count - offset)
                if n > 0 { offset += n } else if n < 0, errno == EINTR { continue } else { failure = errno; return }
            }
        }
        if close(fd) != 0, failure == 0 { failure = errno }
        guard failure == 0 else {
            Console.error("cannot write \(path): \(String(cString: strerror(failure)))")
            throw ExitCode(ExitStatus.failure)
        }
    }
}

private func writeBytes(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int { write(fd, pointer, count) }
