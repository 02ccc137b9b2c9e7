#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import ArgumentParser
import HalfTunesKit

@main
struct HalfTunesCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "halftunesctl",
        abstract: "Control halftunesd, the background download daemon.",
        discussion: "Every subcommand takes --socket PATH (default: $HALFTUNES_SOCKET, else the daemon's default "
            + "socket) and --json (print JSON objects, one per line), before or after its name.\n\n"
            + "Exit codes: 0 ok, 1 failed, 2 usage, 3 unknown task or session, 4 canceled, "
            + "5 illegal state change, 69 daemon not running. See docs/cli.md.",
        version: HalfTunes.version,
        subcommands: [Download.self, Pause.self, Resume.self, Cancel.self, Show.self, List.self, Sessions.self,
                      Subscribe.self, Watch.self, Status.self, Move.self, SetTask.self, Limits.self, Upload.self,
                      Fetch.self, SessionCommand.self, Call.self, Agent.self]
    )

    static func main() {
        do {
            var command = try parseAsRoot(GlobalArguments.movedAfterSubcommand(Array(CommandLine.arguments.dropFirst())))
            try command.run()
            terminate(ExitStatus.ok)
        } catch let error as HalfTunesClientError {
            Console.error(error.description)
            terminate(ExitStatus.code(for: error))
        } catch {
            let code = exitCode(for: error)
            let message = fullMessage(for: error)
            if code == .success {
                if !message.isEmpty { Console.out(message) }
                terminate(ExitStatus.ok)
            }
            if !message.isEmpty { Console.note(message) }
            terminate(code == .validationFailure ? ExitStatus.usage : code.rawValue)
        }
    }
}

/// `--socket PATH` and `--json` may come before the subcommand, or between a subcommand and its own (`session
/// --socket S open`); each leaf subcommand declares them, so they are moved after the whole subcommand path
/// before parsing.
enum GlobalArguments {
    static func movedAfterSubcommand(_ arguments: [String], root: ParsableCommand.Type = HalfTunesCtl.self) -> [String] {
        var globals: [String] = []
        var path: [String] = []
        var command = root
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--json" {
                globals.append(argument)
            } else if argument == "--socket", index + 1 < arguments.count {
                globals += [argument, arguments[index + 1]]
                index += 1
            } else if argument.hasPrefix("--socket=") {
                globals.append(argument)
            } else if let sub = command.configuration.subcommands.first(where: { $0._commandName == argument }) {
                path.append(argument)
                command = sub
            } else {
                break
            }
            index += 1
        }
        guard !globals.isEmpty, !path.isEmpty else { return arguments }
        return path + globals + arguments[index...]
    }
}

private func terminate(_ status: Int32) -> Never { exit(status) }
