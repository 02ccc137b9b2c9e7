import HalfTunesKit

/// What `watch` shows: progress lines for pending tasks (redrawn in place on a terminal, or printed
/// when changed), and a permanent line when a task stops being pending.
struct WatchBoard {
    let json: Bool
    let redraw: Bool
    private var live = LiveLines()
    private var meters: [Int64: RateMeter] = [:]
    private var previous: [Int64: TaskInfo] = [:]
    private var sawPending = false

    init(json: Bool, redraw: Bool) {
        self.json = json
        self.redraw = redraw
    }

    mutating func update(_ tasks: [TaskInfo], now: Double) {
        let pending = tasks.filter { $0.state.isPending }.sorted { $0.id < $1.id }
        sawPending = sawPending || !pending.isEmpty
        // Tasks that were pending and no longer are get a permanent line.
        for task in tasks where !task.state.isPending && previous[task.id]?.state.isPending == true {
            if json { try? Console.json(task) } else { permanent("Task \(task.id) \(TaskText.explanation(task))") }
            meters[task.id] = nil
        }
        for task in pending { meters[task.id, default: RateMeter()].add(totalBytes: task.bytesReceived, at: now) }
        let width = Console.width
        if redraw {
            live.draw(pending.map { TaskText.progressLine($0, bytesPerSecond: meters[$0.id]?.bytesPerSecond, width: width) })
        } else {
            for task in pending where changed(task) {
                if json { try? Console.json(task) } else {
                    Console.out(TaskText.progressLine(task, bytesPerSecond: meters[task.id]?.bytesPerSecond, width: width))
                }
            }
        }
        previous = Dictionary(tasks.map { ($0.id, $0) }, uniquingKeysWith: { $1 })
    }

    mutating func finish() {
        live.clear()
        if !sawPending && !json { Console.out("No pending tasks.") }
    }

    private func changed(_ task: TaskInfo) -> Bool {
        guard let before = previous[task.id] else { return true }
        return before.state != task.state || before.bytesReceived != task.bytesReceived
            || before.queuePosition != task.queuePosition || before.nextAttemptAt != task.nextAttemptAt
    }

    private mutating func permanent(_ line: String) {
        if redraw { live.printAbove(line) } else { Console.out(line) }
    }
}
