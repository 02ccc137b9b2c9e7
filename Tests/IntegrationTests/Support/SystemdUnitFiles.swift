import Foundation

/// The unit files in systemd/ as tests use them.
enum SystemdUnitFiles {
    /// The daemon's path in the units as committed; `make install` replaces it with $(BINDIR)/halftunesd.
    static let committedExecPath = "/usr/local/bin/halftunesd"

    static let systemUnits = ["halftunesd.service", "halftunesd.socket"]
    static let userUnits = ["user/halftunesd.service", "user/halftunesd.socket"]
    /// The users' agent (`halftunesctl agent`), enabled for every user by `make install` and the package.
    static let agentUnit = "user/halftunesd-agent.service"
    /// halftunesctl's path in the agent's unit as committed.
    static let committedCtlPath = "/usr/local/bin/halftunesctl"

    /// A unit from systemd/ with the binaries' paths replaced by `daemon` and `ctl` (the same rewrite `make install`
    /// does).
    static func text(_ relative: String, daemon: String = Binaries.daemon, ctl: String = Binaries.ctl) throws -> String {
        let text = try Repository.read("systemd/" + relative)
        if relative.hasSuffix(".service") && !text.contains("ExecStart=" + committedExecPath)
            && !text.contains("ExecStart=" + committedCtlPath + " ") {
            throw TestFailure("systemd/\(relative) has no ExecStart=\(committedExecPath) for make install to rewrite")
        }
        return text.replacingOccurrences(of: committedExecPath, with: daemon).replacingOccurrences(of: committedCtlPath, with: ctl)
    }

    /// Writes the given units (rewritten for `daemon`) into `directory`, under their base names.
    static func copy(_ units: [String], to directory: String, daemon: String = Binaries.daemon) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for unit in units {
            let name = (unit as NSString).lastPathComponent
            try text(unit, daemon: daemon).write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
        }
    }

    /// The assignments of a unit file as (section, key, value), comments and blank lines skipped.
    static func assignments(_ text: String) -> [(section: String, key: String, value: String)] {
        var section = ""
        var result: [(String, String, String)] = []
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") { section = String(line.dropFirst().dropLast()); continue }
            guard let eq = line.firstIndex(of: "=") else { continue }
            result.append((section, String(line[..<eq]).trimmingCharacters(in: .whitespaces),
                           String(line[line.index(after: eq)...]).trimmingCharacters(in: .whitespaces)))
        }
        return result
    }

    /// Every value assigned to `key` in `section`, in order.
    static func values(_ key: String, in section: String, of text: String) -> [String] {
        assignments(text).filter { $0.section == section && $0.key == key }.map(\.value)
    }
}
