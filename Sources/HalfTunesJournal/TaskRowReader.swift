// Task rows read straight from the SQLite statement (a restart reads every unfinished task this way).
import GRDB
import GRDBSQLite
import HalfTunesCore
import HalfTunesProtocol

/// Reads the columns of the current row of a `SELECT * FROM tasks …` statement with the SQLite C API: no
/// `Row`, no `DatabaseValue`, no column lookup by name per row. A row whose columns are not all in the
/// storage class the schema writes (an integer where text belongs, say) is left to the general decoding
/// (`TaskRecord(row:positions:)`, with its conversions and its errors): `record` returns nil for it.
struct TaskRowReader {
    private let statement: SQLiteStatement
    /// The statement's column index of `id` and then of every name in `TaskRecord.columns`.
    private let index: [Int32]

    init?(_ statement: Statement) {
        var positions: [String: Int32] = [:]
        for (i, name) in statement.columnNames.enumerated() where positions[name] == nil { positions[name] = Int32(i) }
        var index: [Int32] = []
        for name in ["id"] + TaskRecord.columns {
            guard let i = positions[name] else { return nil }
            index.append(i)
        }
        self.statement = statement.sqliteStatement
        self.index = index
    }

    /// The current row as a task, or nil when some column is not stored as usual (or a JSON column is not
    /// valid): the caller decodes that row the general way, which explains what is wrong.
    func record() -> TaskRecord? {
        var c = 0
        func next() -> Int32 {
            defer { c += 1 }
            return index[c]
        }
        guard let id = int(next()), let session = text(next()), let kind = text(next()), let url = text(next()),
              let currentURL = optionalText(next()),
              let state = text(next()).flatMap(TaskState.init(rawValue:)),
              let phase = text(next()).flatMap(TaskPhase.init(rawValue:)),
              let waitingReasonText = optionalText(next()), let nextAttemptAt = optionalDouble(next()),
              let destination = text(next()), let location = optionalText(next()), let partialPath = text(next()),
              let headersText = optionalText(next()), let description = optionalText(next()),
              let bytesDurable = int(next()), let bytesExpected = optionalInt(next()), let etag = optionalText(next()),
              let lastModified = optionalText(next()), let errorText = optionalText(next()),
              let attempts = int(next()), let queueOrder = int(next()), let createdAt = double(next()),
              let updatedAt = double(next()), let resourceDeadline = optionalDouble(next()),
              let priority = text(next()).flatMap(TaskPriority.init(rawValue:)),
              let checksum = optionalText(next()), let bandwidthLimit = optionalInt(next()),
              let method = optionalText(next()), let file = optionalText(next()),
              let maxResponseBytes = optionalInt(next()), let responseText = optionalText(next()),
              let fileID = optionalText(next()), let overwrite = int(next()),
              let rangesText = optionalText(next()), let maxConnections = optionalInt(next()),
              let earliestBeginDate = optionalDouble(next()), let nameFromResponse = int(next()),
              let suggestedFilename = optionalText(next()), let credentialsText = optionalText(next()),
              let durableRanges = rangesText == nil ? ByteRanges(prefix: bytesDurable) : ByteRanges(text: rangesText!)
        else { return nil }
        let key = String(id)
        func json<T: Decodable>(_ type: T.Type, _ text: String?) -> T?? {
            guard let text else { return .some(nil) }
            return (try? JSONText.decode(type, text, table: "tasks", key: key)).map { .some($0) }
        }
        guard let headers = try? JSONText.decodeHeaders(headersText, table: "tasks", key: key) ?? [:],
              let waitingReason = json(TaskError.self, waitingReasonText), let error = json(TaskError.self, errorText),
              let response = json(TaskResponse.self, responseText), let attemptCount = Int(exactly: attempts),
              let credentials = json(Credentials.self, credentialsText)
        else { return nil }
        var record = TaskRecord(
            id: id, session: session, kind: kind, url: url, currentURL: currentURL, state: state, phase: phase,
            waitingReason: waitingReason, nextAttemptAt: nextAttemptAt, destination: destination, location: location,
            partialPath: partialPath, headers: headers, description: description, bytesDurable: bytesDurable,
            bytesExpected: bytesExpected, etag: etag, lastModified: lastModified, error: error, attempts: attemptCount,
            queueOrder: queueOrder, createdAt: createdAt, updatedAt: updatedAt, resourceDeadline: resourceDeadline,
            priority: priority, checksum: checksum, bandwidthLimit: bandwidthLimit, method: method, file: file,
            maxResponseBytes: maxResponseBytes, response: response, fileID: fileID, overwrite: overwrite != 0,
            durableRanges: durableRanges, maxConnections: maxConnections.flatMap { Int(exactly: $0) },
            earliestBeginDate: earliestBeginDate, nameFromResponse: nameFromResponse != 0,
            suggestedFilename: suggestedFilename, credentials: credentials)
        record.unwritten.bits = [] // as the row holds it (what `bounded` clamps is written back)
        return record.bounded()
    }

    /// The current row's session, state and phase only (a finished task is counted, not read), or nil when
    /// one of them is not stored as usual.
    func sessionStateAndPhase() -> (session: String, state: TaskState, phase: TaskPhase)? {
        guard let session = text(index[1]), let state = text(index[5]).flatMap(TaskState.init(rawValue:)),
              let phase = text(index[6]).flatMap(TaskPhase.init(rawValue:)) else { return nil }
        return (session, state, phase)
    }

    // MARK: - Columns (nil: not stored as expected; `.some(nil)`: NULL)

    private func type(_ i: Int32) -> Int32 { sqlite3_column_type(statement, i) }

    private func text(_ i: Int32) -> String? {
        guard type(i) == SQLITE_TEXT, let bytes = sqlite3_column_text(statement, i) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, i))
        let buffer = UnsafeBufferPointer(start: bytes, count: count)
        // A NUL (a row edited by hand) is left to the general decoding, which ends the text there as C does: a path
        // read here whole would end elsewhere for the kernel than for the daemon's checks.
        guard !buffer.contains(0) else { return nil }
        return String(decoding: buffer, as: UTF8.self)
    }

    private func optionalText(_ i: Int32) -> String?? {
        type(i) == SQLITE_NULL ? .some(nil) : text(i).map { .some($0) }
    }

    private func int(_ i: Int32) -> Int64? {
        type(i) == SQLITE_INTEGER ? sqlite3_column_int64(statement, i) : nil
    }

    private func optionalInt(_ i: Int32) -> Int64?? {
        type(i) == SQLITE_NULL ? .some(nil) : int(i).map { .some($0) }
    }

    private func double(_ i: Int32) -> Double? {
        switch type(i) {
        case SQLITE_FLOAT, SQLITE_INTEGER: return sqlite3_column_double(statement, i)
        default: return nil
        }
    }

    private func optionalDouble(_ i: Int32) -> Double?? {
        type(i) == SQLITE_NULL ? .some(nil) : double(i).map { .some($0) }
    }
}
