// The agent's notifications in virtual time: bursts grouped by the window, what each post says, what actions do.
import HalfTunesSystemd
import HalfTunesProtocol
import Testing

@Suite("The agent's notifications")
struct AgentNotificationsTests {
    func done(_ id: Int64, _ name: String, state: TaskState = .completed, seconds: Double = 3) -> AgentNotice {
        AgentNotice(session: "s", task: id, kind: .download, state: state, name: name,
                    location: state == .completed ? "/home/u/Downloads/\(name)" : nil,
                    bytes: state == .completed ? 2_400_000 : nil, seconds: seconds, error: state == .failed ? "HTTP 404" : nil)
    }

    func posts(_ effects: [AgentNotifications.Effect]) -> [AgentNotifications.Post] {
        effects.compactMap { if case .post(let p) = $0 { p } else { nil } }
    }

    @Test func oneDownloadIsPostedAfterTheWindowWithItsActions() {
        var n = AgentNotifications(window: 2)
        #expect(n.received(done(1, "thesis.pdf"), now: 100).isEmpty)
        #expect(n.tick(now: 101.9).isEmpty)
        let post = try! #require(posts(n.tick(now: 102)).first)
        #expect(post.summary == "Download completed")
        #expect(post.body == "thesis.pdf — 2.4 MB in 3s")
        #expect(post.actions.map(\.key) == ["default", "show"])
        #expect(n.tick(now: 200).isEmpty, "posted once")
        n.posted(post, id: 7)
        #expect(n.invoked(id: 7, key: "default") == [.open("/home/u/Downloads/thesis.pdf")])
        #expect(n.invoked(id: 7, key: "show") == [.showInFolder("/home/u/Downloads/thesis.pdf")])
        #expect(n.invoked(id: 8, key: "show").isEmpty, "not ours")
    }

    @Test func aBurstIsOneNotification() {
        var n = AgentNotifications(window: 2)
        _ = n.received(done(1, "a.iso"), now: 10)
        _ = n.received(done(2, "b.iso"), now: 10.5)
        _ = n.received(done(3, "c.iso", state: .failed), now: 11.9)
        let post = try! #require(posts(n.tick(now: 12)).first)
        #expect(post.summary == "3 downloads finished: 2 completed, 1 failed")
        #expect(post.body == "a.iso\nb.iso\nc.iso (failed)")
        #expect(post.folder == "/home/u/Downloads/a.iso" && post.open == nil && post.category == "transfer.complete")
        // The next one starts a new window.
        _ = n.received(done(4, "d.iso"), now: 12.5)
        #expect(n.tick(now: 13).isEmpty)
        #expect(posts(n.tick(now: 14.5)).first?.summary == "Download completed")
    }

    @Test func aLongBurstIsCutAtTheBatchSize() {
        var n = AgentNotifications(window: 2, maxBatch: 3)
        #expect(n.received(done(1, "1"), now: 0).isEmpty)
        #expect(n.received(done(2, "2"), now: 0).isEmpty)
        #expect(posts(n.received(done(3, "3"), now: 0)).first?.summary == "3 downloads completed")
        #expect(n.tick(now: 5).isEmpty)
    }

    @Test func aFailureSaysWhy() {
        var n = AgentNotifications(window: 0)
        _ = n.received(done(1, "x.bin", state: .failed), now: 0)
        let post = try! #require(posts(n.tick(now: 0)).first)
        #expect(post.summary == "Download failed" && post.body == "x.bin: HTTP 404" && post.actions.isEmpty)
        #expect(post.category == "transfer.error")
    }
}
