import Foundation
import HalfTunesProtocol
import Testing

/// Structured fuzzing of the request dispatcher through the live daemon: every method, with params whose
/// fields are real names given values of random types and shapes (wrong types, huge and negative numbers,
/// deep nesting, odd strings, nulls, unknown fields). Every request must be answered with its own id, by a
/// result or by one of the documented error codes: never an internal error, never silence, never a crash.
@Suite("Structured fuzzing of the dispatcher")
struct StructuredFuzzTests {
    /// The params fields of each method (the names the dispatcher decodes), plus a few it does not know.
    static let fields: [String: [String]] = [
        "daemon.status": [],
        "session.open": ["identifier", "configuration"],
        "session.list": [],
        "session.invalidate": ["identifier", "cancelTasks"],
        "task.create": ["session", "url", "destination", "headers", "description", "resumeData", "start", "checksum",
                        "priority", "bandwidthLimit", "kind", "method", "file", "maxResponseBytes"],
        "task.resume": ["id"], "task.suspend": ["id"], "task.cancel": ["id", "produceResumeData"], "task.get": ["id"],
        "task.list": ["session", "state"],
        "task.update": ["id", "priority", "bandwidthLimit"],
        "task.move": ["id", "to"],
        "daemon.setLimits": ["maxConcurrent", "maxConnectionsPerHost", "bandwidthLimit"],
        "events.ack": ["session", "through"],
        "events.subscribe": ["session", "after"],
    ]
    static let configurationFields = ["destinationDirectory", "headers", "requestTimeout", "resourceTimeout", "retry",
                                      "maxConcurrent", "allowInsecureRedirects"]
    static let retryFields = ["initialDelay", "maxDelay", "jitter", "maxRetryAfter", "maxAttempts"]
    /// Strings that are safe to hand a root daemon (no paths outside the test's directories, no real hosts).
    static let strings = ["", "fz", "fz2", "a b", "ünï", "..", ".", "x\u{0}y", "line\nbreak", "\r\n", "%00", "sha256:",
                          "sha256:" + String(repeating: "0", count: 64), "high", "normal", "low", "front", "back",
                          "upload", "data", "download", "GET", "PUT", "POST", "DELETE", "suspended", "queued", "exploded",
                          "http://127.0.0.1:9/f", "https://127.0.0.1:9/f", "ftp://127.0.0.1/x", "file:///etc/passwd",
                          "http://127.0.0.1:9/" + String(repeating: "p", count: 3000), "eyJ2IjoxfQ", "fz/../..",
                          String(repeating: "z", count: 300), "\u{202E}rtl", "0/fz", "65534/fz"]
    static let knownErrors: Set<Int> = Set(RPCErrorCode.allCases.map(\.rawValue)).subtracting([RPCErrorCode.internalError.rawValue])

    struct Generator {
        var rng: SplitMix64
        mutating func pick<T>(_ items: [T]) -> T { items[Int(rng.next() % UInt64(items.count))] }
        mutating func chance(_ inN: UInt64) -> Bool { rng.next() % inN == 0 }

        mutating func scalar() -> Any {
            switch rng.next() % 9 {
            case 0: return NSNull()
            case 1: return chance(2)
            case 2: return Int64(bitPattern: rng.next()) % 10
            case 3: return pick([Int64.max, Int64.min, -1, 0, 1, 1024, 16_777_217, 4_294_967_296] as [Int64])
            case 4: return pick([0.5, -0.0, 1e300, -1e-300, 3.14159, 86_400.5])
            case 5: return Decimal(string: "123456789012345678901234567890")! as NSDecimalNumber
            default: return pick(StructuredFuzzTests.strings)
            }
        }

        mutating func value(depth: Int = 0, keys: [String] = []) -> Any {
            switch rng.next() % (depth > 3 ? 2 : 5) {
            case 0, 1: return scalar()
            case 2: return (0..<Int(rng.next() % 4)).map { _ in value(depth: depth + 1) }
            case 3:
                let names = keys.isEmpty ? ["A", "x", "User-Agent", "Range"] : keys
                var object: [String: Any] = [:]
                for _ in 0..<Int(rng.next() % 4) { object[pick(names)] = value(depth: depth + 1) }
                return object
            default:
                var nested: Any = scalar()
                for _ in 0..<Int(rng.next() % 40) { nested = chance(2) ? [nested] : ["n": nested] }
                return nested
            }
        }

        /// Params for `method`: mostly its own fields with values that are sometimes right, sometimes not.
        mutating func params(for method: String) -> Any {
            if chance(25) { return value() } // not even an object, sometimes
            var object: [String: Any] = [:]
            for field in StructuredFuzzTests.fields[method] ?? [] where !chance(3) {
                switch field {
                case "configuration":
                    var c: [String: Any] = [:]
                    for f in StructuredFuzzTests.configurationFields where chance(2) {
                        c[f] = f == "retry" ? value(depth: 1, keys: StructuredFuzzTests.retryFields)
                            : f == "destinationDirectory" ? pick([NSNull(), "relative", "", 7] as [Any]) : value(depth: 1)
                    }
                    object[field] = chance(8) ? value() : c
                case "destination": object[field] = pick(["f1", "f 2", "", ".", "..", "x\u{0}", 5, NSNull()] as [Any])
                case "file": object[field] = pick(["/nonexistent/f", "relative", "/dev/null", "/proc/self/status", NSNull()] as [Any])
                case "identifier", "session": object[field] = chance(3) ? "fz" : value()
                case "id": object[field] = chance(2) ? Int64(rng.next() % 40) : value()
                default: object[field] = value(depth: 1)
                }
            }
            if chance(10) { object[pick(["verbose", "Session", "extra", "idd"])] = value() }
            return object
        }
    }

    @Test func everyMethodWithMutatedParamsIsAnsweredWithoutInternalErrors() async throws {
        try await withDaemon { daemon, origin in
            var g = Generator(rng: SplitMix64(seed: 0xF022_2026))
            let methods = Array(Self.fields.keys).sorted() + ["task.pause", "events.unsubscribe", ""]
            var socket = try RawSocket(path: daemon.socketPath)
            var answers: [Int: Int] = [:] // error code (0 = result) → count
            for i in 0..<2500 {
                var request: [String: Any] = ["jsonrpc": "2.0", "id": i, "method": g.pick(methods)]
                let params = g.params(for: request["method"] as! String)
                if !(g.chance(20)) { request["params"] = params }
                // The envelope too: a wrong version or a member a request does not have.
                if g.chance(15) { request[g.pick(["extra", "Params", "result"])] = g.value() }
                if g.chance(30) { request["jsonrpc"] = g.pick(["1.0", "2", 2.0, NSNull()] as [Any]) }
                let line = try JSONSerialization.data(withJSONObject: request) + Data("\n".utf8)
                try socket.send(Array(line))
                var answer: [String: Any]?
                while let object = try socket.readObject() {
                    if object["method"] as? String == "event" { continue } // a subscription's events
                    answer = object
                    break
                }
                let got = try #require(answer, "no answer to \(String(decoding: line, as: UTF8.self))")
                #expect(got["id"] as? Int == i, "answer to another request: \(got)")
                if let error = got["error"] as? [String: Any] {
                    let code = error["code"] as? Int ?? 0
                    #expect(Self.knownErrors.contains(code), "request \(String(decoding: line, as: UTF8.self)) got \(error)")
                    answers[code, default: 0] += 1
                } else {
                    #expect(got["result"] != nil, "neither result nor error: \(got)")
                    answers[0, default: 0] += 1
                }
                #expect(daemon.isRunning)
                if !daemon.isRunning { return }
                if i % 500 == 499 { socket = try RawSocket(path: daemon.socketPath) } // fresh subscription budget
            }
            // The generator reaches both sides of the dispatcher: results and most kinds of error.
            #expect((answers[0] ?? 0) > 100, "\(answers)")
            for code in [-32600, -32601, -32602, -32001, -32002] { #expect((answers[code] ?? 0) > 10, "code \(code): \(answers)") }
            _ = try daemon.client().status()
        }
    }
}
