// Test support: every input the state was fed, replayed into the state as it began, as it comes and at shutdown (HALFTUNES_REPLAY_LOG).
import Foundation
import HalfTunesEngine

/// With `HALFTUNES_REPLAY_LOG=<path>`, the runner records every input it feeds `DaemonState` with its time and
/// the actions it returned, and keeps a copy of the state as it was before the first. Each input is replayed at
/// once into that copy (`shadow`, fed in step with the live state), and the result so far is written over
/// `<path>.live.<pid>` after every input, so a daemon killed with SIGKILL leaves the report of every input it was
/// fed. At a graceful shutdown one JSON line is appended to `<path>` (how many inputs, how many of each kind, the
/// first input whose actions differed: nil when every input gave the same actions, in the same order) and the
/// live report is removed. Unset: nothing is recorded.
struct InputLog {
    static let path: String? = ProcessInfo.processInfo.environment["HALFTUNES_REPLAY_LOG"].flatMap { $0.isEmpty ? nil : $0 }

    struct Entry {
        var input: DaemonState.Input
        var now: Double
        var actions: [DaemonState.Action]
    }

    let initial: DaemonState
    private(set) var entries: [Entry] = []
    /// `initial` fed every input so far as it was recorded.
    private var shadow: DaemonState
    /// Inputs replayed in step whose actions were the live ones, and the first that differed.
    private(set) var checkedInStep = 0
    private(set) var mismatchInStep: String?
    private var kinds: [String: Int] = [:]
    /// The reports' directory, opened once: every file in it is opened and removed through this descriptor, a
    /// name at a time, never following a symbolic link (nil: no reports).
    private var directory: (fd: Int32, report: String, live: String)?
    /// `<path>.live.<pid>`, open for writing (nil: no live report).
    private var live: Int32?

    /// `reportPath`: where the graceful reports go (`HALFTUNES_REPLAY_LOG`); nil: the inputs are replayed in step
    /// but no report is written.
    init(initial: DaemonState, reportPath: String? = nil) {
        self.initial = initial
        self.shadow = initial
        directory = reportPath.flatMap { path in
            let url = URL(fileURLWithPath: path)
            // Walked from `/` one component at a time, no link another user could change followed (`SafePath`).
            guard let fd = try? SafePath.openDirectory(url.deletingLastPathComponent().path) else { return nil }
            return (fd, url.lastPathComponent, "\(url.lastPathComponent).live.\(getpid())")
        }
        live = directory.flatMap { d in
            let fd = openat(d.fd, d.live, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
            return fd >= 0 ? fd : nil
        }
        writeLive() // a process killed before its first input leaves a report of none
    }

    /// Records an input and replays it into the shadow state at once; then rewrites the live report.
    mutating func record(_ input: DaemonState.Input, now: Double, actions: [DaemonState.Action]) {
        entries.append(Entry(input: input, now: now, actions: actions))
        kinds[Self.kind(input), default: 0] += 1
        if mismatchInStep == nil {
            let replayed = shadow.handle(input, now: now)
            if replayed == actions {
                checkedInStep += 1
            } else {
                mismatchInStep = Self.mismatch(at: entries.count - 1, entries[entries.count - 1], replayed: replayed)
            }
        }
        writeLive()
    }

    /// Rewrites the live report with the replay so far (its length never shrinks: the counts only grow).
    private func writeLive() {
        guard let live, let line = report(checked: checkedInStep, mismatch: mismatchInStep) else { return }
        _ = line.withUnsafeBytes { pwrite(live, $0.baseAddress, $0.count, 0) }
        _ = ftruncate(live, off_t(line.count))
    }

    /// Feeds every input into a copy of the initial state, as the runner did (`DaemonCore.feed`), and compares
    /// the actions: what `record` did in step, again from the start (tests).
    func replay() -> (checked: Int, mismatch: String?) {
        var state = initial
        for (index, entry) in entries.enumerated() {
            let actions = state.handle(entry.input, now: entry.now)
            guard actions == entry.actions else { return (index, Self.mismatch(at: index, entry, replayed: actions)) }
        }
        return (entries.count, nil)
    }

    /// Appends the report line of the replay made in step to the report file; the live report goes (the runner
    /// records nothing more: `DaemonCore.shutdown` lets go of the log).
    mutating func writeReport() {
        guard let directory else { return }
        self.directory = nil // written once
        defer { close(directory.fd) }
        if let live {
            close(live)
            unlinkat(directory.fd, directory.live, 0)
            self.live = nil
        }
        guard let line = report(checked: checkedInStep, mismatch: mismatchInStep) else { return }
        let fd = openat(directory.fd, directory.report, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// One JSON line: this process, its inputs and their kinds, how many replayed to the same actions, the first
    /// that did not.
    private func report(checked: Int, mismatch: String?) -> Data? {
        var report: [String: Any] = ["pid": Int(getpid()), "inputs": entries.count, "checked": checked, "kinds": kinds]
        report["mismatch"] = mismatch ?? NSNull()
        guard var line = try? JSONSerialization.data(withJSONObject: report, options: [.sortedKeys]) else { return nil }
        line.append(0x0A)
        return line
    }

    private static func mismatch(at index: Int, _ entry: Entry, replayed: [DaemonState.Action]) -> String {
        "input \(index) \(clip(entry.input)): recorded \(clip(entry.actions)), replayed \(clip(replayed))"
    }

    /// The input's case name.
    static func kind(_ input: DaemonState.Input) -> String {
        let text = String(describing: input)
        return String(text.prefix { $0 != "(" })
    }

    private static func clip(_ value: Any) -> String {
        let text = String(describing: value)
        return text.count > 1500 ? String(text.prefix(1500)) + "…" : text
    }
}

/// How the runner feeds the state: the inputs fed while an action list is carried out (`depth` > 0) wait for the
/// end of the list, in order (`waiting`), so an input's actions never interleave with another's; and, in tests,
/// the log every input goes to (`inputLog`).
struct Feeding {
    var depth = 0
    var waiting: [DaemonState.Input] = []
    /// Every input and its actions, for the replay check at shutdown (tests only: `InputLog.path`).
    var inputLog: InputLog?
}
