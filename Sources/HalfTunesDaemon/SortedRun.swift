// A sorted run in short chunks (queued tasks, ids by state): an item taken out of or put into the middle moves one chunk, not half the run.
import DequeModule

/// Items sorted by `key` (unique), kept as consecutive chunks of at most `maxChunk` items, each a `Deque`.
/// Appending (queue orders only grow) and taking the first are O(1); finding, inserting or removing anywhere else
/// costs a binary search over the chunks' last keys, one within a chunk, and moving at most half a chunk; a
/// place (`count(below:)`) adds up the counts of the chunks before it. So with 100,000 queued tasks a cancel in
/// the middle moves ≤ 128 items, where one `Deque` moved up to 50,000. A pure value: no I/O.
struct SortedRun<Item: KeyedEntry & Sendable>: Sendable {
    /// The chunks in order, none empty; every key in a chunk is below every key of the next.
    private var chunks: [Deque<Item>] = []
    private(set) var count = 0

    /// A chunk grows to at most this many items, then splits in two; appends start a new chunk at half of it.
    static var maxChunk: Int { 256 }

    init() {}

    var isEmpty: Bool { count == 0 }
    var first: Item? { chunks.first?.first }
    var last: Item? { chunks.last?.last }
    /// How many items each chunk holds (for tests of the chunks' upkeep).
    var chunkSizes: [Int] { chunks.map(\.count) }

    /// Adds `item`, whose key must not be in the run.
    mutating func insert(_ item: Item) {
        guard let lastKey = chunks.last?.last?.key else {
            chunks.append([item])
            count = 1
            return
        }
        count += 1
        if lastKey < item.key {
            if chunks[chunks.count - 1].count >= Self.maxChunk / 2 {
                chunks.append([item])
            } else {
                chunks[chunks.count - 1].append(item)
            }
            return
        }
        let c = chunk(notBelow: item.key) ?? chunks.count - 1
        let index = Self.firstIndex(in: chunks[c], notBelow: item.key)
        chunks[c].insert(item, at: index)
        if chunks[c].count > Self.maxChunk { split(c) }
    }

    /// Takes out the item with `key` and returns it (nil when there is none).
    @discardableResult
    mutating func remove(_ key: Item.SortKey) -> Item? {
        guard let c = chunk(notBelow: key) else { return nil }
        let index = Self.firstIndex(in: chunks[c], notBelow: key)
        guard index < chunks[c].count, chunks[c][index].key == key else { return nil }
        count -= 1
        let item = chunks[c].remove(at: index)
        if chunks[c].isEmpty {
            chunks.remove(at: c)
        } else if c + 1 < chunks.count, chunks[c].count + chunks[c + 1].count <= Self.maxChunk / 2 {
            merge(c)
        } else if c > 0, chunks[c - 1].count + chunks[c].count <= Self.maxChunk / 2 {
            merge(c - 1)
        }
        return item
    }

    /// Takes out the first item.
    mutating func popFirst() -> Item? {
        guard !chunks.isEmpty else { return nil }
        count -= 1
        let item = chunks[0].removeFirst()
        if chunks[0].isEmpty {
            chunks.removeFirst()
        } else if chunks.count > 1, chunks[0].count + chunks[1].count <= Self.maxChunk / 2 {
            merge(0)
        }
        return item
    }

    /// The item with `key`, if any.
    func item(_ key: Item.SortKey) -> Item? {
        guard let item = first(notBelow: key), item.key == key else { return nil }
        return item
    }

    /// The first item whose key is not below `key`.
    func first(notBelow key: Item.SortKey) -> Item? {
        guard let c = chunk(notBelow: key) else { return nil }
        return chunks[c][Self.firstIndex(in: chunks[c], notBelow: key)]
    }

    /// The first item whose key is above `key`.
    func first(after key: Item.SortKey) -> Item? {
        guard let c = chunk(above: key) else { return nil }
        var low = 0, high = chunks[c].count
        while low < high {
            let mid = (low + high) / 2
            if key < chunks[c][mid].key { high = mid } else { low = mid + 1 }
        }
        return chunks[c][low]
    }

    /// How many items have a key below `key` (a queued task's index in its run). O(log n + chunks).
    func count(below key: Item.SortKey) -> Int {
        guard let c = chunk(notBelow: key) else { return count }
        var before = 0
        for chunk in chunks[..<c] { before += chunk.count }
        return before + Self.firstIndex(in: chunks[c], notBelow: key)
    }

    /// The items from the first whose key is not below `key` on, in order (lazily).
    func items(from key: Item.SortKey) -> some Sequence<Item> {
        let start = chunk(notBelow: key) ?? chunks.count
        let offset = start < chunks.count ? Self.firstIndex(in: chunks[start], notBelow: key) : 0
        return chunks[start...].enumerated().lazy.flatMap { i, chunk in chunk.dropFirst(i == 0 ? offset : 0) }
    }

    /// The first `n` items, in order.
    func prefix(_ n: Int) -> some Sequence<Item> {
        chunks.lazy.flatMap { $0 }.prefix(n)
    }

    /// Every item in order (tests).
    var elements: [Item] { chunks.flatMap { $0 } }

    // MARK: Chunks

    /// The first chunk whose last key is not below `key` (nil: every key is below it).
    private func chunk(notBelow key: Item.SortKey) -> Int? {
        var low = 0, high = chunks.count
        while low < high {
            let mid = (low + high) / 2
            if chunks[mid].last!.key < key { low = mid + 1 } else { high = mid }
        }
        return low < chunks.count ? low : nil
    }

    /// The first chunk whose last key is above `key`.
    private func chunk(above key: Item.SortKey) -> Int? {
        var low = 0, high = chunks.count
        while low < high {
            let mid = (low + high) / 2
            if key < chunks[mid].last!.key { high = mid } else { low = mid + 1 }
        }
        return low < chunks.count ? low : nil
    }

    private mutating func split(_ c: Int) {
        let half = chunks[c].count / 2
        let tail = Deque(chunks[c][half...])
        chunks[c].removeLast(chunks[c].count - half)
        chunks.insert(tail, at: c + 1)
    }

    /// Joins chunk `c + 1` to chunk `c`.
    private mutating func merge(_ c: Int) {
        let next = chunks.remove(at: c + 1)
        chunks[c].append(contentsOf: next)
    }

    /// The index of the first item whose key is not below `key` (binary search; a chunk is sorted).
    private static func firstIndex(in chunk: Deque<Item>, notBelow key: Item.SortKey) -> Int {
        var low = 0, high = chunk.count
        while low < high {
            let mid = (low + high) / 2
            if chunk[mid].key < key { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
