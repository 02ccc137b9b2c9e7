// When a connection's reading pauses and resumes, alone and with the other connections of its uid.
import Testing
@testable import HalfTunesDaemon

@Suite("Read backlog")
struct ReadBacklogTests {
    @Test func aConnectionPausesAtItsOwnLimitsAndResumesBelowThem() {
        var b = ReadBacklog()
        for _ in 0..<(ReadBacklog.maxQueuedRequests - 1) { let r1 = b.read(10, charged: false, uidFull: false); #expect(!r1) }
        let r2 = b.read(10, charged: false, uidFull: false)
        #expect(r2, "the 64th request pauses reading")
        let r3 = b.read(10, charged: false, uidFull: false)
        #expect(!r3, "already paused")
        var resumed = 0
        while b.queued > 0 { if b.answered(10, released: 0, uidFull: false) { resumed += 1 } }
        #expect(resumed == 1)
        #expect(!b.paused)

        var big = ReadBacklog()
        let r4 = big.read(3 << 20, charged: false, uidFull: false)
        #expect(!r4)
        let r5 = big.read(1 << 20, charged: false, uidFull: false)
        #expect(r5, "4 MiB pause it")
        let r6 = big.answered(3 << 20, released: 0, uidFull: false)
        #expect(r6, "1 MiB left: under half of 4 MiB")
    }

    @Test func aFullUIDPausesOnlyAConnectionWithRequestsOfItsOwn() {
        var b = ReadBacklog()
        let r7 = b.read(100, charged: true, uidFull: true)
        #expect(r7, "one request waiting and the uid full: paused")
        // Its only request answered: it resumes however full the uid still is, so it is never held by others.
        let r8 = b.answered(100, released: b.release(for: 100), uidFull: true)
        #expect(r8)
        #expect(b.charged == 0)

        var c = ReadBacklog()
        _ = c.read(100, charged: true, uidFull: false)
        let r9 = c.read(100, charged: true, uidFull: true)
        #expect(r9)
        let r10 = c.answered(100, released: 100, uidFull: true)
        #expect(!r10, "the uid still full and one of its own waiting")
        let r11 = c.answered(100, released: 100, uidFull: true)
        #expect(r11, "nothing of its own waiting")
    }

    @Test func whatIsGivenBackNeverExceedsWhatWasCharged() {
        var b = ReadBacklog()
        _ = b.read(500, charged: false, uidFull: false) // read before the peer was known
        _ = b.read(300, charged: true, uidFull: false)
        #expect(b.release(for: 500) == 300)
        _ = b.answered(500, released: 300, uidFull: false)
        #expect(b.release(for: 300) == 0)
        var c = ReadBacklog()
        _ = c.read(700, charged: true, uidFull: false)
        let r12 = c.close()
        #expect(r12 == 700)
        #expect(!c.charges, "a closed connection charges nothing more")
        let r13 = c.close()
        #expect(r13 == 0)
    }

    /// 64 connections of one uid pipelining 1 KiB lines that are never answered: reading stops for all of them
    /// near the uid's budget (each may read the line that crosses it), not at 64 × 4 MiB.
    @Test func theConnectionsOfOneUIDTogetherStayNearItsBudget() {
        let input = UIDInput(maxPerUID: 1 << 20)
        var connections = Array(repeating: ReadBacklog(), count: 64)
        var reading = Set(0..<64)
        var rounds = 0
        while !reading.isEmpty, rounds < 100_000 {
            rounds += 1
            for i in reading.sorted() where connections[i].read(1024, charged: true, uidFull: input.charge(7, 1024)) {
                reading.remove(i)
            }
        }
        #expect(reading.isEmpty)
        #expect(input.held(7) <= (1 << 20) + 64 * 1024)
        // A connection whose requests are all answered resumes (its share given back) whatever the others hold;
        // once the uid is under its budget, the others resume at their next answer.
        var next = 0
        while input.held(7) >= 1 << 20 {
            var resumed = false
            while connections[next].queued > 0 {
                let released = connections[next].release(for: 1024)
                resumed = connections[next].answered(1024, released: released, uidFull: input.release(7, released)) || resumed
            }
            #expect(resumed)
            next += 1
        }
        #expect(next > 1, "the first connection alone did not bring the uid under its budget")
        var resumedWith: Int?
        while resumedWith == nil, connections[next].queued > 0 {
            let released = connections[next].release(for: 1024)
            if connections[next].answered(1024, released: released, uidFull: input.release(7, released)) {
                resumedWith = connections[next].queued
            }
        }
        #expect(resumedWith == ReadBacklog.resumeBelow - 1, "resumed below its own mark, not only when empty")
    }
}
