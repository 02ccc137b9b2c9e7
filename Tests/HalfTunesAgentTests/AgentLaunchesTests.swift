// The agent's bookkeeping without a bus or a daemon: which unit is started, and which request each report answers.
import HalfTunesAgent
import Testing

@Suite("The agent's launches")
struct AgentLaunchesTests {
    @Test func aRequestIsStartedWatchedAndReported() {
        var m = AgentLaunches()
        _ = m.handle(.connected)
        #expect(m.handle(.asked(session: "s", unit: "u.service")) == [.start(unit: "u.service")])
        #expect(m.handle(.startAnswered(unit: "u.service", error: nil))
                == [.watch(unit: "u.service"), .reportStarted(session: "s", unit: "u.service", error: nil)])
        #expect(m.handle(.ended(unit: "u.service", result: "success", exitStatus: 0))
                == [.reportEnded(session: "s", unit: "u.service", result: "success", exitStatus: 0)])
        #expect(m.activeUnits.isEmpty)
        // Asked again later: started again.
        #expect(m.handle(.asked(session: "s", unit: "u.service")) == [.start(unit: "u.service")])
    }

    @Test func aStartThatFailsIsReportedAndForgotten() {
        var m = AgentLaunches()
        _ = m.handle(.asked(session: "s", unit: "missing.service"))
        #expect(m.handle(.startAnswered(unit: "missing.service", error: "Unit missing.service not found."))
                == [.reportStarted(session: "s", unit: "missing.service", error: "Unit missing.service not found.")])
        #expect(m.activeUnits.isEmpty)
        #expect(m.handle(.ended(unit: "missing.service", result: "success", exitStatus: 0)).isEmpty)
    }

    /// Two sessions naming one unit, or the same request twice: one start, and each session gets its reports.
    @Test func oneUnitIsStartedOnceForEveryRequestOfIt() {
        var m = AgentLaunches()
        #expect(m.handle(.asked(session: "a", unit: "app.service")) == [.start(unit: "app.service")])
        #expect(m.handle(.asked(session: "b", unit: "app.service")).isEmpty, "starting: it joins")
        #expect(m.handle(.asked(session: "a", unit: "app.service")).isEmpty, "the same request twice")
        #expect(m.handle(.startAnswered(unit: "app.service", error: nil)) == [
            .watch(unit: "app.service"),
            .reportStarted(session: "a", unit: "app.service", error: nil),
            .reportStarted(session: "b", unit: "app.service", error: nil),
        ])
        #expect(m.handle(.asked(session: "c", unit: "app.service"))
                == [.start(unit: "app.service"), .reportStarted(session: "c", unit: "app.service", error: nil)],
                "running: answered at once (and nudged, in case it is just stopping)")
        #expect(m.handle(.startAnswered(unit: "app.service", error: "ignored")).isEmpty, "the nudge's answer changes nothing")
        #expect(m.handle(.ended(unit: "app.service", result: "exit-code", exitStatus: 1)) == ["a", "b", "c"].map {
            .reportEnded(session: $0, unit: "app.service", result: "exit-code", exitStatus: 1)
        })
    }

    /// A reconnection: what the old connection asked is not reported on the new one; a unit still running is only
    /// watched when asked again; one that ended meanwhile is forgotten, so a new request starts it again.
    @Test func aReconnectionReportsOnlyWhatTheNewConnectionAsked() {
        var m = AgentLaunches()
        _ = m.handle(.asked(session: "s", unit: "run.service"))
        _ = m.handle(.startAnswered(unit: "run.service", error: nil))
        _ = m.handle(.asked(session: "t", unit: "gone.service"))
        _ = m.handle(.startAnswered(unit: "gone.service", error: nil))
        _ = m.handle(.asked(session: "p", unit: "slow.service"))
        #expect(m.handle(.connected).isEmpty)
        #expect(m.handle(.ended(unit: "gone.service", result: "success", exitStatus: 0)).isEmpty, "asked on the old connection")
        #expect(m.handle(.startAnswered(unit: "slow.service", error: nil)) == [.watch(unit: "slow.service")],
                "watched, not reported to the new connection")
        #expect(m.handle(.asked(session: "s", unit: "run.service"))
                == [.start(unit: "run.service"), .reportStarted(session: "s", unit: "run.service", error: nil)],
                "still running: joined, not a second run")
        #expect(m.handle(.asked(session: "t", unit: "gone.service")) == [.start(unit: "gone.service")])
        #expect(m.handle(.ended(unit: "run.service", result: "success", exitStatus: 0))
                == [.reportEnded(session: "s", unit: "run.service", result: "success", exitStatus: 0)])
        #expect(m.activeUnits == ["gone.service", "slow.service"])
    }
}
