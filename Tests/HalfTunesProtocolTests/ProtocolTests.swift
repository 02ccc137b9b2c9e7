import Foundation
import HalfTunesProtocol
import Testing

@Suite("Wire protocol")
struct ProtocolTests {
    func json(_ value: some Encodable) throws -> [String: Any] {
        let data = try WireCoding.encoder.encode(value)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test func responseAlwaysCarriesIdAndExactlyOneOfResultOrError() throws {
        let ok = try json(RPCResponse(id: .int(7), result: .object(["a": .int(1)])))
        #expect(ok["jsonrpc"] as? String == "2.0")
        #expect(ok["id"] as? Int == 7)
        #expect(ok["result"] != nil && ok["error"] == nil)
        let failed = try json(RPCResponse(id: nil, error: .parse("bad")))
        #expect(failed["id"] is NSNull)
        #expect(failed["result"] == nil)
        let error = try #require(failed["error"] as? [String: Any])
        #expect(error["code"] as? Int == -32700)
    }

    @Test func errorCodesAreStable() {
        #expect(RPCErrorCode.parseError.rawValue == -32700)
        #expect(RPCErrorCode.invalidRequest.rawValue == -32600)
        #expect(RPCErrorCode.methodNotFound.rawValue == -32601)
        #expect(RPCErrorCode.invalidParams.rawValue == -32602)
        #expect(RPCErrorCode.unknownSession.rawValue == -32001)
        #expect(RPCErrorCode.unknownTask.rawValue == -32002)
        #expect(RPCErrorCode.illegalStateChange.rawValue == -32003)
        #expect(Set(RPCErrorCode.allCases.map(\.rawValue)).count == RPCErrorCode.allCases.count)
        #expect(Set(RPCErrorCode.allCases.map(\.name)).count == RPCErrorCode.allCases.count)
    }

    @Test func illegalStateChangeNamesTaskAndState() {
        let e = RPCError.illegalStateChange(task: 7, from: .completed, action: "resume")
        #expect(e.code == -32003)
        #expect(e.message == "Cannot resume task 7: it is completed")
        #expect(e.data == .object(["task": .int(7), "state": .string("completed")]))
    }

    @Test func taskInfoAlwaysHasBytesExpectedAndError() throws {
        let info = TaskInfo(id: 1, session: "s", url: "http://h/f", state: .queued, bytesReceived: 0, bytesDurable: 0,
                            bytesExpected: nil, destination: "/d/f", error: nil, createdAt: "t", updatedAt: "t",
                            description: nil)
        let obj = try json(info)
        #expect(obj["bytesExpected"] is NSNull)
        #expect(obj["error"] is NSNull)
        #expect(obj["description"] is NSNull)
        #expect(obj["state"] as? String == "queued")
        let back = try WireCoding.decoder.decode(TaskInfo.self, from: WireCoding.encoder.encode(info))
        #expect(back == info)
    }

    @Test(arguments: [
        EventPayload.stateChanged(state: .waiting, previous: .running,
                                  reason: TaskError(code: "connectionLost", message: "dropped")),
        .didWriteData(bytesWritten: 10, totalBytesWritten: 100, totalBytesExpectedToWrite: nil),
        .didWriteData(bytesWritten: 10, totalBytesWritten: 100, totalBytesExpectedToWrite: 1000),
        .didResumeAtOffset(offset: 0, expectedTotalBytes: 5, discardedBytes: 3, reason: "resourceChanged"),
        .didResumeAtOffset(offset: 40, expectedTotalBytes: nil, discardedBytes: nil, reason: nil),
        .didFinishDownloading(location: "/tmp/x"),
        .didComplete(error: nil),
        .didComplete(error: TaskError(code: "httpStatus", message: "HTTP 404", httpStatus: 404)),
        .didFinishEvents(through: 12),
        .didBecomeInvalid,
    ])
    func eventsRoundTrip(payload: EventPayload) throws {
        let event = Event(seq: payload.isJournaled ? 3 : nil, session: "s", task: 9, time: "t", payload: payload)
        let back = try WireCoding.decoder.decode(Event.self, from: WireCoding.encoder.encode(event))
        #expect(back == event)
        let obj = try json(event)
        #expect(obj["type"] as? String == payload.type)
        #expect(obj.keys.contains("seq"))
    }

    @Test func successfulCompletionHasExplicitNullError() throws {
        let obj = try json(Event(seq: 1, session: "s", task: 1, time: "t", payload: .didComplete(error: nil)))
        #expect(obj["error"] is NSNull)
        let progress = try json(Event(seq: nil, session: "s", task: 1, time: "t",
                                      payload: .didWriteData(bytesWritten: 1, totalBytesWritten: 1, totalBytesExpectedToWrite: nil)))
        #expect(progress["totalBytesExpectedToWrite"] as? Int == -1)
        #expect(progress["seq"] is NSNull)
    }

    @Test func incomingLinesAreClassified() throws {
        let note = Array(#"{"jsonrpc":"2.0","method":"event","params":{"a":1}}"#.utf8)
        guard case .notification(let n) = try RPCIncoming.decode(note) else { Issue.record("not a notification"); return }
        #expect(n.method == "event")
        let resp = Array(#"{"jsonrpc":"2.0","id":"x","result":null}"#.utf8)
        guard case .response(let r) = try RPCIncoming.decode(resp) else { Issue.record("not a response"); return }
        #expect(r.id == .string("x"))
        #expect(r.result == .null)
        #expect(r.error == nil)
    }

    @Test func jsonValueKeepsLargeIntegersExact() throws {
        let big = Int64(9_007_199_254_740_993)
        let v = try WireCoding.decoder.decode(JSONValue.self, from: Data("{\"n\":\(big)}".utf8))
        #expect(v["n"] == .int(big))
    }

    @Test func timestampsAreRFC3339UTC() {
        #expect(Timestamp.format(0) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp.format(1_795_000_000.25) == "2026-11-18T11:06:40.250Z")
        #expect(Timestamp.format(1_795_000_000.9999) == "2026-11-18T11:06:40.999Z")
        #expect(Timestamp.format(951_782_400.001) == "2000-02-29T00:00:00.001Z")
        #expect(Timestamp.format(253_402_300_799.5) == "9999-12-31T23:59:59.500Z")
        // Past year 9999 (or not a time at all): the nearest end of the range RFC 3339 writes.
        #expect(Timestamp.format(253_402_300_800) == "9999-12-31T23:59:59.999Z")
        #expect(Timestamp.format(1e300) == "9999-12-31T23:59:59.999Z")
        #expect(Timestamp.format(-1e300) == "0001-01-01T00:00:00.000Z")
    }
}
