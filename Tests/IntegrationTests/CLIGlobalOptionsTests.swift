// halftunesctl's global options (--socket, --json) before, between and after every subcommand, nested ones included.
import Foundation
import Testing

@Suite("The CLI's global options")
struct CLIGlobalOptionsTests {
    /// Each subcommand (as `halftunesctl --help` and `session --help` list them) with arguments it accepts.
    static let commands: [[String]: [String]] = [
        ["download"]: ["http://127.0.0.1:1/f.bin"], ["pause"]: ["1"], ["resume"]: ["1"], ["cancel"]: ["1"],
        ["show"]: ["1"], ["list"]: [], ["sessions"]: [], ["subscribe"]: ["--session", "s"], ["watch"]: [],
        ["status"]: [], ["move"]: ["1", "--to-front"], ["set"]: ["1", "--priority", "high"], ["limits"]: [],
        ["upload"]: ["/etc/hostname", "http://127.0.0.1:1/up"], ["fetch"]: ["http://127.0.0.1:1/x"],
        ["call"]: ["daemon.status"], ["session", "open"]: ["s"], ["session", "show"]: ["s"],
        ["session", "invalidate"]: ["s"], ["agent"]: [],
    ]

    /// The subcommand names a `--help` lists (its SUBCOMMANDS section).
    static func listed(_ args: [String]) throws -> [String] {
        let help = try ctl(args + ["--help"], socket: nil).stdout
        guard let section = help.range(of: "SUBCOMMANDS:") else { return [] }
        return help[section.upperBound...].split(separator: "\n").compactMap { line in
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let word = line.split(separator: " ").first,
                  !line.contains("See '") else { return nil }
            return String(word)
        }
    }

    @Test func everySubcommandIsCovered() throws {
        var all = try Self.listed([]).filter { $0 != "session" }.map { [$0] }
        all += try Self.listed(["session"]).map { ["session", $0] }
        #expect(all.count >= 19 && Set(all) == Set(Self.commands.keys), "\(all)")
    }

    /// `--socket` before, between (nested subcommands) and after the subcommand, with `--json` too: every command
    /// parses and tries the socket given (exit 69, the message names it), never a usage error.
    @Test func beforeBetweenAndAfter() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let socket = dir.path + "/none.sock"
        for (path, rest) in Self.commands {
            var placements = [
                ["--socket", socket] + path + rest,
                path + ["--json", "--socket", socket] + rest,
                path + rest + ["--socket", socket, "--json"],
                ["--json"] + path + ["--socket=\(socket)"] + rest,
            ]
            if path.count == 2 { placements.append([path[0], "--socket", socket, "--json", path[1]] + rest) }
            for args in placements {
                // The environment names another socket: only the option's reaches the message.
                if path == ["agent"] {
                    // The agent keeps trying (the daemon may come back): its first line names the socket; killed after 1 s
                    // (timeout then ends itself by the same signal).
                    let r = try runBinary("/usr/bin/timeout", ["-s", "KILL", "1", Binaries.ctl] + args,
                                          environment: ["HALFTUNES_SOCKET": dir.path + "/environment.sock"])
                    #expect(r.status == SIGKILL && r.stderr.contains("cannot reach halftunesd at \(socket)"), "\(args): \(r.status) \(r.stderr)")
                    continue
                }
                let r = try ctl(args, socket: dir.path + "/environment.sock")
                #expect(r.status == 69 && r.stderr.contains(socket), "\(args): \(r.status) \(r.stderr)")
            }
        }
    }
}
