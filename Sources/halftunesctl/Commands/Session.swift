import ArgumentParser
import HalfTunesKit

/// `halftunesctl session open|show|invalidate`: one background session's configuration and end.
struct SessionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "session", abstract: "Open, configure, show or invalidate one background session.",
        discussion: "`sessions` lists them all.",
        subcommands: [SessionOpen.self, SessionShow.self, SessionInvalidate.self])
}
