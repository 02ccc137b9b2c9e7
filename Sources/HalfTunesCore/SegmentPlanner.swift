// When a download opens another connection and for which bytes: a pure state machine in virtual time.
import HalfTunesProtocol

/// Plans the segments of one download attempt. The first connection (segment 0) runs alone until it has shown
/// its rate; then connections are added in doubling steps (aria2's halving of the largest remaining range,
/// but adaptive): each step is kept only while the measured total rate grows by `minGrowth`, and a range is
/// split only when both halves are worth a connection (`minSegmentBytes` and `minSegmentSeconds` of the rate of
/// one connection). A segment that reaches its end takes the largest gap left, or half of the largest range
/// still being fetched, so the chosen number of connections stays busy to the end. A refused connection (429,
/// 503) lowers the cap to what is running; a server that cannot serve ranges lowers it to one.
///
/// The runner feeds it `progress` (a segment's position) and `ended`, calls `tick` on a timer, and carries out
/// the actions: `.open` starts a request for a range, `.shrink` makes a running segment stop earlier. Times are
/// seconds on any monotonic clock. Gaps left by an earlier attempt (`kept` with holes) are fetched too, one
/// connection after another when only one is allowed.
public struct SegmentPlanner: Sendable {
    public struct Settings: Sendable, Equatable {
        /// The most connections at once (the task's, the session's and the host's limits).
        public var maxConnections: Int
        /// How long the first connection runs alone.
        public var warmup: Double = 0.3
        /// Rates are measured over this long, or over twice the longest pause seen in the bytes arriving (a
        /// server that paces each connection in bursts, like nginx's `limit_rate` at low rates, sends a second's
        /// worth at once), up to `maxWindow`.
        public var window: Double = 0.3
        public var maxWindow: Double = 2.5
        /// New connections get this long to start before the rate they give is measured.
        public var settle: Double = 0.15
        /// Adding connections goes on while each step raises the total rate by this fraction.
        public var minGrowth: Double = 0.15
        /// No segment is split into halves smaller than this.
        public var minSegmentBytes: Int64 = 1 << 20
        /// Nor into halves that one connection would fetch in less than this many seconds.
        public var minSegmentSeconds: Double = 0.5
        /// Split points are multiples of this (page-aligned writes).
        public var alignment: Int64 = 64 << 10

        public init(maxConnections: Int) {
            self.maxConnections = max(1, maxConnections)
        }
    }

    public enum Action: Sendable, Equatable {
        /// Start a request for `range` as segment `id`.
        case open(id: Int, range: Range<Int64>)
        /// Segment `id` stops at `limit` (once it has every byte below it).
        case shrink(id: Int, limit: Int64)
        /// Segment `id` (an open-ended request) goes on to `limit`: the segment after it ended without a byte.
        case extend(id: Int, limit: Int64)
    }

    /// Why a segment ended.
    public enum End: Sendable, Equatable {
        /// It has every byte up to its limit.
        case reachedLimit
        /// The connection failed (dropped, stalled): the rest of its range is left for others.
        case failed
        /// The server refused another connection (429, 503): fewer connections from now on.
        case refused
        /// The server cannot serve this range as asked (ignored Range, wrong Content-Range): one connection.
        case unsplittable
        /// The daemon took the connection back (another task for the host is waiting): the rest of its range
        /// is left for the others, and nothing counts against the server.
        case shed
    }

    struct Segment: Sendable, Equatable {
        var start: Int64
        var position: Int64
        var limit: Int64
    }

    enum Growth: Sendable, Equatable {
        /// Only the first connection, until `warmup` has passed.
        case warmingUp
        /// `count` connections were asked for at `since`; the total rate before was `before`.
        case measuring(since: Double, before: Double, previous: Int, count: Int)
        /// Done adding: keep `count` connections busy.
        case settled(count: Int)
    }

    public let settings: Settings
    public let total: Int64
    public private(set) var cap: Int
    /// Bytes every segment that ended has (plus what was kept before).
    public private(set) var done: ByteRanges
    private(set) var segments: [Int: Segment] = [:]
    private(set) var growth = Growth.warmingUp
    private var nextID = 1
    private let startedAt: Double
    /// Bytes received by every segment since the start, and their history for rates.
    private var received: Int64 = 0
    private var samples: [(time: Double, bytes: Int64)] = []
    /// When the bytes received last changed, and the longest time they stood still.
    private var lastChange: (time: Double, bytes: Int64)
    public private(set) var longestPause: Double = 0
    private var failures = 0

    /// `kept`: what the file already has (durable ranges of earlier attempts). Segment 0, the first request,
    /// is already running from `primaryFrom`; `primaryLimit` says where it must stop (the start of the next kept
    /// range, or the total): the runner applies it at once.
    public init(settings: Settings, total: Int64, kept: ByteRanges, primaryFrom: Int64, now: Double) {
        self.settings = settings
        self.total = total
        self.cap = settings.maxConnections
        self.done = kept.clipped(to: total)
        self.startedAt = now
        let limit = done.ranges.first(where: { $0.lowerBound > primaryFrom })?.lowerBound ?? total
        segments[0] = Segment(start: primaryFrom, position: primaryFrom, limit: max(primaryFrom, limit))
        samples = [(now, 0)]
        lastChange = (now, 0)
    }

    /// Where the first request must stop.
    public var primaryLimit: Int64 { segments[0]?.limit ?? total }
    public var activeCount: Int { segments.count }
    /// Every byte of the file is in `done`.
    public var isComplete: Bool { done.covers(total: total) }
    /// The segment's current limit (nil once it ended).
    public func limit(of id: Int) -> Int64? { segments[id]?.limit }

    /// The segment has every byte below `position` of its range.
    public mutating func progress(_ id: Int, position: Int64) {
        guard var s = segments[id], position > s.position else { return }
        received += min(position, s.limit) - min(s.position, s.limit)
        s.position = position
        segments[id] = s
    }

    /// The segment's request ended at `position` (every byte from its start to there is written). When it
    /// got nothing and the segment before it (`extendable`: an open-ended request) was cut where it began, that
    /// one goes on through its range instead (`.extend`).
    @discardableResult
    public mutating func ended(_ id: Int, position: Int64, _ end: End, extendable: Set<Int> = [0]) -> [Action] {
        progress(id, position: position)
        guard let s = segments.removeValue(forKey: id) else { return [] }
        done.insert(s.start..<min(max(s.start, position), s.limit))
        var actions: [Action] = []
        if end != .reachedLimit, position <= s.start,
           let (before, _) = segments.first(where: { extendable.contains($0.key) && $0.value.limit == s.start }) {
            segments[before]!.limit = s.limit
            actions.append(.extend(id: before, limit: s.limit))
        }
        switch end {
        case .reachedLimit:
            break
        case .failed:
            failures += 1
            if failures >= 3 { cap = max(1, min(cap, segments.count)) }
        case .refused:
            cap = max(1, min(cap, segments.count))
        case .unsplittable:
            cap = 1
        case .shed:
            break
        }
        return actions
    }

    /// What to do now: called on a timer (every ~0.1 s) and after `ended`. `mayOpen` is asked before each
    /// connection opened while another is still running (the first one is the task's own): false, and the
    /// planner opens nothing more this time and asks again at a later tick, its growth left as it was.
    /// `ceiling`: a bandwidth limit the download is held to (bytes per second); while the rate is near it,
    /// another connection could not go faster, and none is added.
    public mutating func tick(now: Double, ceiling: Double? = nil, mayOpen: () -> Bool = { true }) -> [Action] {
        samples.append((now, received))
        while samples.count > 2, samples[1].time <= now - 2 * settings.maxWindow { samples.removeFirst() }
        if received != lastChange.bytes {
            lastChange = (now, received)
        } else {
            longestPause = max(longestPause, now - lastChange.time)
        }
        let window = self.window
        var actions: [Action] = []
        let rate = self.rate(now: now)
        let limited = ceiling.map { rate >= Self.nearCeiling * $0 } ?? false
        switch growth {
        case _ where limited:
            break // held by a bandwidth limit: asked again at the next tick
        case .warmingUp:
            if now - startedAt >= max(settings.warmup, window), cap > 1, segments.count >= 1 {
                let previous = segments.count
                let (added, denied) = fill(upTo: min(cap, previous * 2), rate: rate, mayOpen: mayOpen, into: &actions)
                if added > 0 {
                    growth = .measuring(since: now, before: rate, previous: previous, count: previous + added)
                } else if !denied {
                    growth = .settled(count: previous)
                }
            }
        case let .measuring(since, before, previous, count):
            if now - since >= settings.settle + window {
                if rate >= before * (1 + settings.minGrowth), count < cap {
                    let (added, denied) = fill(upTo: min(cap, count * 2), rate: rate, mayOpen: mayOpen, into: &actions)
                    if added > 0 {
                        growth = .measuring(since: now, before: rate, previous: count, count: count + added)
                    } else if !denied {
                        growth = .settled(count: count)
                    }
                } else {
                    growth = .settled(count: rate >= before * (1 + settings.minGrowth) ? count : previous)
                }
            }
        case .settled:
            break
        }
        // Keep the chosen number of connections busy; gaps are fetched even by one connection.
        _ = fill(upTo: max(1, min(cap, target)), rate: rate, mayOpen: mayOpen, into: &actions)
        return actions
    }

    /// How long rates are measured over now (see `Settings.window`).
    public var window: Double {
        min(settings.maxWindow, max(settings.window, 2 * longestPause))
    }

    /// A rate at this fraction of a bandwidth limit counts as held by it.
    static let nearCeiling = 0.8

    // MARK: - Private

    private var target: Int {
        switch growth {
        case .warmingUp: return 1
        case .measuring(_, _, _, let count): return count
        case .settled(let count): return count
        }
    }

    /// The total rate over the last window (bytes per second; 0 before there is a window's worth).
    private func rate(now: Double) -> Double {
        guard let first = samples.first else { return 0 }
        let from = samples.last(where: { $0.time <= now - window }) ?? first
        let elapsed = now - from.time
        guard elapsed > 0 else { return 0 }
        return Double(received - from.bytes) / elapsed
    }

    /// Opens connections until `count` are active: the largest unclaimed gap first, then half of the largest
    /// remaining range of a running segment when both halves are worth it. Returns how many were opened, and
    /// whether `mayOpen` refused one.
    private mutating func fill(upTo count: Int, rate: Double, mayOpen: () -> Bool,
                               into actions: inout [Action]) -> (opened: Int, denied: Bool) {
        var opened = 0
        while segments.count < count {
            let gap = largestGap()
            let split = gap == nil ? bestSplit(rate: rate) : nil
            guard gap != nil || split != nil else { break }
            if !segments.isEmpty, !mayOpen() { return (opened, true) }
            if let gap {
                open(gap, into: &actions)
            } else if let (id, mid) = split {
                let end = segments[id]!.limit
                segments[id]!.limit = mid
                actions.append(.shrink(id: id, limit: mid))
                open(mid..<end, into: &actions)
            }
            opened += 1
        }
        return (opened, false)
    }

    private mutating func open(_ range: Range<Int64>, into actions: inout [Action]) {
        let id = nextID
        nextID += 1
        segments[id] = Segment(start: range.lowerBound, position: range.lowerBound, limit: range.upperBound)
        actions.append(.open(id: id, range: range))
    }

    /// The largest range that neither `done` nor a running segment covers.
    private func largestGap() -> Range<Int64>? {
        var claimed = done
        for s in segments.values { claimed.insert(s.start..<s.limit) }
        return claimed.largestGap(total: total)
    }

    /// The running segment with the most left to fetch, and where to split it, if both halves are worth a
    /// connection.
    private func bestSplit(rate: Double) -> (id: Int, mid: Int64)? {
        guard let (id, s) = segments.max(by: { ($0.value.limit - $0.value.position, $1.key) < ($1.value.limit - $1.value.position, $0.key) })
        else { return nil }
        let left = s.limit - s.position
        let perConnection = rate / Double(max(1, segments.count))
        let half = left / 2
        guard half >= settings.minSegmentBytes, Double(half) >= perConnection * settings.minSegmentSeconds else { return nil }
        var mid = s.position + half
        mid -= mid % settings.alignment
        guard mid > s.position, mid < s.limit else { return nil }
        return (id, mid)
    }
}
