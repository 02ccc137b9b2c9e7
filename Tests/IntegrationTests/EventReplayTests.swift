import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Event replay and isolation")
struct EventReplayTests {
    @Test func aClientThatWasAwayGetsWhatItMissedAlsoAcrossRestart() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 300_000, seed: 30)
            origin.put("/away.bin", body)
            var client = try daemon.client()
            _ = try client.openSession("away")
            let t = try client.createTask(TaskCreateParams(session: "away", url: origin.url("/away.bin"), start: true))
            try client.waitFor(task: t.id, state: .completed)

            func replay() throws -> [Event] {
                let recorder = try EventRecorder(client: client, session: "away", after: 0)
                try recorder.wait(for: "didFinishEvents") { $0.isDidFinishEvents }
                recorder.close()
                return recorder.all
            }
            for round in 0..<2 {
                let events = try replay()
                let types = events.map(\.type)
                #expect(types.last == "didFinishEvents", "round \(round)")
                let location = events.compactMap(\.finishedLocation).first
                #expect(location == daemon.downloadsDir + "/away.bin")
                let complete = try #require(events.first { $0.isDidComplete })
                #expect(complete.completionError == .some(nil))
                let seqs = events.compactMap(\.seq)
                #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
                #expect(types.firstIndex(of: "didFinishDownloading")! < types.firstIndex(of: "didComplete")!)
                if round == 0 {
                    #expect(try daemon.terminate().status == 0)
                    try daemon.restart()
                    client = try daemon.client()
                }
            }
            // Acknowledged events are pruned and not replayed again.
            let last = try client.session("away").lastEventSeq
            let ack = try client.ack(session: "away", through: last)
            #expect(ack.pruned > 0)
            let after = try replay()
            #expect(after.map(\.type) == ["didFinishEvents"])
        }
    }

    @Test func liveEventsFollowTheReplayInOrder() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/live.bin", TestOrigin.randomBytes(count: 3 * MiB, seed: 31))
            origin.setBehavior("/live.bin", .throttled(2 * MiB))
            let client = try daemon.client()
            _ = try client.openSession("live")
            let recorder = try EventRecorder(client: client, session: "live", after: 0)
            try recorder.wait(for: "didFinishEvents") { $0.isDidFinishEvents }
            let t = try client.createTask(TaskCreateParams(session: "live", url: origin.url("/live.bin"), start: true))
            try recorder.wait(for: "didComplete") { $0.task == t.id && $0.isDidComplete }
            let types = recorder.all.map(\.type)
            #expect(types.first == "didFinishEvents")
            #expect(types.contains("didWriteData"))
            let states = recorder.all.compactMap { e -> TaskState? in
                if case .stateChanged(let s, _, _) = e.payload { return s } else { return nil }
            }
            #expect(states == [.suspended, .queued, .running, .completed])
            let progress = recorder.all.compactMap { e -> Int64? in
                if case .didWriteData(_, let total, _) = e.payload { return total } else { return nil }
            }
            #expect(progress == progress.sorted())
        }
    }

    @Test func twoSessionsDoNotSeeEachOthersEvents() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/one", TestOrigin.randomBytes(count: 1000, seed: 32))
            origin.put("/two", TestOrigin.randomBytes(count: 1000, seed: 33))
            let client = try daemon.client()
            _ = try client.openSession("one")
            _ = try client.openSession("two")
            let r1 = try EventRecorder(client: client, session: "one", after: 0)
            let r2 = try EventRecorder(client: client, session: "two", after: 0)
            let t1 = try client.createTask(TaskCreateParams(session: "one", url: origin.url("/one"), start: true))
            let t2 = try client.createTask(TaskCreateParams(session: "two", url: origin.url("/two"), start: true))
            try r1.wait(for: "one done") { $0.task == t1.id && $0.isDidComplete }
            try r2.wait(for: "two done") { $0.task == t2.id && $0.isDidComplete }
            #expect(r1.all.allSatisfy { $0.session == "one" && ($0.task == nil || $0.task == t1.id) })
            #expect(r2.all.allSatisfy { $0.session == "two" && ($0.task == nil || $0.task == t2.id) })
            let replay2 = try EventRecorder(client: client, session: "two", after: 0)
            try replay2.wait(for: "replay") { $0.isDidFinishEvents }
            #expect(replay2.all.allSatisfy { $0.session == "two" })
        }
    }

    /// Events journaled while a subscriber's replay is under way (the replay reads its pages off the core, and
    /// pauses while the client lags behind a small output limit) reach it exactly once, in order: every seq from
    /// 1 to the last, no gap and no duplicate, whether the replay or the live stream carried it.
    @Test func eventsJournaledDuringAReplayArriveOnceInOrder() async throws {
        try await withDaemon(["--max-pending-output", "65536"]) { daemon, origin in
            let client = try daemon.client()
            _ = try client.openSession("busy")
            for i in 0..<300 {
                let t = try client.createTask(TaskCreateParams(session: "busy", url: "http://127.0.0.1:9/a\(i)", destination: "a\(i)"))
                _ = try client.cancel(t.id)
            }
            let writer = try daemon.client()
            let more = Task.detached {
                for i in 0..<150 {
                    let t = try writer.createTask(TaskCreateParams(session: "busy", url: "http://127.0.0.1:9/b\(i)", destination: "b\(i)"))
                    _ = try writer.cancel(t.id)
                }
            }
            let recorder = try EventRecorder(client: client, session: "busy", after: 0)
            try await more.value
            let last = try client.session("busy").lastEventSeq
            _ = try recorder.wait(for: "the last event") { $0.seq == last }
            let seqs = recorder.all.compactMap(\.seq)
            #expect(seqs == Array(1...last), "\(seqs.count) events for seqs 1...\(last)")
            #expect(recorder.all.filter(\.isDidFinishEvents).count == 1)
        }
    }
}
