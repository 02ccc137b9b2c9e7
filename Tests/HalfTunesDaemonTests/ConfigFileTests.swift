import Foundation
@testable import HalfTunesDaemon
import Logging
import Testing

@Suite("Configuration file")
struct ConfigFileTests {
    func parse(_ text: String) throws(ConfigFileError) -> DaemonSettings { try ConfigFile.parse(text, path: "/etc/h.conf") }

    func error(_ text: String) -> ConfigFileError? {
        do {
            _ = try parse(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func parsesEveryKeyWithCommentsAndBlankLines() throws {
        let s = try parse("""
            # halftunesd
              # indented comment

            socket = /run/x/control.sock
            state-dir=/var/lib/x
            downloads-dir   =   /srv/down loads
            max-concurrent = 12
            log-level = DEBUG
            exit-when-idle = 2.5
            checkpoint-interval = 0.5
            max-pending-output = 65536\r
            """)
        #expect(s.socket == "/run/x/control.sock")
        #expect(s.stateDirectory == "/var/lib/x")
        #expect(s.downloadsDirectory == "/srv/down loads")
        #expect(s.maxConcurrent == 12)
        #expect(s.logLevel == .debug)
        #expect(s.exitWhenIdle == 2.5)
        #expect(s.checkpointInterval == 0.5)
        #expect(s.maxPendingOutput == 65536)
    }

    @Test func emptyFileSetsNothing() throws {
        #expect(try parse("") == DaemonSettings())
        #expect(try parse("\n# only a comment\n\n") == DaemonSettings())
    }

    @Test func unknownKeyNamesTheLineAndSuggests() throws {
        let e = try #require(error("log-level = info\nmax_concurrent = 3\n"))
        #expect(e.line == 2)
        #expect(e.description.hasPrefix("/etc/h.conf:2: unknown key 'max_concurrent'"))
        #expect(e.message.contains("did you mean 'max-concurrent'?"))
        let other = try #require(error("\n\nbandwidth = 3"))
        #expect(other.line == 3)
        #expect(other.message.contains("known keys: socket, socket-group, state-dir"))
    }

    @Test(arguments: [
        ("max-concurrent = 0", "must be an integer from 1 to 1000 (got '0')"),
        ("max-concurrent = many", "must be an integer from 1 to 1000 (got 'many')"),
        ("max-concurrent = 4 # four", "comments must be on a line of their own"),
        ("log-level = loud", "must be one of trace, debug"),
        ("exit-when-idle = -1", "must be a number of seconds from 0"),
        ("checkpoint-interval = 0", "must be a number of seconds greater than 0"),
        ("socket = relative/path.sock", "must be an absolute path (got 'relative/path.sock')"),
        ("max-pending-output = 10", "must be an integer from 4096"),
        ("max-input-per-uid = 10", "must be an integer from 4096"),
        ("downloads-dir = /.", "must be a directory below /, not the root directory itself (got '/.')"),
        ("state-dir =", "'state-dir' has no value"),
        ("just words", "expected 'key = value', found 'just words'"),
        ("= 3", "missing key before '='"),
    ])
    func badValuesAreClearErrorsWithTheLine(_ line: String, _ expected: String) throws {
        let e = try #require(error("# first\n\(line)\n"))
        #expect(e.line == 2)
        #expect(e.message.contains(expected), "\(e.message)")
    }

    @Test func aKeyMayAppearOnce() throws {
        let e = try #require(error("max-concurrent = 2\n\nmax-concurrent = 3\n"))
        #expect(e.description == "/etc/h.conf:3: 'max-concurrent' is already set on line 1")
    }

    @Test func flagsOverrideTheFile() throws {
        let file = try parse("max-concurrent = 2\nlog-level = debug\nsocket = /a.sock\n")
        var flags = DaemonSettings()
        flags.maxConcurrent = 9
        flags.stateDirectory = "/st"
        let merged = file.overridden(by: flags)
        #expect(merged.maxConcurrent == 9)
        #expect(merged.logLevel == .debug)
        #expect(merged.socket == "/a.sock")
        #expect(merged.stateDirectory == "/st")
    }

    @Test func loaderResolvesDefaultsFileAndFlags() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/halftunesd.conf"
        try "max-concurrent = 2\nexit-when-idle = 0\nstate-dir = /s\nlog-level = warning\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        var flags = DaemonSettings()
        flags.logLevel = .trace
        let resolved = try ConfigurationLoader(flags: flags, configPath: path).load()
        #expect(resolved.maxConcurrent == 2)
        #expect(resolved.exitWhenIdle == nil) // 0 means never
        #expect(resolved.stateDirectory == "/s")
        #expect(resolved.logLevel == .trace)
        #expect(resolved.checkpointInterval == ResolvedSettings.defaultCheckpointInterval)
        #expect(resolved.daemonConfiguration.maxConcurrent == 2)
    }

    @Test func aMissingDefaultFileIsFineButAMissingExplicitOneIsNot() throws {
        let dir = try TemporaryDirectory()
        let missing = dir.path + "/nope.conf"
        #expect(try ConfigFile.load(path: missing, required: false) == DaemonSettings())
        #expect(throws: ConfigFileError.self) { try ConfigFile.load(path: missing, required: true) }
        do {
            _ = try ConfigurationLoader(flags: DaemonSettings(), configPath: missing).load()
            Issue.record("a missing --config file must be an error")
        } catch {
            #expect(error.description == "\(missing): cannot read the configuration file: No such file or directory")
        }
        do {
            _ = try ConfigFile.load(path: dir.path, required: false)
            Issue.record("a directory is not a configuration file")
        } catch {
            #expect(error.message.contains("Is a directory"))
        }
    }

    @Test func reloadSeesWhichKeysChanged() throws {
        let a = ResolvedSettings(try parse("max-concurrent = 2\nstate-dir = /s"))
        let b = ResolvedSettings(try parse("max-concurrent = 3\nstate-dir = /t\nlog-level = info"))
        #expect(b.changedKeys(from: a) == [.stateDir, .maxConcurrent])
        #expect(SettingKey.maxConcurrent.appliesOnReload && !SettingKey.stateDir.appliesOnReload)
    }

    /// The example file in docs/configuration.md is valid.
    @Test func documentedExampleParses() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let blocks = doc.components(separatedBy: "```ini\n").dropFirst()
        let example = try #require(blocks.first?.components(separatedBy: "```").first)
        let s = try parse(example)
        #expect(s.maxConcurrent != nil)
        // Every key is documented.
        for key in SettingKey.allCases { #expect(doc.contains("`\(key.rawValue)`"), "\(key.rawValue) is not documented") }
    }

    /// The installed example is valid as shipped and with every commented-out setting switched on.
    @Test func installedExampleParses() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let example = try String(contentsOf: root.appendingPathComponent("systemd/halftunesd.conf.example"), encoding: .utf8)
        _ = try parse(example)
        let enabled = example.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            let body = line.dropFirst()
            guard line.hasPrefix("#"), let name = body.split(separator: " ").first,
                  SettingKey(rawValue: String(name)) != nil, body.contains(" = ") else { return line }
            return body
        }.joined(separator: "\n")
        let s = try parse(enabled)
        #expect(s.maxConcurrent != nil && s.logLevel != nil && s.stateDirectory != nil)
    }
}

@Suite("systemd helpers")
struct SystemdHelperTests {
    @Test func statusRates() {
        #expect(DaemonCore.formatRate(0) == "0 B/s")
        #expect(DaemonCore.formatRate(950) == "950 B/s")
        #expect(DaemonCore.formatRate(12_400_000) == "12.4 MB/s")
        #expect(DaemonCore.formatRate(999_990) == "1.0 MB/s")
        #expect(DaemonCore.formatRate(1_500) == "1.5 kB/s")
    }

    @Test func journalFieldNames() {
        #expect(JournalLogHandler.fieldName(forMetadataKey: "task") == "HALFTUNES_TASK")
        #expect(JournalLogHandler.fieldName(forMetadataKey: "maxConcurrent") == "HALFTUNES_MAXCONCURRENT")
        #expect(JournalLogHandler.fieldName(forMetadataKey: "a-b.c") == "HALFTUNES_A_B_C")
        #expect(JournalLogHandler.fieldName(forMetadataKey: String(repeating: "x", count: 100)).count == 64)
    }

    @Test func logLines() {
        #expect(LogLine.text("done", ["task": "7", "url": "http://h/a b"]) == "done task=7 url=\"http://h/a b\"")
        #expect(LogLine.prefixed("one\ntwo", priority: 3) == "<3>one\n<3>two")
        #expect(LogLine.priority(.warning) == 4 && LogLine.priority(.trace) == 7 && LogLine.priority(.critical) == 2)
    }

    @Test func journalStreamMustMatchStderr() throws {
        var st = stat()
        #expect(fstat(STDERR_FILENO, &st) == 0)
        #expect(DaemonLogging.stderrIsJournalStream("\(st.st_dev):\(st.st_ino)"))
        #expect(!DaemonLogging.stderrIsJournalStream("\(st.st_dev):\(st.st_ino + 1)"))
        #expect(!DaemonLogging.stderrIsJournalStream(nil))
        #expect(!DaemonLogging.stderrIsJournalStream("garbage"))
    }
}

/// A temporary directory removed when the value goes away.
final class TemporaryDirectory {
    let path: String
    init() throws {
        var template = Array("/tmp/htd-unit-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        path = String(cString: p)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}
