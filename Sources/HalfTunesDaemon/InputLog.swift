// Test support: every input the state was fed, replayed at shutdown into the state as it began (HALFTUNES_REPLAY_LOG).
import Foundation

/// With `HALFTUNES_REPLAY_LOG=<path>`, the runner records every input it feeds `DaemonState` with its time and
/// the actions it returned, and keeps a copy of the state as it was before the first. At shutdown it replays
/// the inputs into that copy and appends one JSON line to `<path>`: how many inputs, how many of each kind,
/// and the first input whose actions differed (nil: the same actions, in the same order, for every input).
/// A daemon killed with SIGKILL writes nothing; the one started after it records its recovery from the
/// journal like any other input. Unset: nothing is recorded.
struct InputLog {
    static let path: String? = ProcessInfo.processInfo.environment["HALFTUNES_REPLAY_LOG"].flatMap { $0.isEmpty ? nil : $0 }

    struct Entry {
        var input: DaemonState.Input
        var now: Double
        var actions: [DaemonState.Action]
    }

    let initial: DaemonState
    private(set) var entries: [Entry] = []

    init(initial: DaemonState) {
        self.initial = initial
    }

    mutating func record(_ input: DaemonState.Input, now: Double, actions: [DaemonState.Action]) {
        entries.append(Entry(input: input, now: now, actions: actions))
    }

    /// Feeds every input into a copy of the initial state, as the runner did (`DaemonCore.feed`), and compares
    /// the actions.
    func replay() -> (checked: Int, mismatch: String?) {
        var state = initial
        for (index, entry) in entries.enumerated() {
            let actions = state.handle(entry.input, now: entry.now)
            guard actions == entry.actions else {
                let mismatch = "input \(index) \(Self.clip(entry.input)): recorded \(Self.clip(entry.actions)), "
                    + "replayed \(Self.clip(actions))"
                return (index, mismatch)
            }
        }
        return (entries.count, nil)
    }

    /// Replays and appends the report line to `path`.
    func writeReport(to path: String) {
        let (checked, mismatch) = replay()
        var kinds: [String: Int] = [:]
        for entry in entries { kinds[Self.kind(entry.input), default: 0] += 1 }
        var report: [String: Any] = ["pid": Int(getpid()), "inputs": entries.count, "checked": checked, "kinds": kinds]
        report["mismatch"] = mismatch ?? NSNull()
        guard var line = try? JSONSerialization.data(withJSONObject: report, options: [.sortedKeys]) else { return }
        line.append(0x0A)
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
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
