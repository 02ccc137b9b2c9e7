#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GRDB
import HalfTunesCore
import HalfTunesProtocol

/// JSON text columns, encoded with the wire encoder (sorted keys) so rows read like protocol messages.
enum JSONText {
    static func encode<T: Encodable>(_ value: T) throws -> String {
        if let text = value as? JSONTextWritable { // the same bytes again (JSONTextTests), with no tree in between
            var bytes: [UInt8] = []
            text.writeJSON(into: &bytes, unqualifying: nil)
            return String(decoding: bytes, as: UTF8.self)
        }
        if let convertible = value as? JSONValueConvertible {
            return String(decoding: try JSONWriter.write(convertible.jsonValue), as: UTF8.self) // the same bytes
        }
        return String(decoding: try WireCoding.encoder.encode(value), as: UTF8.self)
    }

    /// Header maps (every task row has one, usually empty), written without JSONEncoder: the same bytes.
    static func encode(_ headers: [String: String]) throws -> String {
        if headers.isEmpty { return "{}" }
        return String(decoding: try JSONWriter.write(.object(headers.mapValues(JSONValue.string))), as: UTF8.self)
    }

    static func decodeHeaders(_ text: String?, table: String, key: String) throws -> [String: String]? {
        guard let text else { return nil }
        if text == "{}" { return [:] }
        return try decode([String: String].self, text, table: table, key: key)
    }

    static func encodeIfPresent<T: Encodable>(_ value: T?) throws -> String? {
        guard let value else { return nil }
        return try encode(value)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String, table: String, key: String) throws -> T {
        // The usual shape read directly (JSONDecoder was most of the cost of reading a page of finished tasks).
        if let fast = T.self as? JSONValueDecodable.Type, let value = try? JSONParser.parse(text.utf8),
           let decoded = fast.init(jsonValue: value) as? T {
            return decoded
        }
        do {
            return try WireCoding.decoder.decode(T.self, from: Data(text.utf8))
        } catch {
            throw JournalError.corruptRow(table: table, key: key, detail: "bad JSON for \(T.self): \(error)")
        }
    }

    static func decodeIfPresent<T: Decodable>(_ type: T.Type, _ text: String?, table: String, key: String) throws -> T? {
        guard let text else { return nil }
        return try decode(type, text, table: table, key: key)
    }
}

/// A row read by column name through positions found once per statement: GRDB's own lookup by name
/// lowercases the name on every call, which was a quarter of a restart's time with 100,000 tasks.
struct RowReader {
    let row: Row
    let positions: [String: Int]

    /// The positions of the columns of `row` (and of every row of the same statement).
    static func positions(of row: Row) -> [String: Int] {
        var positions: [String: Int] = [:]
        for (i, name) in row.columnNames.enumerated() where positions[name] == nil { positions[name] = i }
        return positions
    }

    init(_ row: Row, positions: [String: Int]? = nil) {
        self.row = row
        self.positions = positions ?? Self.positions(of: row)
    }

    func decode<Value: DatabaseValueConvertible>(_ type: Value.Type = Value.self, forColumn name: String) throws -> Value {
        guard let i = positions[name] else { return try row.decode(type, forColumn: name) } // GRDB's own error
        return try row.decode(type, atIndex: i)
    }

    // The column types of the journal, read without GRDB's generic decoding (whose metadata lookups were a tenth
    // of a restart with 100,000 tasks). Anything but the plain case goes through it, for its conversions and errors.

    func decode(forColumn name: String) throws -> String { try plain(name, \.string) ?? decode(String.self, forColumn: name) }
    func decode(forColumn name: String) throws -> Int64 { try plain(name, \.int64) ?? decode(Int64.self, forColumn: name) }
    func decode(forColumn name: String) throws -> Double { try plain(name, \.double) ?? decode(Double.self, forColumn: name) }

    func decode(forColumn name: String) throws -> String? {
        if let value = nullable(name, \.string) { return value }
        return try decode(String?.self, forColumn: name)
    }

    func decode(forColumn name: String) throws -> Int64? {
        if let value = nullable(name, \.int64) { return value }
        return try decode(Int64?.self, forColumn: name)
    }

    func decode(forColumn name: String) throws -> Double? {
        if let value = nullable(name, \.double) { return value }
        return try decode(Double?.self, forColumn: name)
    }

    private func storage(_ name: String) -> DatabaseValue.Storage? {
        positions[name].map { row.databaseValues[row.index(row.startIndex, offsetBy: $0)].storage }
    }

    /// The column's value when it is stored as `V`; nil for anything else (NULL included).
    private func plain<V>(_ name: String, _ value: (DatabaseValue.Storage) -> V?) -> V? {
        storage(name).flatMap(value)
    }

    /// `.some(nil)` for NULL, `.some(value)` when stored as `V`; nil for anything else.
    private func nullable<V>(_ name: String, _ value: (DatabaseValue.Storage) -> V?) -> V?? {
        guard let storage = storage(name) else { return nil }
        if case .null = storage { return .some(nil) }
        return value(storage).map { .some($0) }
    }
}

private extension DatabaseValue.Storage {
    var string: String? { if case .string(let s) = self { s } else { nil } }
    var int64: Int64? { if case .int64(let v) = self { v } else { nil } }
    var double: Double? { if case .double(let v) = self { v } else { nil } }
}

extension ByteRanges {
    /// The column's value: NULL for a range from 0 (and nothing), else the text form.
    var storedText: String? { isPrefix ? nil : text }

    /// Reads a ranges column with its byte count: NULL is the first `bytes` bytes.
    static func stored(_ text: String?, bytes: Int64, table: String, key: String) throws -> ByteRanges {
        guard let text else { return ByteRanges(prefix: bytes) }
        guard let ranges = ByteRanges(text: text) else {
            throw JournalError.corruptRow(table: table, key: key, detail: "bad byte ranges '\(text)'")
        }
        return ranges
    }
}

/// Reads a `TEXT` column holding a raw-value enum, with a clear error for unknown values.
func decodeEnum<E: RawRepresentable>(_ type: E.Type, _ row: RowReader, _ column: String, table: String,
                                     key: String) throws -> E where E.RawValue == String {
    let raw: String = try row.decode(forColumn: column)
    guard let value = E(rawValue: raw) else {
        throw JournalError.corruptRow(table: table, key: key, detail: "unknown \(E.self) '\(raw)' in \(column)")
    }
    return value
}

extension SessionRecord {
    init(row plain: Row) throws {
        let row = RowReader(plain)
        let identifier: String = try row.decode(forColumn: "identifier")
        let uid: Int64 = try row.decode(forColumn: "uid")
        guard let uid32 = UInt32(exactly: uid) else {
            throw JournalError.corruptRow(table: "sessions", key: identifier, detail: "uid \(uid) out of range")
        }
        self.init(
            identifier: identifier,
            uid: uid32,
            configuration: try JSONText.decode(SessionConfiguration.self, try row.decode(forColumn: "configuration"),
                                               table: "sessions", key: identifier),
            state: try decodeEnum(SessionState.self, row, "state", table: "sessions", key: identifier),
            createdAt: try row.decode(forColumn: "created_at"),
            ackedThrough: try row.decode(forColumn: "acked_through"),
            launch: try (row.decode(forColumn: "launch") as String?).map {
                try JSONText.decode(SessionLaunchRecord.self, $0, table: "sessions", key: identifier)
            })
        self = bounded()
    }
}

extension TaskRecord {
    /// Every column but `id`, in the order of `arguments()`.
    static let columns = [
        "session", "kind", "url", "current_url", "state", "phase", "waiting_reason", "next_attempt_at",
        "destination", "location", "partial_path", "headers", "description", "bytes_durable", "bytes_expected",
        "etag", "last_modified", "error", "attempts", "queue_order", "created_at", "updated_at", "resource_deadline",
        "priority", "checksum", "bandwidth_limit", "method", "file", "max_response_bytes", "response", "file_id", "overwrite",
        "durable_ranges", "max_connections", "earliest_begin_date", "name_from_response", "suggested_filename",
        "credentials",
    ]

    /// The values of `columns`' columns, in `columns` order (`session` first when it is in them).
    func arguments(of columns: TaskColumns) throws -> StatementArguments {
        guard columns != .all else { return try arguments() }
        var values: [(any DatabaseValueConvertible)?] = []
        values.reserveCapacity(columns.rawValue.nonzeroBitCount)
        // Only bits of real columns: every index below is a case of `value(ofColumn:)`.
        var bits = columns.intersection(.all).rawValue
        while bits != 0 {
            let i = bits.trailingZeroBitCount
            bits &= bits - 1
            values.append(try value(ofColumn: i))
        }
        return StatementArguments(values)
    }

    /// Column `i` of `columns`, as `arguments()` gives it.
    private func value(ofColumn i: Int) throws -> (any DatabaseValueConvertible)? {
        switch i {
        case 0: session
        case 1: kind
        case 2: url
        case 3: currentURL
        case 4: state.rawValue
        case 5: phase.rawValue
        case 6: try JSONText.encodeIfPresent(waitingReason)
        case 7: nextAttemptAt
        case 8: destination
        case 9: location
        case 10: partialPath
        case 11: try JSONText.encode(headers)
        case 12: description
        case 13: bytesDurable
        case 14: bytesExpected
        case 15: etag
        case 16: lastModified
        case 17: try JSONText.encodeIfPresent(error)
        case 18: attempts
        case 19: queueOrder
        case 20: createdAt
        case 21: updatedAt
        case 22: resourceDeadline
        case 23: priority.rawValue
        case 24: checksum
        case 25: bandwidthLimit
        case 26: method
        case 27: file
        case 28: maxResponseBytes
        case 29: try JSONText.encodeIfPresent(response)
        case 30: fileID
        case 31: overwrite
        case 32: durableRanges.storedText
        case 33: maxConnections
        case 34: earliestBeginDate
        case 35: nameFromResponse
        case 36: suggestedFilename
        case 37: try JSONText.encodeIfPresent(credentials)
        // `arguments(of:)` passes only indexes below `TaskRecord.columns.count` (masked with `.all`), and the bits
        // come from the record's own setters, never from a row, a request or a server; should a column be added to
        // `columns` and not here, that write fails with words rather than taking the daemon down.
        default: throw JournalError.corruptRow(table: "tasks", key: "column \(i)", detail: "no value is written for this column")
        }
    }

    func arguments() throws -> StatementArguments {
        [
            session, kind, url, currentURL, state.rawValue, phase.rawValue, try JSONText.encodeIfPresent(waitingReason),
            nextAttemptAt, destination, location, partialPath, try JSONText.encode(headers), description,
            bytesDurable, bytesExpected, etag, lastModified, try JSONText.encodeIfPresent(error), attempts, queueOrder,
            createdAt, updatedAt, resourceDeadline,
            priority.rawValue, checksum, bandwidthLimit, method, file, maxResponseBytes,
            try JSONText.encodeIfPresent(response), fileID, overwrite, durableRanges.storedText,
            maxConnections, earliestBeginDate, nameFromResponse, suggestedFilename,
            try JSONText.encodeIfPresent(credentials),
        ]
    }

    init(row plain: Row, positions: [String: Int]? = nil) throws {
        let row = RowReader(plain, positions: positions)
        let id: Int64 = try row.decode(forColumn: "id")
        let key = String(id)
        func json<T: Decodable>(_ type: T.Type, _ column: String) throws -> T? {
            try JSONText.decodeIfPresent(type, try row.decode(String?.self, forColumn: column), table: "tasks",
                                         key: key)
        }
        self.init(
            id: id,
            session: try row.decode(forColumn: "session"),
            kind: try row.decode(forColumn: "kind"),
            url: try row.decode(forColumn: "url"),
            currentURL: try row.decode(forColumn: "current_url"),
            state: try decodeEnum(TaskState.self, row, "state", table: "tasks", key: key),
            phase: try decodeEnum(TaskPhase.self, row, "phase", table: "tasks", key: key),
            waitingReason: try json(TaskError.self, "waiting_reason"),
            nextAttemptAt: try row.decode(forColumn: "next_attempt_at"),
            destination: try row.decode(forColumn: "destination"),
            location: try row.decode(forColumn: "location"),
            partialPath: try row.decode(forColumn: "partial_path"),
            headers: try JSONText.decodeHeaders(try row.decode(String?.self, forColumn: "headers"), table: "tasks", key: key) ?? [:],
            description: try row.decode(forColumn: "description"),
            bytesDurable: try row.decode(forColumn: "bytes_durable"),
            bytesExpected: try row.decode(forColumn: "bytes_expected"),
            etag: try row.decode(forColumn: "etag"),
            lastModified: try row.decode(forColumn: "last_modified"),
            error: try json(TaskError.self, "error"),
            attempts: try row.decode(forColumn: "attempts"),
            queueOrder: try row.decode(forColumn: "queue_order"),
            createdAt: try row.decode(forColumn: "created_at"),
            updatedAt: try row.decode(forColumn: "updated_at"),
            resourceDeadline: try row.decode(forColumn: "resource_deadline"),
            priority: try decodeEnum(TaskPriority.self, row, "priority", table: "tasks", key: key),
            checksum: try row.decode(forColumn: "checksum"),
            bandwidthLimit: try row.decode(forColumn: "bandwidth_limit"),
            method: try row.decode(forColumn: "method"),
            file: try row.decode(forColumn: "file"),
            maxResponseBytes: try row.decode(forColumn: "max_response_bytes"),
            response: try json(TaskResponse.self, "response"),
            fileID: try row.decode(forColumn: "file_id"),
            overwrite: try row.decode(forColumn: "overwrite"),
            durableRanges: try ByteRanges.stored(try row.decode(forColumn: "durable_ranges"),
                                                 bytes: try row.decode(forColumn: "bytes_durable"), table: "tasks", key: key),
            maxConnections: try row.decode(forColumn: "max_connections"),
            earliestBeginDate: try row.decode(forColumn: "earliest_begin_date"),
            nameFromResponse: try row.decode(forColumn: "name_from_response"),
            suggestedFilename: try row.decode(forColumn: "suggested_filename"),
            credentials: try json(Credentials.self, "credentials"))
        unwritten.bits = [] // as the row holds it (what `bounded` clamps is written back)
        self = bounded()
    }
}

extension ResumeTokenRecord {
    init(row: Row) throws {
        let token: String = try row.decode(forColumn: "token")
        self.init(
            token: token,
            session: try row.decode(forColumn: "session"),
            url: try row.decode(forColumn: "url"),
            partialPath: try row.decode(forColumn: "partial_path"),
            destination: try row.decode(forColumn: "destination"),
            ranges: try ByteRanges.stored(try row.decode(String?.self, forColumn: "ranges"),
                                          bytes: try row.decode(forColumn: "bytes"), table: "resume_tokens",
                                          key: token),
            bytesExpected: try row.decode(forColumn: "bytes_expected"),
            etag: try row.decode(forColumn: "etag"),
            lastModified: try row.decode(forColumn: "last_modified"),
            createdAt: try row.decode(forColumn: "created_at"))
        self = bounded()
    }
}

extension Event {
    /// Decodes a stored event (`json` column) and restores its `seq` from the row.
    init(row: Row) throws {
        let seq: Int64 = try row.decode(forColumn: "seq")
        var event = try JSONText.decode(Event.self, try row.decode(String.self, forColumn: "json"),
                                        table: "events", key: String(seq))
        event.seq = seq
        // The row's session is authoritative (migration v3 qualified it; the JSON keeps the old name).
        if let session = try? row.decode(String.self, forColumn: "session") { event.session = session }
        self = event
    }
}
