// Relaunching a session's client in virtual time, and systemd unit names.
import HalfTunesCore
import HalfTunesJournal
import Testing
@testable import HalfTunesDaemon

@Suite struct LaunchMachineTests {
    typealias M = LaunchMachine

    /// Unattended events start the unit once; it runs until it ends; a client that acknowledged everything
    /// leaves the machine idle with no failure, and nothing starts for acknowledged events.
    @Test func startOnceThenAcknowledged() {
        var m = M()
        #expect(m.handle(.unattended, now: 100) == [.journal, .start])
        #expect(m.phase == .starting && m.record.lastLaunchAt == 100 && m.record.lastResult == "starting")
        #expect(m.handle(.unattended, now: 101) == [], "not while it starts")
        #expect(m.handle(.startAnswered(error: nil), now: 101) == [.journal, .watch])
        #expect(m.handle(.unattended, now: 102) == [], "not while it runs")
        #expect(m.handle(.acknowledged(all: true), now: 103) == [])
        #expect(m.handle(.unitEnded(result: "success", exitStatus: 0, pending: false, subscribed: false), now: 104) == [.journal])
        #expect(m.phase == .idle && m.record.lastResult == "acknowledged" && m.record.failures == 0)
        #expect(m.record.nextAttemptAt == nil)
    }

    /// Another user's session with no agent connected: the start waits (journaled, no failure, no backoff) until
    /// an agent registers; an agent lost before it answered is a failed start (backed off), one lost while the unit
    /// runs puts it back to waiting; a waiting launch whose events were acknowledged meanwhile starts nothing; a
    /// restart forgets the waiting (it is decided anew).
    @Test func waitingForTheUsersAgent() {
        var m = M()
        #expect(m.handle(.unattended, now: 100) == [.journal, .start])
        #expect(m.handle(.agentMissing, now: 100) == [.journal])
        #expect(m.phase == .waitingForAgent && m.record.lastResult == M.waitingForAgent && m.record.failures == 0)
        #expect(m.record.nextAttemptAt == nil)
        #expect(m.handle(.unattended, now: 101) == [] && m.handle(.due(pending: true, subscribed: false), now: 101) == [])
        #expect(m.handle(.agentAvailable(pending: true), now: 102) == [.journal, .start])
        #expect(m.phase == .starting && m.record.lastLaunchAt == 102)
        #expect(m.handle(.agentLost, now: 103) == [.journal] && m.phase == .backoff, "gone before it answered")
        #expect(m.record.failures == 1 && m.record.lastResult == "startFailed" && m.record.nextAttemptAt == 113)
        #expect(m.handle(.due(pending: true, subscribed: false), now: 113) == [.journal, .start])
        _ = m.handle(.agentMissing, now: 113)
        #expect(m.phase == .waitingForAgent)
        _ = m.handle(.agentAvailable(pending: true), now: 114)
        _ = m.handle(.startAnswered(error: nil), now: 114)
        #expect(m.handle(.agentLost, now: 115) == [.journal] && m.phase == .waitingForAgent, "lost while running")
        #expect(M(record: m.record).phase == .idle && M(record: m.record).record.lastResult == "unknown")
        #expect(m.handle(.agentAvailable(pending: false), now: 116) == [.journal])
        #expect(m.phase == .idle && m.record.lastResult == "acknowledged")
        #expect(m.handle(.agentMissing, now: 117) == [] && m.handle(.agentLost, now: 117) == [], "nothing to wait for")
        _ = m.handle(.unattended, now: 118)
        _ = m.handle(.agentMissing, now: 118)
        #expect(m.handle(.acknowledged(all: false), now: 119) == [] && m.phase == .waitingForAgent)
        #expect(m.handle(.acknowledged(all: true), now: 120) == [.journal], "the client came by itself")
        #expect(m.phase == .idle && m.record.lastResult == "acknowledged")
    }

    /// A client that exits 1 without acknowledging counts as a failure: started again after 10 s, then 20 s,
    /// … up to an hour; never while a client is subscribed; acknowledging resets the count.
    @Test func failuresBackOffFromTenSecondsToAnHour() {
        var m = M()
        _ = m.handle(.unattended, now: 0)
        _ = m.handle(.startAnswered(error: nil), now: 0)
        #expect(m.handle(.unitEnded(result: "exit-code", exitStatus: 1, pending: true, subscribed: false), now: 5) == [.journal])
        #expect(m.phase == .backoff && m.record.failures == 1 && m.record.nextAttemptAt == 15)
        #expect(m.record.lastResult == "failed" && m.record.lastMessage == "result exit-code, exit status 1")
        #expect(m.handle(.unattended, now: 6) == [], "a new event does not shorten the backoff")
        #expect(m.handle(.due(pending: true, subscribed: false), now: 14.9) == [])
        #expect(m.handle(.due(pending: true, subscribed: false), now: 15) == [.journal, .start])
        #expect(m.handle(.startAnswered(error: "Unit x.service not found."), now: 15) == [.journal])
        #expect(m.record.lastResult == "startFailed" && m.record.nextAttemptAt == 35 && m.record.failures == 2)
        #expect(M.delay(failures: 3) == 40 && M.delay(failures: 9) == 2560 && M.delay(failures: 10) == 3600)
        #expect(M.delay(failures: 500) == 3600)
        // Due while a client is subscribed: nothing starts (it gets the events).
        #expect(m.handle(.due(pending: true, subscribed: true), now: 40) == [.journal])
        #expect(m.phase == .idle && m.record.nextAttemptAt == nil && m.record.failures == 2)
        #expect(m.handle(.acknowledged(all: true), now: 41) == [.journal])
        #expect(m.record.failures == 0)
    }

    /// A unit that exits 0 without acknowledging is a failure too; one that acknowledged some events while newer
    /// ones came is started again at once, without a failure; a unit that ends while another client is
    /// subscribed leaves the events to that client.
    @Test func endsWithEventsLeft() {
        var a = M()
        _ = a.handle(.unattended, now: 0)
        _ = a.handle(.startAnswered(error: nil), now: 0)
        _ = a.handle(.unitEnded(result: "success", exitStatus: 0, pending: true, subscribed: false), now: 1)
        #expect(a.record.lastResult == "exitedWithoutAcknowledging" && a.phase == .backoff)

        var b = M()
        _ = b.handle(.unattended, now: 0)
        _ = b.handle(.startAnswered(error: nil), now: 0)
        _ = b.handle(.acknowledged(all: true), now: 1)
        #expect(b.handle(.unitEnded(result: "success", exitStatus: 0, pending: true, subscribed: false), now: 2) == [.journal, .journal, .start])
        #expect(b.record.failures == 0 && b.phase == .starting)

        var c = M()
        _ = c.handle(.unattended, now: 0)
        _ = c.handle(.startAnswered(error: nil), now: 0)
        #expect(c.handle(.unitEnded(result: "success", exitStatus: 0, pending: true, subscribed: true), now: 2) == [.journal])
        #expect(c.phase == .idle && c.record.failures == 0)
    }

    /// After a restart: a start that was due stays due (at once if its time passed); whatever ran before is
    /// not watched any more and reads "unknown".
    @Test func restoredFromTheJournal() {
        var due = M(record: SessionLaunchRecord(lastLaunchAt: 1, lastResult: "failed", nextAttemptAt: 50, failures: 3))
        #expect(due.phase == .backoff)
        #expect(due.handle(.unattended, now: 10) == [])
        #expect(due.handle(.due(pending: true, subscribed: false), now: 60) == [.journal, .start])
        let running = M(record: SessionLaunchRecord(lastLaunchAt: 1, lastResult: "running"))
        #expect(running.phase == .idle && running.record.lastResult == "unknown")
    }

    @Test func unitNames() {
        #expect(UnitName.problem("app-events.service") == nil)
        #expect(UnitName.problem("app-events@.service") == nil)
        #expect(UnitName.problem("app@fixed.service") == nil)
        for bad in ["app-events", ".service", "@.service", "a@b@.service", "app events.service", "app/x.service",
                    "app.socket", "ünit.service", String(repeating: "a", count: 250) + ".service"] {
            #expect(UnitName.problem(bad) != nil, "\(bad)")
        }
        #expect(UnitName.escape("com.example.app") == "com.example.app")
        #expect(UnitName.escape("my-app@home+1") == "my\\x2dapp\\x40home\\x2b1")
        #expect(UnitName.escape(".hidden/x") == "\\x2ehidden-x")
        #expect(UnitName.resolve("probe@.service", session: "a-b") == "probe@a\\x2db.service")
        #expect(UnitName.resolve("fixed.service", session: "a-b") == "fixed.service")
    }
}
