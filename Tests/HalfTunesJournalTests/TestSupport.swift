import Foundation
import HalfTunesCore
import HalfTunesProtocol
@testable import HalfTunesJournal

/// A fresh temporary directory for one test, removed when `body` returns or throws.
func withTemporaryDirectory<T>(_ body: (String) throws -> T) throws -> T {
    let dir = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try body(dir)
}

/// A new empty directory under the system's temporary directory (the caller removes it).
func makeTemporaryDirectory() throws -> String {
    let template = NSTemporaryDirectory() + "halftunes-journal-tests.XXXXXX"
    var bytes = Array(template.utf8CString)
    guard let made = mkdtemp(&bytes) else {
        throw JournalError.cannotOpen(path: template, reason: "mkdtemp failed: \(String(cString: strerror(errno)))")
    }
    return String(cString: made)
}

enum Sample {
    static let now: Double = 1_763_783_487.125

    static func session(_ identifier: String = "com.example.app", ackedThrough: Int64 = 0) -> SessionRecord {
        SessionRecord(identifier: identifier, uid: 1000,
                      configuration: SessionConfiguration(destinationDirectory: "/home/u/Downloads",
                                                          headers: ["X-App": "1"], requestTimeout: 30),
                      state: .active, createdAt: now, ackedThrough: ackedThrough)
    }

    static func task(session: String = "com.example.app", name: String = "big.iso",
                     state: TaskState = .suspended) -> TaskRecord {
        TaskRecord(session: session, url: "http://127.0.0.1:8080/\(name)", state: state,
                   destination: "/home/u/Downloads/\(name)", partialPath: "/var/lib/halftunesd/partial/\(name).part",
                   createdAt: now, updatedAt: now)
    }

    /// A task with every optional field set, to check that nothing is lost on the way through SQLite.
    static func fullTask(session: String = "com.example.app") -> TaskRecord {
        TaskRecord(session: session, kind: "download", url: "http://127.0.0.1:8080/a%20b.bin",
                   currentURL: "http://127.0.0.1:8080/mirror/a%20b.bin", state: .waiting, phase: .publishing,
                   waitingReason: TaskError(code: TaskErrorCode.serverBusy, message: "503 from origin", httpStatus: 503),
                   nextAttemptAt: now + 30, destination: "/d/a b.bin", location: "/d/a b (1).bin",
                   partialPath: "/s/partial/7.part", headers: ["Authorization": "Bearer x", "Accept": "*/*"],
                   description: "nightly \"build\" ✓", bytesDurable: 1 << 33, bytesExpected: 1 << 34,
                   etag: "\"abc\"", lastModified: "Sat, 22 Nov 2025 03:51:27 GMT",
                   error: TaskError(code: TaskErrorCode.connectionLost, message: "reset by peer"), attempts: 3,
                   queueOrder: 42, createdAt: now, updatedAt: now + 1.5, resourceDeadline: now + 604_800,
                   priority: .high, checksum: "sha256:" + String(repeating: "ab", count: 32), bandwidthLimit: 65536,
                   method: "PUT", file: "/home/u/up load.bin", maxResponseBytes: 4096,
                   response: TaskResponse(status: 201, headers: [["ETag", "\"x\""]], body: "b2s=", bodyBytes: 2,
                                          truncated: false),
                   fileID: "2049:18446744073709551615", overwrite: true)
    }

    static func stateChanged(session: String = "com.example.app", task: Int64? = nil, to state: TaskState,
                             from previous: TaskState?) -> Event {
        Event(seq: nil, session: session, task: task, time: Timestamp.format(now),
              payload: .stateChanged(state: state, previous: previous, reason: nil))
    }
}

/// The value of a PRAGMA on the journal's connection.
func pragma(_ journal: Journal, _ name: String) throws -> String? {
    try journal.dbQueue.read { db in try String.fetchOne(db, sql: "PRAGMA \(name)") }
}

func fileMode(_ path: String) -> mode_t? {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    return st.st_mode & 0o777
}

/// `withTemporaryDirectory` for async bodies.
func withTemporaryDirectoryAsync<T>(_ body: (String) async throws -> T) async throws -> T {
    let dir = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try await body(dir)
}
