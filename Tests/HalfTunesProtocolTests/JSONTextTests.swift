import Testing
@testable import HalfTunesProtocol

/// Values written straight to JSON text give exactly the bytes `JSONWriter` writes for their `JSONValue` (which
/// JSONWriterTests hold equal to the Codable encoding), with the viewer's own session names unqualified.
@Suite("JSON text written directly")
struct JSONTextTests {
    var values = JSONValueConvertibleTests()

    static func text(_ value: some JSONTextWritable, unqualifying prefix: String? = nil) -> [UInt8] {
        var out: [UInt8] = []
        value.writeJSON(into: &out, unqualifying: prefix)
        return out
    }

    @Test mutating func everyTaskIsWrittenAsJSONWriterWritesIt() throws {
        for _ in 0..<600 {
            let info = values.info()
            #expect(Self.text(info) == (try JSONWriter.write(info.jsonValue)), "\(info)")
        }
        for count in [0, 1, 7] {
            for cursor in [nil, "42", "a\"b"] {
                let tasks = (0..<count).map { _ in values.info() }
                let page = TaskListText(items: tasks.map { .info($0) }, nextCursor: cursor)
                #expect(Self.text(page) == (try JSONWriter.write(TaskListResult(tasks: tasks, nextCursor: cursor).jsonValue)))
            }
        }
    }

    /// Only a session name that starts with the prefix loses it (another uid's, or one merely sharing digits,
    /// stays whole).
    @Test mutating func theViewersOwnSessionsAreUnqualified() throws {
        for (name, shown) in [("1000/music", "music"), ("1000/", ""), ("10000/music", "10000/music"),
                              ("0/music", "0/music"), ("music", "music"), ("1000/ä/\"", "ä/\"")] {
            var info = values.info()
            info.session = name
            var expected = info
            expected.session = shown
            #expect(Self.text(info, unqualifying: "1000/") == (try JSONWriter.write(expected.jsonValue)))
            #expect(Self.text(info) == (try JSONWriter.write(info.jsonValue)))
        }
    }

    /// A task's text made once writes the bytes the task writes, for root (the whole name), for its owner (the
    /// name unqualified) and for anyone else; a page of texts and tasks mixed is the page of the tasks.
    @Test mutating func aTextMadeOnceIsTheTaskForEveryViewer() throws {
        for _ in 0..<300 {
            var info = values.info()
            if Bool.random() { info.session = "1000/" + info.session }
            let text = TaskInfoText(info)
            #expect(text.session == info.session && text.state == info.state)
            for prefix in [nil, "1000/", "2000/"] {
                #expect(Self.text(text, unqualifying: prefix) == Self.text(info, unqualifying: prefix), "\(info)")
            }
        }
        for count in [0, 1, 7] {
            for cursor in [nil, "42", "a\"b"] {
                let tasks = (0..<count).map { i in
                    var info = values.info()
                    if i % 2 == 0 { info.session = "1000/" + info.session }
                    return info
                }
                let items: [TaskListText.Item] = tasks.map { Bool.random() ? .info($0) : .text(TaskInfoText($0)) }
                let page = TaskListText(items: items, nextCursor: cursor)
                let result = TaskListResult(tasks: tasks, nextCursor: cursor)
                var shown = result
                for i in shown.tasks.indices where shown.tasks[i].session.hasPrefix("1000/") {
                    shown.tasks[i].session = String(shown.tasks[i].session.dropFirst(5))
                }
                #expect(Self.text(page) == (try JSONWriter.write(result.jsonValue)))
                #expect(Self.text(page, unqualifying: "1000/") == (try JSONWriter.write(shown.jsonValue)))
                #expect(try JSONValue(encoding: page) == result.jsonValue)
                let decoded = try page.decoded()
                #expect(decoded.tasks == tasks && decoded.nextCursor == cursor)
            }
        }
    }

    /// Events (state changes straight to text, the others through their `JSONValue`) and their notification lines
    /// are the bytes `JSONWriter` writes, with the viewer's own session unqualified; so is a cancel's answer.
    @Test mutating func eventsTheirLinesAndCancelAnswersAreWrittenAsJSONWriterWritesThem() throws {
        for i in 0..<800 {
            var event = values.event()
            if i % 2 == 0 {
                let states = TaskState.allCases
                event.payload = .stateChanged(state: states[i / 2 % states.count],
                                              previous: i % 3 == 0 ? nil : states[i % states.count],
                                              reason: i % 5 == 0 ? values.error() : nil)
            }
            if i % 4 < 2 { event.session = "1000/" + event.session }
            #expect(Self.text(event) == (try JSONWriter.write(event.jsonValue)), "\(event)")
            for prefix in ["1000/", "2000/"] {
                var shown = event
                if event.session.hasPrefix(prefix) { shown.session = String(event.session.dropFirst(prefix.count)) }
                #expect(Self.text(event, unqualifying: prefix) == (try JSONWriter.write(shown.jsonValue)), "\(event)")
                let line = try RPCNotification(method: HalfTunes.eventNotification, params: shown.jsonValue).line()
                #expect(RPCNotification.eventLine(event, unqualifying: prefix) == line, "\(event)")
            }
            #expect(RPCNotification.eventLine(event, unqualifying: nil)
                    == (try RPCNotification(method: HalfTunes.eventNotification, params: event.jsonValue).line()))
        }
        for i in 0..<200 {
            var info = values.info()
            if i % 2 == 0 { info.session = "1000/" + info.session }
            let cancel = TaskCancelResult(task: info, resumeData: i % 3 == 0 ? nil : values.text())
            #expect(Self.text(cancel) == (try JSONWriter.write(cancel.jsonValue)))
            var shown = cancel
            if info.session.hasPrefix("1000/") { shown.task.session = String(info.session.dropFirst(5)) }
            #expect(Self.text(cancel, unqualifying: "1000/") == (try JSONWriter.write(shown.jsonValue)))
        }
    }

    @Test func integersAtTheirLimits() throws {
        for n: Int64 in [0, 7, -7, 10, 99, -100, 1_000_000_007, .max, .min, .max - 1, .min + 1] {
            var out: [UInt8] = []
            JSONText.int(n, &out)
            #expect(String(decoding: out, as: UTF8.self) == String(n))
        }
    }

    /// A response line with a result written to text is the line its `JSONValue` result gives, for every id.
    @Test mutating func aResponseLineIsTheSameEitherWay() throws {
        for id: RPCID? in [nil, .int(1), .int(-5), .string("x\"y")] {
            let tasks = (0..<3).map { _ in values.info() }
            let page = TaskListResult(tasks: tasks, nextCursor: "9")
            let direct = RPCResponse(id: id, resultText: TaskListText(items: tasks.map { .info($0) }, nextCursor: "9"))
            #expect(try direct.line() == RPCResponse(id: id, result: page.jsonValue).line())
            // Codable (a client's or a test's encoding) sees the same result.
            #expect(try JSONValue(encoding: direct) == JSONValue(encoding: RPCResponse(id: id, result: page.jsonValue)))
        }
    }
}
