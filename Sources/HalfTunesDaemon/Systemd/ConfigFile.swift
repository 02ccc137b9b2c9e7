import Foundation

/// A configuration file problem, with the line it is on when there is one.
public struct ConfigFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var line: Int?
    public var message: String

    public var description: String {
        if let line { return "\(path):\(line): \(message)" }
        return "\(path): \(message)"
    }
}

/// The configuration file: `key = value` lines, `#` comment lines, blank lines. Keys are the flag
/// names without `--` (see `SettingKey`); every key may appear once.
public enum ConfigFile {
    /// As root `/etc/halftunesd/halftunesd.conf`; otherwise `$XDG_CONFIG_HOME/halftunesd/halftunesd.conf`
    /// (`~/.config/...` when XDG_CONFIG_HOME is unset).
    public static func defaultPath() -> String {
        if geteuid() == 0 { return "/etc/halftunesd/halftunesd.conf" }
        let env = ProcessInfo.processInfo.environment
        if let config = env["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return config + "/halftunesd/halftunesd.conf"
        }
        return DefaultPaths.home() + "/.config/halftunesd/halftunesd.conf"
    }

    /// Parses the file's text; `path` is only used in error messages.
    public static func parse(_ text: String, path: String) throws(ConfigFileError) -> DaemonSettings {
        var settings = DaemonSettings()
        var seen: [SettingKey: Int] = [:]
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = rawLine.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            func fail(_ message: String) -> ConfigFileError { ConfigFileError(path: path, line: number, message: message) }
            guard let equals = line.firstIndex(of: "=") else {
                throw fail("expected 'key = value', found '\(line)'")
            }
            let name = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty else { throw fail("missing key before '='") }
            guard let key = SettingKey(rawValue: name) else {
                throw fail("unknown key '\(name)'" + suggestion(for: name))
            }
            if let first = seen[key] { throw fail("'\(name)' is already set on line \(first)") }
            seen[key] = number
            guard !value.isEmpty else { throw fail("'\(name)' has no value") }
            do {
                try key.assign(value, to: &settings)
            } catch {
                throw fail("\(name) \(error.message)")
            }
        }
        return settings
    }

    /// Reads and parses the file. A missing file gives empty settings unless `required`.
    public static func load(path: String, required: Bool) throws(ConfigFileError) -> DaemonSettings {
        switch read(path) {
        case .success(let text):
            return try parse(text, path: path)
        case .failure(let error) where error.code == ENOENT && !required:
            return DaemonSettings()
        case .failure(let error):
            throw ConfigFileError(path: path, line: nil,
                                  message: "cannot read the configuration file: \(String(cString: strerror(error.code)))")
        }
    }

    private static func suggestion(for name: String) -> String {
        let normalized = name.lowercased().replacingOccurrences(of: "_", with: "-")
            .replacingOccurrences(of: "--", with: "")
        if let key = SettingKey(rawValue: normalized) { return "; did you mean '\(key.rawValue)'?" }
        return "; known keys: " + SettingKey.allCases.map(\.rawValue).joined(separator: ", ")
    }

    struct ReadFailure: Error { var code: Int32 }

    /// The file's text (at most 1 MiB), or the errno that prevented reading it.
    private static func read(_ path: String) -> Result<String, ReadFailure> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(ReadFailure(code: errno)) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(ReadFailure(code: errno)) }
        if (st.st_mode & S_IFMT) == S_IFDIR { return .failure(ReadFailure(code: EISDIR)) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(ReadFailure(code: errno))
            }
            if n == 0 { break }
            bytes += chunk[..<n]
            if bytes.count > 1 << 20 { return .failure(ReadFailure(code: EFBIG)) }
        }
        return .success(String(decoding: bytes, as: UTF8.self))
    }
}
