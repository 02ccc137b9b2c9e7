import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HalfTunesKit

struct Call: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call", abstract: "Call any protocol method with raw JSON params (for scripts and debugging).",
        discussion: "Prints the result as one JSON line. A JSON-RPC error is printed as one JSON line too, "
            + "{\"error\":{\"code\":…,\"message\":…}}, and sets the exit code as for other commands (3 unknown "
            + "task or session, 5 illegal state change, 2 invalid params, 1 otherwise). See docs/protocol.md.\n\n"
            + "Example: halftunesctl call task.update '{\"id\":7,\"priority\":\"high\"}'")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The method, e.g. daemon.status or events.ack.") var method: String
    @Argument(help: "The params: a JSON object (default: none).") var params: String?

    func validate() throws {
        if let params { _ = try parsedParams(params) }
    }

    func run() throws {
        let value = try params.map(parsedParams)
        do {
            try Console.json(try options.client().callRaw(method, params: value))
        } catch HalfTunesClientError.rpc(let error) {
            try Console.json(["error": error])
            throw ExitCode(ExitStatus.code(for: .rpc(error)))
        }
    }

    private func parsedParams(_ text: String) throws -> JSONValue {
        guard let value = try? JSONParser.parse(Array(text.utf8)),
              case .object = value else {
            throw ValidationError("params must be one JSON object, e.g. '{\"id\":7}'")
        }
        return value
    }
}
