// The daemon's record of its own crashes: which tasks ran when it trapped, so a restart does not replay the crash.
import CCrashRecord
import Foundation

/// One crash as the fatal-signal handler wrote it (`<state>/crashes`, a line "<signal> <bootID> <id> <id> ...").
struct CrashEntry: Equatable, Sendable {
    var signal: Int32
    var bootID: String
    var tasks: Set<Int64>
}

/// The crashes the record holds, oldest first, and what they say: a task that ran in each of the last
/// `crashesToQuarantine` is not started again. Only exits the daemon can attribute to itself are in it: its handler
/// writes a line for a fatal signal it raised itself (a Swift trap, a fault, abort). SIGKILL, an OOM kill, a power
/// cut and a clean stop write nothing, so they never count.
struct CrashHistory: Equatable, Sendable {
    static let crashesToQuarantine = 3
    /// The record's tail read at start: a record can only be this long by a bug, and is cut then.
    static let maxBytesRead = 1 << 20

    private(set) var entries: [CrashEntry] = []

    init(entries: [CrashEntry] = []) {
        self.entries = Array(entries.suffix(Self.crashesToQuarantine))
    }

    /// The record's text as the handler writes it; lines that do not parse (a line cut by a power cut) are skipped.
    /// Keeps the last `crashesToQuarantine` entries.
    init(text: Substring) {
        var parsed: [CrashEntry] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 2, let signal = Int32(fields[0]), signal > 0 else { continue }
            var tasks = Set<Int64>()
            var valid = true
            for field in fields.dropFirst(2) {
                guard let id = Int64(field), id > 0 else { valid = false; break }
                tasks.insert(id)
            }
            if valid { parsed.append(CrashEntry(signal: signal, bootID: String(fields[1]), tasks: tasks)) }
        }
        self.init(entries: parsed)
    }

    /// The tasks that ran in each of the last `crashesToQuarantine` crashes (none while there were fewer).
    var quarantined: Set<Int64> {
        guard entries.count >= Self.crashesToQuarantine, var common = entries.last?.tasks else { return [] }
        for entry in entries.suffix(Self.crashesToQuarantine) { common.formIntersection(entry.tasks) }
        return common
    }

    var text: String {
        entries.map { entry in
            ([String(entry.signal), entry.bootID] + entry.tasks.sorted().map(String.init)).joined(separator: " ") + "\n"
        }.joined()
    }
}

/// The open crash record and the slots its handler reads: the ids of the tasks whose transfer or completion is
/// under way. Used on the core only; the handler reads the slots from whichever thread faults.
struct CrashRecord {
    static let fileName = "crashes"

    /// What the record held when the daemon started (the crashes before this run).
    let history: CrashHistory
    private var slotOf: [Int64: Int32] = [:]
    private var freeSlots: [Int32] = []
    private var nextSlot: Int32 = 0

    /// Reads the record in `stateDirectory`, writes back its last entries (so it never grows), opens it for the
    /// handler to append to and installs the handler. Every file is reached through the directory's descriptor.
    static func open(stateDirectory: String) throws -> CrashRecord {
        let path = stateDirectory + "/" + fileName
        func failure(_ what: String) -> CrashRecordError { CrashRecordError("cannot \(what): \(String(cString: strerror(errno)))") }
        let dir = Glibc.open(stateDirectory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard dir >= 0 else { throw failure("open \(stateDirectory)") }
        defer { close(dir) }
        let history = CrashHistory(text: Substring(readTail(dir)))
        let temporary = fileName + ".new"
        unlinkat(dir, temporary, 0)
        let fd = openat(dir, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw failure("create \(path).new") }
        let bytes = Array(history.text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, renameat(dir, temporary, dir, fileName) == 0, fsync(dir) == 0 else {
            let error = failure("write \(path)")
            unlinkat(dir, temporary, 0)
            throw error
        }
        let append = openat(dir, fileName, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC)
        guard append >= 0 else { throw failure("open \(path)") }
        let boot = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "-"
        let installed = htd_crash_install(append, boot)
        guard installed == 0 else {
            close(append)
            throw CrashRecordError("cannot install the crash handler: \(String(cString: strerror(installed)))")
        }
        return CrashRecord(history: history)
    }

    private init(history: CrashHistory) {
        self.history = history
    }

    /// The task's transfer (or the completion after it) is under way: a crash now names it.
    mutating func running(_ id: Int64) {
        guard slotOf[id] == nil else { return }
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            guard nextSlot < HTD_CRASH_SLOTS else { return } // more than the slots: not recorded
            slot = nextSlot
            nextSlot += 1
        }
        slotOf[id] = slot
        htd_crash_set(slot, id)
    }

    /// Nothing of the task runs any more.
    mutating func stopped(_ id: Int64) {
        guard let slot = slotOf.removeValue(forKey: id) else { return }
        htd_crash_set(slot, 0)
        freeSlots.append(slot)
    }

    /// The record's last `CrashHistory.maxBytesRead` bytes (from a line's start), "" when there is none.
    private static func readTail(_ dir: Int32) -> String {
        let fd = openat(dir, fileName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return "" }
        let size = Int(st.st_size)
        let start = max(0, size - maxBytes)
        var bytes = [UInt8](repeating: 0, count: size - start)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(start)) }
        guard n > 0 else { return "" }
        var text = String(decoding: bytes[..<n], as: UTF8.self)
        if start > 0, let newline = text.firstIndex(of: "\n") { text = String(text[text.index(after: newline)...]) }
        return text
    }

    private static var maxBytes: Int { CrashHistory.maxBytesRead }
}

struct CrashRecordError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
