import ArgumentParser
import HalfTunesKit

struct Subscribe: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Print a session's events: the journaled ones after --after, then live ones.",
        discussion: "Runs until interrupted or until the daemon closes the connection.")

    @OptionGroup var options: GlobalOptions
    @Option(help: "The session.") var session: String
    @Option(help: "Replay journaled events with a sequence number above this (default 0: all not yet acknowledged).")
    var after: Int64 = 0
    @Flag(help: "Acknowledge each journaled event after printing it (the daemon may then prune it).")
    var ack = false

    func validate() throws {
        if after < 0 { throw ValidationError("--after must be 0 or more") }
    }

    func run() throws {
        let client = try options.client()
        let stream = try client.events(session: session, after: after)
        if !options.json && stream.subscription.prunedThrough > after {
            Console.note("note: events #\(after + 1)–#\(stream.subscription.prunedThrough) were already acknowledged and pruned")
        }
        var invalidated = false
        while let event = try stream.nextEvent() {
            if options.json { try Console.json(event) } else { Console.out(TaskText.eventLine(event)) }
            if ack, let seq = event.seq { _ = try client.ack(session: session, through: seq) }
            if case .didBecomeInvalid = event.payload { invalidated = true }
        }
        if invalidated { return }
        Console.error("halftunesd closed the connection")
        throw ExitCode(ExitStatus.failure)
    }
}
