import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// The running data tasks of one uid keep at most `QueuePlanner.maxDataBytesPerUID` of responses in memory
/// (each counted at its body cap): one more that might pass it waits queued (`uidDataMemory`) while the owner's
/// downloads, other users' data tasks and, once one ends, the next of its data tasks start.
@Suite("DaemonState: data-task memory per uid")
struct DataMemoryHoldTests {
    static let limits = DaemonState.SlotLimits(maxConcurrent: 100, maxConnectionsPerHost: 100)

    static func dataTask(_ id: Int64, session: String = "a", owner: UInt32 = 1, cap: Int64? = nil) -> ManagedTask {
        var t = DaemonStateTests.task(id, session: session, owner: owner, host: "127.0.0.1:\(9000 + id)")
        t.record.kind = TaskKind.data.rawValue
        t.record.maxResponseBytes = cap
        return t
    }

    @Test func aDataTaskPastItsOwnersBudgetWaitsAndTheRestGoesOn() throws {
        var state = DaemonStateTests.state()
        let full = (1...4).map { Self.dataTask(Int64($0)) } // 4 × 16 MiB: the budget
        #expect(try DaemonStateTests.resumeAll(&state, full, limits: Self.limits) == [1, 2, 3, 4])
        #expect(state.tasks.runningDataBytesByOwner[1] == QueuePlanner.maxDataBytesPerUID)

        // More than the scheduler looks at one by one, so the lanes are used: all held, in words.
        let waiting = (10..<30).map { Self.dataTask(Int64($0)) }
        _ = state.join(waiting, now: 1)
        for t in waiting { #expect(DaemonStateTests.started(state.handle(.task(t.id, .resume), now: 1)).isEmpty) }
        let held = try #require(state.tasks[10])
        let hold = try #require(state.hold(held, position: 1))
        #expect(hold.reason == "uidDataMemory" && hold.message.contains("64 MiB"), "\(hold)")

        // Behind them, a download of the same owner and another owner's data task start.
        var download = DaemonStateTests.task(40, session: "a", owner: 1, host: "127.0.0.1:8999")
        download.record.kind = TaskKind.download.rawValue
        let other = Self.dataTask(41, session: "b", owner: 2)
        _ = state.join([download, other], now: 2)
        #expect(DaemonStateTests.started(state.handle(.task(40, .resume), now: 2)) == [40])
        #expect(DaemonStateTests.started(state.handle(.task(41, .resume), now: 2)) == [41])

        // One data task of uid 1 is suspended: its body is in memory until its transfer has stopped; then the
        // first one waiting starts, and only it.
        #expect(DaemonStateTests.started(state.handle(.task(2, .suspend), now: 3)).isEmpty)
        let ended = state.handle(.attemptEnded(2, .stopped(durableBytes: 0), jitterSample: 0), now: 4)
        #expect(DaemonStateTests.started(ended) == [10])
        #expect(state.tasks[11]?.machine.state == .queued)
        #expect(state.tasks.runningDataBytesByOwner[1] == QueuePlanner.maxDataBytesPerUID)
    }

    /// Counted at their caps, many small data tasks run at once: as many as leave room for one of the largest.
    @Test func smallCapsLetManyRun() throws {
        var state = DaemonStateTests.state()
        let small = (1...60).map { Self.dataTask(Int64($0), cap: 1 << 20) }
        let started = try DaemonStateTests.resumeAll(&state, small, limits: Self.limits)
        #expect(started.count == 49, "49 MiB held, and 16 more would pass 64")
        #expect(state.tasks.runningDataBytesByOwner[1] == 49 << 20)
    }

    @Test func theRuleAsAPureFunction() {
        #expect(QueuePlanner.dataHold(data: false, held: 1 << 40) == nil)
        #expect(QueuePlanner.dataHold(data: true, held: 0) == nil, "an owner that runs none is never held")
        #expect(QueuePlanner.dataHold(data: true, held: 48 << 20) == nil)
        #expect(QueuePlanner.dataHold(data: true, held: (48 << 20) + 1) == .dataMemory(held: (48 << 20) + 1))
    }
}
