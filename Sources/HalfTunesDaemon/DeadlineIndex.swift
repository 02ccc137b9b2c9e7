/// The resource deadlines of pending tasks, earliest first (a binary min-heap), so the once-a-second check
/// costs what is due instead of a walk over every task. Removal is lazy: `TaskTable` pushes a deadline when a
/// task becomes pending and the reader (`takeDue`) drops entries that no longer hold; the heap is rebuilt when
/// stale entries outnumber live ones.
struct DeadlineIndex {
    struct Entry: Equatable {
        var deadline: Double
        var id: Int64
    }

    private(set) var heap: [Entry] = []

    var count: Int { heap.count }
    /// Where the heap's storage is (tests: a change made in place keeps it).
    var storageAddress: UnsafeRawPointer? { heap.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) } }

    mutating func insert(_ id: Int64, at deadline: Double) {
        heap.append(Entry(deadline: deadline, id: id))
        siftUp(heap.count - 1)
    }

    /// The earliest deadline held (stale or not).
    var earliest: Double? { heap.first?.deadline }

    /// Takes out every entry due at `now` (deadline ≤ now), earliest first, and returns those `isLive` accepts.
    mutating func takeDue(now: Double, isLive: (Entry) -> Bool) -> [Int64] {
        var due: [Int64] = []
        while let top = heap.first, top.deadline <= now {
            removeTop()
            if isLive(top), due.last != top.id { due.append(top.id) }
        }
        return due
    }

    /// Keeps only the entries `isLive` accepts (when stale entries pile up).
    mutating func compact(isLive: (Entry) -> Bool) {
        heap = heap.filter(isLive)
        for i in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(i) }
    }

    private mutating func removeTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    private static func less(_ a: Entry, _ b: Entry) -> Bool { (a.deadline, a.id) < (b.deadline, b.id) }

    private mutating func siftUp(_ start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard Self.less(heap[i], heap[parent]) else { return }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        while true {
            let l = 2 * i + 1, r = l + 1
            var smallest = i
            if l < heap.count, Self.less(heap[l], heap[smallest]) { smallest = l }
            if r < heap.count, Self.less(heap[r], heap[smallest]) { smallest = r }
            guard smallest != i else { return }
            heap.swapAt(i, smallest)
            i = smallest
        }
    }
}
