import Foundation
import Testing
@testable import HalfTunesProtocol

/// The direct conversions are exactly what the Codable conformances (the definition of the wire format) give,
/// for every field present or absent: checked on random values of every type that has one.
@Suite("JSONValueConvertible")
struct JSONValueConvertibleTests {
    var rng = JSONParserTests.Generator(seed: 0x7A5C_1F0)

    mutating func maybe<T>(_ make: (inout Self) -> T) -> T? { rng.next(3) == 0 ? nil : make(&self) }
    mutating func text() -> String { ["", "plain", "with \"quotes\"/slash", "ünïcödé 🎵", "tab\tnl\n", "\u{1}"][rng.next(6)] }
    mutating func int() -> Int64 { [0, 1, -1, 65536, Int64.max, Int64(rng.next(1_000_000))][rng.next(6)] }

    mutating func error() -> TaskError {
        TaskError(code: text(), message: text(), httpStatus: maybe { $0.rng.next(600) })
    }

    mutating func response() -> TaskResponse {
        TaskResponse(status: rng.next(600), headers: maybe { me in (0..<me.rng.next(3)).map { _ in [me.text(), me.text()] } },
                     body: maybe { $0.text() }, bodyBytes: int(), truncated: rng.next(2) == 0)
    }

    mutating func info() -> TaskInfo {
        TaskInfo(id: int(), session: text(), kind: ["download", "upload", "data"][rng.next(3)], url: text(),
                 currentURL: maybe { $0.text() }, state: TaskState.allCases[rng.next(TaskState.allCases.count)],
                 waitingReason: maybe { $0.error() }, nextAttemptAt: maybe { $0.text() },
                 queuePosition: maybe { $0.rng.next(100) }, bytesReceived: int(), bytesDurable: int(),
                 bytesExpected: maybe { $0.int() }, destination: text(), location: maybe { $0.text() },
                 error: maybe { $0.error() }, createdAt: text(), updatedAt: text(), description: maybe { $0.text() },
                 etag: maybe { $0.text() }, lastModified: maybe { $0.text() }, attempts: rng.next(10),
                 priority: TaskPriority.allCases[rng.next(TaskPriority.allCases.count)],
                 hold: maybe { TaskHold(reason: $0.text(), message: $0.text()) }, checksum: maybe { $0.text() },
                 bandwidthLimit: maybe { $0.int() }, method: maybe { $0.text() }, file: maybe { $0.text() },
                 bytesSent: maybe { $0.int() }, bytesExpectedToSend: maybe { $0.int() },
                 response: maybe { $0.response() }, overwrite: maybe { $0.rng.next(2) == 0 },
                 phase: maybe { $0.rng.next(2) == 0 ? .verifying : .publishing })
    }

    mutating func event() -> Event {
        let payload: EventPayload
        switch rng.next(8) {
        case 0: payload = .stateChanged(state: .running, previous: maybe { _ in .queued }, reason: maybe { $0.error() })
        case 1: payload = .didWriteData(bytesWritten: int(), totalBytesWritten: int(), totalBytesExpectedToWrite: maybe { $0.int() })
        case 2: payload = .didResumeAtOffset(offset: int(), expectedTotalBytes: maybe { $0.int() },
                                             discardedBytes: maybe { $0.int() }, reason: maybe { $0.text() })
        case 3: payload = .didFinishDownloading(location: text())
        case 4: payload = .didSendBodyData(bytesSent: int(), totalBytesSent: int(), totalBytesExpectedToSend: maybe { $0.int() })
        case 5: payload = .didComplete(error: maybe { $0.error() }, response: maybe { $0.response() })
        case 6: payload = .didFinishEvents(through: int())
        default: payload = .didBecomeInvalid
        }
        return Event(seq: maybe { $0.int() }, session: text(), task: maybe { $0.int() }, time: text(), payload: payload)
    }

    @Test mutating func everyConversionEqualsTheCodableEncoding() throws {
        for _ in 0..<400 {
            let info = info()
            #expect(info.jsonValue == (try JSONValue(encoding: info)), "\(info)")
            let event = event()
            #expect(event.jsonValue == (try JSONValue(encoding: event)), "\(event)")
            // The journal's event column: the same bytes either way.
            #expect(try JSONWriter.write(event.jsonValue) == Array(WireCoding.encoder.encode(event)))
        }
        let page = TaskListResult(tasks: (0..<5).map { _ in info() }, nextCursor: "42")
        #expect(page.jsonValue == (try JSONValue(encoding: page)))
        #expect(TaskListResult(tasks: []).jsonValue == (try JSONValue(encoding: TaskListResult(tasks: []))))
        for resumeData in [nil, "abc"] {
            let cancel = TaskCancelResult(task: info(), resumeData: resumeData)
            #expect(cancel.jsonValue == (try JSONValue(encoding: cancel)))
        }
        #expect(try JSONValue.of(page) == page.jsonValue)
        for _ in 0..<200 {
            let p = TaskCreateParams(
                session: text(), url: maybe { $0.text() }, destination: maybe { $0.text() },
                headers: maybe { me in Dictionary((0..<me.rng.next(3)).map { _ in (me.text(), me.text()) }, uniquingKeysWith: { a, _ in a }) },
                description: maybe { $0.text() }, resumeData: maybe { $0.text() }, start: maybe { $0.rng.next(2) == 0 },
                kind: maybe { TaskKind.allCases[$0.rng.next(TaskKind.allCases.count)] }, checksum: maybe { $0.text() },
                priority: maybe { TaskPriority.allCases[$0.rng.next(TaskPriority.allCases.count)] },
                bandwidthLimit: maybe { $0.int() }, method: maybe { $0.text() }, file: maybe { $0.text() },
                maxResponseBytes: maybe { $0.int() }, overwrite: maybe { $0.rng.next(2) == 0 })
            #expect(p.jsonValue == (try JSONValue(encoding: p)), "\(p)")
            let cancel = TaskCancelParams(id: int(), produceResumeData: maybe { $0.rng.next(2) == 0 })
            #expect(cancel.jsonValue == (try JSONValue(encoding: cancel)))
            let id = TaskIDParams(id: int())
            #expect(id.jsonValue == (try JSONValue(encoding: id)))
        }
        let status = EventsAckResult(ackedThrough: 3, pruned: 2) // no direct conversion: through Codable
        #expect(try JSONValue.of(status) == JSONValue(encoding: status))
    }

    /// The direct reading of parameters agrees with JSONDecoder: the same value whenever it gives one, and none
    /// whenever JSONDecoder fails (so every error still comes from JSONDecoder, word for word).
    @Test mutating func directParameterDecodingAgreesWithJSONDecoder() throws {
        let fields = ["session", "url", "destination", "headers", "description", "resumeData", "start", "kind", "checksum",
                      "priority", "bandwidthLimit", "method", "file", "maxResponseBytes", "overwrite", "id", "extra"]
        var agreed = 0
        for _ in 0..<3000 {
            var members: [String: JSONValue] = [:]
            let wellFormed = rng.next(2) == 0 // every field of its own type, or anything at all
            for field in fields where rng.next(3) == 0 {
                if wellFormed {
                    switch field {
                    case "start", "overwrite": members[field] = .bool(rng.next(2) == 0)
                    case "bandwidthLimit", "maxResponseBytes", "id": members[field] = .int(int())
                    case "kind": members[field] = .string(["download", "upload", "data"][rng.next(3)])
                    case "priority": members[field] = .string(["high", "normal", "low"][rng.next(3)])
                    case "headers": members[field] = .object(["A": .string(text()), "b": .string("v")])
                    default: members[field] = rng.next(5) == 0 ? .null : .string(text())
                    }
                    continue
                }
                switch rng.next(9) {
                case 0: members[field] = .null
                case 1: members[field] = .string(text())
                case 2: members[field] = .int(int())
                case 3: members[field] = .bool(rng.next(2) == 0)
                case 4: members[field] = .double([1.0, 2.5, -0.0, 1e3][rng.next(4)])
                case 5: members[field] = .string(["download", "upload", "data", "high", "normal", "low", "bogus"][rng.next(7)])
                case 6: members[field] = .object(["A": .string(text()), "b": rng.next(4) == 0 ? .int(1) : .string("v")])
                case 7: members[field] = .array([.string(text())])
                default: members[field] = .object([:])
                }
            }
            if rng.next(2) == 0 { members["session"] = .string(text()) }
            let value = JSONValue.object(members)
            let slow = try? value.decode(TaskCreateParams.self)
            let fast = TaskCreateParams(jsonValue: value)
            if let fast {
                // A direct reading only where JSONDecoder reads the same (it may also accept more, e.g. 1.0 for
                // an integer: those take its path).
                #expect(slow != nil && fast.jsonValue == slow?.jsonValue, "\(value)")
                agreed += 1
            }
            if let fastID = TaskIDParams(jsonValue: value) {
                #expect(fastID.id == (try? value.decode(TaskIDParams.self))?.id, "\(value)")
            }
        }
        #expect(agreed > 500) // the usual shapes do take the direct path (985 of 3000 with this seed)
    }

    /// Random parameter objects over `fields`: every field of its own type (`wellFormed`), or anything at all.
    mutating func params(_ fields: [String: JSONValue]) -> JSONValue {
        var members: [String: JSONValue] = [:]
        let wellFormed = rng.next(2) == 0
        for (field, example) in fields where rng.next(3) != 0 {
            if wellFormed {
                members[field] = rng.next(6) == 0 ? .null : example
                continue
            }
            members[field] = [.null, .string(text()), .int(int()), .bool(rng.next(2) == 0), .double(2.5), .double(1.0),
                              .string("suspended"), .object([:]), .array([])][rng.next(9)]
        }
        if rng.next(4) == 0 { members["extra"] = .string(text()) }
        return .object(members)
    }

    /// task.list, task.cancel and events.ack parameters read directly agree with JSONDecoder wherever the direct
    /// reading answers, and it answers for the usual shapes.
    @Test mutating func listCancelAndAckParametersReadDirectlyAgreeWithJSONDecoder() throws {
        func agree<P: Codable & JSONValueParams>(_ type: P.Type, _ value: JSONValue) throws -> Bool {
            guard let fast = P(jsonValue: value) else { return false }
            let slow = try? value.decode(P.self)
            #expect(slow != nil, "\(value)")
            if let slow { #expect(try JSONValue(encoding: fast) == JSONValue(encoding: slow), "\(value)") }
            return true
        }
        var direct = [0, 0, 0]
        for _ in 0..<2000 {
            let list = params(["session": .string(text()), "state": .string(["queued", "completed", "bogus"][rng.next(3)]),
                               "limit": .int([1, 50, 1000, Int64.max][rng.next(4)]), "cursor": .string(text())])
            if try agree(TaskListParams.self, list) { direct[0] += 1 }
            let cancel = params(["id": .int(int()), "produceResumeData": .bool(rng.next(2) == 0)])
            if try agree(TaskCancelParams.self, cancel) { direct[1] += 1 }
            let ack = params(["session": .string(text()), "through": .int(int())])
            if try agree(EventsAckParams.self, ack) { direct[2] += 1 }
        }
        #expect(direct.allSatisfy { $0 > 300 }, "\(direct)")
    }

    /// A task error read directly agrees with JSONDecoder wherever the direct reading answers, and answers for
    /// the shapes the journal writes.
    @Test func taskErrorsReadDirectlyAgreeWithJSONDecoder() throws {
        let written = [TaskError(code: "canceled", message: "Canceled by the client"),
                       TaskError(code: "httpStatus", message: "404 Not Found", httpStatus: 404)]
        for error in written {
            #expect(TaskError(jsonValue: error.jsonValue) == error)
        }
        let odd: [JSONValue] = [
            .object(["code": .string("a"), "message": .string("b"), "httpStatus": .null]),
            .object(["code": .string("a"), "message": .string("b"), "httpStatus": .string("404")]),
            .object(["code": .string("a"), "message": .string("b"), "extra": .int(1)]),
            .object(["code": .string("a")]),
            .object(["code": .int(1), "message": .string("b")]),
            .object(["code": .string("a"), "message": .string("b"), "httpStatus": .int(Int64.max)]),
            .array([]),
        ]
        for value in odd {
            let slow = try? value.decode(TaskError.self)
            if let fast = TaskError(jsonValue: value) {
                #expect(slow == fast, "\(value)")
            }
        }
        #expect(TaskError(jsonValue: odd[0]) == TaskError(code: "a", message: "b"))
    }
}
