// Coverage-guided libFuzzer harnesses over what reads outside input: `halftunes-fuzz HARNESS [libFuzzer flags] DIR...`.
// Built only with HALFTUNES_FUZZ=1 (Package.swift), our modules instrumented and testable; `make fuzz` runs them.
import CLibFuzzer
import Foundation
import GRDB
import HalfTunesProtocol
@testable import HalfTunesJournal
@testable import HalfTunesDaemon
@testable import HalfTunesCore
@testable import HalfTunesEngine

/// Each harness takes the input's bytes; a trap (overflow, bad index, failed precondition) is the finding.
let harnesses: [String: ([UInt8]) -> Void] = [
    "json": fuzzJSON,
    "heads": fuzzHeads,
    "params": fuzzParams,
    "names": fuzzNames,
    "rows": fuzzRows,
]

/// The JSON parser: whatever it accepts, the writer writes and the parser reads back as the same value.
func fuzzJSON(_ bytes: [UInt8]) {
    guard let value = try? JSONParser.parse(bytes), let written = try? JSONWriter.write(value) else { return }
    let again = try? JSONParser.parse(written)
    precondition(again == value, "the parser does not read back what the writer wrote")
}

/// A response head: line 1 the requested offset, line 2 the status, then "Name: value" lines. Through ContentRange,
/// ResumeDecision and the first request's machine (head and body), a segment's decision and machine, the
/// Content-Disposition name, WWW-Authenticate, Retry-After; and the whole input as bytes through the head recoder.
func fuzzHeads(_ bytes: [UInt8]) {
    var recoder = ResponseHeadRecoder()
    _ = recoder.feed(bytes)
    let text = String(decoding: bytes, as: UTF8.self)
    var lines = text.split(separator: "\n", omittingEmptySubsequences: false).makeIterator()
    guard let offset = lines.next().flatMap({ Int64($0) }), offset >= 0, offset <= HalfTunes.maxByteCount,
          let status = lines.next().flatMap({ Int($0) }), (100...599).contains(status) else { return }
    var headers: [(String, String)] = []
    while let line = lines.next() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers.append((String(line[..<colon]), String(line[line.index(after: colon)...])))
    }
    for (name, value) in headers {
        if let range = ContentRange.parse(value) {
            if let start = range.start, let end = range.end { precondition(start <= end) }
            if let end = range.end, let total = range.total { precondition(end < total) }
            for n in [range.start, range.end, range.total] { precondition((n ?? 0) <= HalfTunes.maxByteCount) }
        }
        switch name.lowercased() {
        case "content-disposition":
            if let name = ContentDisposition.filename(value) {
                precondition(!name.contains("/") && name != "." && name != "..", "an unsafe name: \(name)")
            }
        case "www-authenticate":
            let challenges = AuthChallenge.parse([value])
            if let chosen = HTTPAuthentication.choose(challenges) {
                _ = HTTPAuthentication.authorization(for: chosen, credentials: Credentials(user: "u", password: "p"),
                                                     method: "GET", uri: "/f", clientNonce: "00")
            }
        case "retry-after":
            if let delay = RetryAfter.parse(value, now: 1_800_000_000) { precondition(delay.isFinite) }
        default:
            break
        }
    }
    _ = ResumeDecision.decide(requestedOffset: offset, status: status, headers: headers, now: 0)
    var machine = RequestMachine(role: .primary(.init(requestedOffset: offset, kept: offset)))
    let (accepted, _) = machine.head(status: status, headers: headers, finalURL: "http://fuzz.invalid/f", now: 0,
                                     keptCount: offset)
    if accepted, machine.phase == .streaming { _ = machine.body(min(bytes.count, 1 << 16)); _ = machine.finish() }
    let range = offset..<(offset + 1 + Int64(bytes.count))
    let validators = Validators(etag: "\"v\"", lastModified: nil)
    _ = SegmentDecision.decide(range: range, total: range.upperBound, validators: validators, status: status,
                               headers: headers, now: 0, url: "http://fuzz.invalid/f")
    var segment = RequestMachine(role: .segment(range: range, total: range.upperBound, validators: validators))
    if segment.head(status: status, headers: headers, finalURL: "http://fuzz.invalid/f", now: 0, keptCount: 0).accepted {
        _ = segment.body(bytes.count)
        _ = segment.finish()
    }
}

/// A request's params (any JSON) decoded as every method's params type, and what the daemon checks of them
/// without its core: paths, URLs, identifiers, headers' methods, retry policies, checksums, proxies, credentials.
func fuzzParams(_ bytes: [UInt8]) {
    guard let params = try? JSONParser.parse(bytes) else { return }
    // A pair [session.open params, task.create params]: the task's destination in the session's directory.
    if case .array(let pair) = params, pair.count == 2,
       let task: TaskCreateParams = try? RPCRouter.decodeParams(pair[1]) {
        fuzzDestination(try? RPCRouter.decodeParams(pair[0]) as SessionOpenParams, task)
    }
    if let p: TaskCreateParams = try? RPCRouter.decodeParams(params) {
        if let destination = p.destination {
            if (try? Destination.checkClientPath(destination, field: "destination")) != nil {
                precondition(!destination.utf8.contains(0), "a NUL passed the path check")
                _ = Destination.normalize(destination)
            }
        }
        if let file = p.file { _ = try? Destination.checkClientPath(file, field: "file") }
        if let url = p.url, let valid = try? Destination.validate(url: url) { _ = Destination.suggestedName(for: valid) }
        _ = ExchangeRules.method(p.method, kind: p.kind ?? .download)
        if let checksum = p.checksum { _ = Checksum.problem(with: checksum) }
        if let begin = p.earliestBeginDate { _ = Timestamp.parse(begin) }
    }
    if let p: SessionOpenParams = try? RPCRouter.decodeParams(params) {
        _ = DaemonCore.identifierProblem(p.identifier)
        if let c = p.configuration {
            if let retry = c.retry { _ = Backoff.problem(with: retry) }
            _ = try? SessionProxy.resolve(c.proxy, stored: nil)
            _ = try? SessionProxy.resolveBypass(c.proxyBypass)
            _ = try? SessionCredentials.resolve(c.credentials, stored: nil)
            if let directory = c.destinationDirectory {
                _ = try? Destination.checkClientPath(directory, field: "configuration.destinationDirectory")
            }
            if let unit = c.launchUnit { _ = UnitName.problem(unit) }
        }
    }
    _ = try? RPCRouter.decodeParams(params) as TaskIDParams
    _ = try? RPCRouter.decodeParams(params) as TaskCancelParams
    _ = try? RPCRouter.decodeParams(params) as TaskListParams
    _ = try? RPCRouter.decodeParams(params) as TaskUpdateParams
    _ = try? RPCRouter.decodeParams(params) as TaskMoveParams
    _ = try? RPCRouter.decodeParams(params) as DaemonSetLimitsParams
    _ = try? RPCRouter.decodeParams(params) as EventsAckParams
    _ = try? RPCRouter.decodeParams(params) as EventsSubscribeParams
    _ = try? RPCRouter.decodeParams(params) as SessionInvalidateParams
    _ = try? RPCRouter.decodeParams(params) as AgentStartedParams
    _ = try? RPCRouter.decodeParams(params) as AgentEndedParams
}

/// A scratch downloads directory for `fuzzDestination`, and the uid whose downloads go there (one with a personal
/// directory when the harness runs as root).
let fuzzRoots: (roots: DownloadRoots, uid: UInt32) = {
    var template = Array("/tmp/halftunes-fuzz-XXXXXX".utf8CString)
    let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    return (DownloadRoots(downloadsDirectory: dir, daemonUID: geteuid()), geteuid() == 0 ? 4242 : geteuid())
}()

/// Where the core puts a download (`DaemonCore.prepareCreate`): the session's `destinationDirectory` and the
/// task's `destination` as checked paths, confined to the uid's download directories, then the name the URL
/// suggests and the free-name search over names "taken" as the input's hash says. Every path is taken inside
/// the scratch directory, and only directories that exist are used: the harness makes none.
func fuzzDestination(_ session: SessionOpenParams?, _ task: TaskCreateParams) {
    let (roots, uid) = fuzzRoots
    let base = roots.defaultDirectory(for: uid)
    func inside(_ path: String) -> String? {
        let normalized = Destination.normalize(path.hasPrefix("/") ? base + path : base + "/" + path)
        return normalized == base || normalized.hasPrefix(base + "/") ? normalized : nil
    }
    var directory = base
    if let given = session?.configuration?.destinationDirectory {
        guard (try? Destination.checkClientPath(given, field: "configuration.destinationDirectory")) != nil,
              let path = inside(given) else { return }
        directory = path
    }
    var isDirectory: ObjCBool = false
    guard (try? roots.confine(base, uid: uid)) != nil, // makes the personal directory, once
          FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue,
          (try? roots.confine(directory, uid: uid)) != nil,
          let text = task.url, let url = try? Destination.validate(url: text) else { return }
    var explicit: String?
    if let given = task.destination, !given.isEmpty {
        guard (try? Destination.checkClientPath(given, field: "destination")) != nil,
              let path = inside(given.hasPrefix("/") ? given : String(directory.dropFirst(base.count)) + "/" + given),
              (try? roots.confine((path as NSString).deletingLastPathComponent, uid: uid)) != nil else { return }
        explicit = path
    }
    let seed = text.utf8.reduce(UInt64(1469598103934665603)) { ($0 ^ UInt64($1)) &* 1099511628211 }
    var looks = 0
    let resolved = try? Destination.resolve(explicit: explicit, url: url, directory: directory, isReserved: { path in
        looks += 1
        return path.utf8.reduce(seed) { ($0 ^ UInt64($1)) &* 1099511628211 } % 8 != 0
    }, overwrite: task.overwrite == true)
    precondition(looks <= 80, "\(looks) looks")
    if let resolved {
        precondition(resolved.hasPrefix(directory + "/") || explicit != nil, "\(resolved) outside \(directory)")
        precondition(!resolved.utf8.contains(0))
        _ = Destination.partialPath(for: resolved)
    }
}

/// The name and path functions: a server's or a URL's name made safe, the free-name search over names "taken"
/// as the input says, compound extensions, normalized paths.
func fuzzNames(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    // Checked by bytes, as the kernel reads a name: Swift's characters can join a "/" or "." with what follows.
    if let safe = ContentDisposition.sanitize(text) {
        precondition(!safe.utf8.contains(UInt8(ascii: "/")) && !safe.utf8.contains(0) && !safe.isEmpty
                     && safe.utf8.count <= 200 && safe.utf8.first != UInt8(ascii: "."), "\(safe)")
    }
    _ = ContentDisposition.filename(text)
    _ = FilePublisher.splitExtension(text)
    if (try? Destination.checkClientPath(text, field: "destination")) != nil {
        let normalized = Array(Destination.normalize(text).utf8)
        precondition(normalized.first == UInt8(ascii: "/"))
        precondition(!normalized.split(separator: UInt8(ascii: "/")).contains { $0.elementsEqual("..".utf8) },
                     "'..' left in a normalized path")
    }
    if let url = URL(string: "http://fuzz.invalid/" + text) { _ = Destination.suggestedName(for: url) }
    // Taken: every name whose number's low bits the input's bytes pick (the search must end whatever is taken).
    let seed = bytes.reduce(UInt64(1469598103934665603)) { ($0 ^ UInt64($1)) &* 1099511628211 }
    let name = "/nonexistent-fuzz-dir/" + (ContentDisposition.sanitize(text) ?? "f")
    var looks = 0
    let found = FilePublisher.availableName(for: name, isReserved: { path in
        looks += 1
        let hash = path.utf8.reduce(seed) { ($0 ^ UInt64($1)) &* 1099511628211 } // the same in every run
        return hash % 16 != 0 || path == name
    })
    precondition(looks <= 80, "\(looks) looks")
    if let found { precondition(found != name) }
}

/// A `tasks` table without column types, so a column holds whatever storage class the input gives it.
let rowsDatabase: DatabaseQueue = {
    let queue = try! DatabaseQueue()
    try! queue.write { db in try db.execute(sql: "CREATE TABLE tasks (\((["id"] + TaskRecord.columns).joined(separator: ", ")))") }
    return queue
}()

/// Journal rows as a hand-edited file may hold them: one line per column of `tasks` (then of `sessions`), each
/// `i<integer>`, `r<real>`, `t<text>` or `n` (NULL); columns the input does not reach keep a valid value. What
/// decodes must come out in range (`RowBounds`), and what the daemon computes of a row must not trap.
func fuzzRows(_ bytes: [UInt8]) {
    var lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).makeIterator()
    func value(_ fallback: DatabaseValueConvertible?) -> DatabaseValueConvertible? {
        guard let line = lines.next(), let tag = line.first else { return fallback }
        let rest = String(line.dropFirst())
        switch tag {
        case "i": return Int64(rest) ?? fallback
        case "r": return Double(rest) ?? fallback
        case "t": return rest
        case "n": return nil
        default: return fallback
        }
    }
    let valid: [String: DatabaseValueConvertible?] = [
        "session": "1/s", "kind": "download", "url": "http://h/f", "current_url": nil, "state": "queued",
        "phase": "transfer", "waiting_reason": nil, "next_attempt_at": nil, "destination": "/d/f", "location": nil,
        "partial_path": "/d/.f", "headers": "{}", "description": nil, "bytes_durable": 0, "bytes_expected": nil,
        "etag": nil, "last_modified": nil, "error": nil, "attempts": 0, "queue_order": 0, "created_at": 0.0,
        "updated_at": 0.0, "resource_deadline": nil, "priority": "normal", "checksum": nil, "bandwidth_limit": nil,
        "method": nil, "file": nil, "max_response_bytes": nil, "response": nil, "file_id": nil, "overwrite": 0,
        "durable_ranges": nil, "max_connections": nil, "earliest_begin_date": nil, "name_from_response": 0,
        "suggested_filename": nil, "credentials": nil,
    ]
    var columns: [String: DatabaseValueConvertible?] = ["id": value(1)]
    for name in TaskRecord.columns { columns[name] = value(valid[name] ?? nil) }
    let general = try? TaskRecord(row: Row(columns))
    // The same row stored in SQLite and read back by the restart's fast reader: in range too, and the same task.
    let stored = try? rowsDatabase.write { db -> (fast: TaskRecord?, general: TaskRecord?)? in
        try db.execute(sql: "DELETE FROM tasks")
        let names = ["id"] + TaskRecord.columns
        try db.execute(sql: "INSERT INTO tasks (\(names.joined(separator: ", "))) VALUES (\(names.map { _ in "?" }.joined(separator: ", ")))",
                       arguments: StatementArguments(names.map { columns[$0] ?? nil }))
        let statement = try db.makeStatement(sql: "SELECT * FROM tasks")
        let reader = TaskRowReader(statement)
        let rows = try Row.fetchCursor(statement)
        guard let row = try rows.next() else { return nil }
        return (reader?.record(), try? TaskRecord(row: row))
    }
    // (The stored row, not `general`'s: SQLite's text ends at a NUL that Swift's string holds.)
    if let fast = stored?.fast, let read = stored?.general, fast != read { // fatalError keeps its words in -O
        fatalError("the fast reader read \(fast), the general decoding \(read)")
    }
    for t in [general, stored?.fast, stored?.general].compactMap({ $0 }) {
        for time in [t.createdAt, t.updatedAt, t.nextAttemptAt, t.resourceDeadline, t.earliestBeginDate].compactMap({ $0 }) {
            precondition(RowBounds.times.contains(time), "time \(time)")
            _ = Timestamp.format(time)
        }
        for n in [t.bytesExpected, t.bandwidthLimit, t.maxResponseBytes, t.durableRanges.upperBound].compactMap({ $0 }) {
            precondition(n >= 0 && n <= HalfTunes.maxByteCount, "length \(n)")
        }
        precondition(RowBounds.queueOrders.contains(t.queueOrder) && RowBounds.counts.contains(t.attempts))
        _ = (t.queueOrder + 1, t.attempts + 1, t.durableRanges.count)
        _ = t.durableRanges.gaps(total: max(t.bytesExpected ?? 0, t.durableRanges.upperBound))
        _ = try? t.arguments()
    }
    let session: [String: DatabaseValueConvertible?] = [
        "identifier": value("1/s"), "uid": value(1), "configuration": value("{}"), "state": value("active"),
        "created_at": value(0.0), "acked_through": value(0), "launch": value(nil),
    ]
    if let s = try? SessionRecord(row: Row(session)) {
        precondition(RowBounds.times.contains(s.createdAt) && s.ackedThrough >= 0)
        let c = s.configuration
        _ = c.requestTimeout.map(Seconds.nanoseconds)
        _ = Backoff(c.retry).delay(failures: Int(Int32.max), retryAfter: 1e300, jitterSample: 0.5)
        if let launch = s.launch {
            _ = LaunchMachine.delay(failures: launch.failures)
            _ = launch.lastLaunchAt.map(Timestamp.format)
        }
    }
}

// libFuzzer's name for the entry: its FuzzerMain.o is linked in and refers to it (its `main` is not used).
nonisolated(unsafe) var selected: (([UInt8]) -> Void)?

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    selected?(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

// `halftunes-fuzz HARNESS ...`: the harness's name is taken off the arguments, the rest are libFuzzer's.
var arguments = CommandLine.arguments
guard arguments.count >= 2, let harness = harnesses[arguments[1]] else {
    FileHandle.standardError.write(Data("usage: halftunes-fuzz \(harnesses.keys.sorted().joined(separator: "|")) [libFuzzer flags] [corpus dirs]\n".utf8))
    exit(2)
}
selected = harness
arguments.remove(at: 1)
var cStrings = arguments.map { strdup($0) }
cStrings.append(nil)
var argc = Int32(arguments.count)
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = cStrings.withUnsafeMutableBufferPointer { buffer in
    let copy = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: buffer.count)
    copy.initialize(from: buffer.baseAddress!, count: buffer.count)
    return copy
}
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in testOneInput(data, size) })
