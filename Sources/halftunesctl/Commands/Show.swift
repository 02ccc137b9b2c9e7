import ArgumentParser
import HalfTunesKit

struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show every field of a task and why it is not running.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The task id.") var id: Int64

    func run() throws {
        let task = try options.client().task(id)
        if options.json { return try Console.json(task) }
        var fields: [(String, String)] = [
            ("Task", "\(task.id) (\(task.kind)) in session \"\(task.session)\""),
            ("State", TaskText.explanation(task)),
            ("URL", task.url),
        ]
        if let current = task.currentURL, current != task.url { fields.append(("Current URL", current)) }
        if task.kind == TaskKind.download.rawValue {
            fields.append(("Destination", task.destination))
            if let location = task.location { fields.append(("Location", location)) }
            let expected = task.bytesExpected.map(Formatting.bytes) ?? "unknown size"
            fields.append(("Received", "\(Formatting.bytes(task.bytesReceived)) of \(expected)"
                + (Formatting.percent(task.bytesReceived, of: task.bytesExpected).map { " (\($0))" } ?? "")))
            fields.append(("Durable", "\(Formatting.bytes(task.bytesDurable)) (a restart resumes from here)"))
        } else {
            fields += TaskText.exchangeFields(task)
        }
        if let reason = task.waitingReason { fields.append(("Waiting for", TaskText.errorText(reason))) }
        if let next = task.nextAttemptAt { fields.append(("Next attempt", next)) }
        if let position = task.queuePosition { fields.append(("Queue position", String(position))) }
        if let hold = task.hold { fields.append(("Held by", "\(hold.message) (\(hold.reason))")) }
        fields.append(("Priority", task.priority.rawValue))
        if let limit = task.bandwidthLimit { fields.append(("Rate limit", ByteRate.format(limit))) }
        if let n = task.connections { fields.append(("Connections", String(n))) }
        if let n = task.maxConnections { fields.append(("Max connections", String(n))) }
        if let begin = task.earliestBeginDate { fields.append(("Begins", "not before \(begin)")) }
        if let checksum = task.checksum { fields.append(("Checksum", checksum)) }
        if let error = task.error { fields.append(("Error", TaskText.errorText(error))) }
        fields.append(("Attempts", String(task.attempts)))
        if let etag = task.etag { fields.append(("ETag", etag)) }
        if let modified = task.lastModified { fields.append(("Last-Modified", modified)) }
        if let description = task.description { fields.append(("Description", description)) }
        fields.append(("Created", task.createdAt))
        fields.append(("Updated", task.updatedAt))
        let width = fields.map(\.0.count).max() ?? 0
        for (name, value) in fields {
            Console.out(name + ":" + String(repeating: " ", count: width - name.count + 1) + value)
        }
    }
}
