// The file side of a transfer: batched pwritev on a serial queue, fsync on another, observer calls on a third.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif
#if os(Linux)
import CLinuxFile
#endif
import Dispatch
import HalfTunesCore
import HalfTunesProtocol
import NIOConcurrencyHelpers
import NIOCore

/// Owns the partial file's descriptor for one transfer.
///
/// - `writeQueue` writes batches in order (and truncates, on a restart from zero);
/// - `syncQueue` fsyncs, so a slow fsync does not stall the writes that follow it;
/// - `callbackQueue` calls the observer, serially and in submission order.
/// Every job goes through `writeQueue` first, so the observer sees events in the order they were submitted.
final class PartialWriter: Sendable {
    struct Snapshot: Sendable {
        /// The offsets written successfully (kept from before, or written by this writer).
        var writtenRanges: ByteRanges
        /// The offsets known to be fsynced.
        var durableRanges: ByteRanges
        var error: FileIOError?

        /// How many bytes are written (the end of the data while it is written in order from the start).
        var written: Int64 { writtenRanges.count }
        /// How many bytes are durable.
        var durable: Int64 { durableRanges.count }
    }

    /// IOV_MAX on Linux (not exported to Swift).
    static let maxIOVecs = 1024

    let path: String
    let fd: Int32
    /// The durable ranges the partial still held when opened (what this writer starts with).
    let keptRanges: ByteRanges
    /// Where a single request in order resumes: the end of the kept range that starts at 0.
    var kept: Int64 { keptRanges.prefixLength }
    private let writeQueue: DispatchQueue
    private let syncQueue: DispatchQueue
    private let callbackQueue: DispatchQueue
    private let state: NIOLockedValueBox<Snapshot>
    /// The file was created by this writer and its directory entry is not durable yet: the first fsync of its
    /// data also fsyncs the directory (before any length of it is reported durable). Only the sync queue reads
    /// and writes it (and the finishing write job, once the sync queue is idle).
    private nonisolated(unsafe) var directoryNeedsSync: Bool
    /// Bytes written since the last start of writeback (`startWriteback`). Only the write queue reads and
    /// writes it.
    private nonisolated(unsafe) var writebackPending: Int64 = 0
    /// How many written bytes start their writeback at once: the page cache then flushes while the transfer goes
    /// on, and the 1-second checkpoints and the last fsync find little left to write (1 GiB with fsyncs every
    /// second went from 2.0–2.2 s to 1.5–1.7 s on the test machines).
    static let writebackChunk: Int64 = 8 << 20
    /// What is reserved on disk ahead of the written bytes (`ReservationPlan`: never more than a window ahead of
    /// what arrived, whatever the server claims). Only the write queue reads and writes it.
    private nonisolated(unsafe) var reservations = ReservationPlan(limit: nil)
    /// The free space no write or reservation may take (`min-free-space`).
    let floor: FreeSpaceFloor
    /// Bytes written since the free space was last looked at. Only the write queue reads and writes it.
    private nonisolated(unsafe) var writtenSinceSpaceCheck: Int64 = 0
    /// How many bytes are written between two looks at the free space (`fstatvfs`).
    static let spaceCheckInterval: Int64 = 4 << 20
    /// The file's place in its uid's `max-disk-per-uid` (nil: not limited).
    let account: DiskAccount?
    /// The bytes the ledger lets this file hold (at least what it holds: written and reserved). Only the write
    /// queue reads and writes it (and `open`, before any job).
    private nonisolated(unsafe) var allowed: Int64 = 0

    private init(path: String, fd: Int32, kept: ByteRanges, created: Bool, label: String, floor: FreeSpaceFloor,
                 account: DiskAccount?) {
        self.path = path
        self.fd = fd
        self.floor = floor
        self.account = account
        self.keptRanges = kept
        self.directoryNeedsSync = created
        self.writeQueue = DispatchQueue(label: "\(label).write")
        self.syncQueue = DispatchQueue(label: "\(label).sync")
        self.callbackQueue = DispatchQueue(label: "\(label).callbacks")
        self.state = NIOLockedValueBox(Snapshot(writtenRanges: kept, durableRanges: kept, error: nil))
        if let account {
            allowed = kept.count
            account.set(allowed) // the bytes are there, whatever the limit says
        }
    }

    /// Opens and prepares the partial off the caller's thread (`PartialFile.prepare`, keeping the fd open).
    static func open(path: String, durable: ByteRanges, label: String, floor: FreeSpaceFloor = .automatic,
                     account: DiskAccount? = nil) async throws -> PartialWriter {
        let result: Result<PartialWriter, Error> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: Result {
                    let (fd, kept, created) = try PartialFile.openPrepared(path: path, durable: durable,
                                                                            deferNewFileSync: true)
                    return PartialWriter(path: path, fd: fd, kept: kept, created: created, label: label, floor: floor,
                                         account: account)
                })
            }
        }
        return try result.get()
    }

    var snapshot: Snapshot { state.withLockedValue { $0 } }

    /// Truncates to 0 when `truncate` (and fsyncs); with a `limit` (the length the response claims), reserves
    /// the first window from `offset` (`ReservationPlan`), then calls `callbacks` on the callback queue (with
    /// whether it worked). Without the space the file error is `diskFull` before a byte of the body is written.
    func begin(truncate: Bool, reserveFrom offset: Int64 = 0, limit: Int64? = nil,
               callbacks: @escaping @Sendable (Bool) -> Void) {
        writeQueue.async {
            let truncated = truncate ? self.performTruncate() : true
            if limit != nil || truncate { self.reservations = ReservationPlan(limit: limit) }
            let ok = truncated && self.commitBudget(from: offset, to: limit) && self.reserve(after: offset)
            self.callbackQueue.async { callbacks(ok) }
        }
    }

    /// Writes `buffers` at `offset`; `written` runs on the write queue right after (checkpoints: `sync`).
    func write(_ buffers: [ByteBuffer], at offset: Int64, written: @escaping @Sendable (Bool) -> Void) {
        writeQueue.async { written(self.performWrite(buffers, at: offset)) }
    }

    /// After every write submitted so far: fsyncs on the sync queue (making every range written durable) and,
    /// if that worked, calls `checkpoint(durable)` on the callback queue; `synced` runs after that.
    func sync(checkpoint: @escaping @Sendable (ByteRanges) -> Void, synced: @escaping @Sendable () -> Void) {
        writeQueue.async {
            self.syncQueue.async {
                let durable = self.performSync()
                self.callbackQueue.async {
                    if let durable { checkpoint(durable) }
                    synced()
                }
            }
        }
    }

    /// Runs `body` on the callback queue after everything submitted to the write queue so far has been handed on.
    func callback(_ body: @escaping @Sendable () -> Void) {
        writeQueue.async { self.callbackQueue.async(execute: body) }
    }

    /// The last job: writes `buffers` at `offset`, fsyncs, closes the descriptor, then calls `done` with the
    /// final state (its `durableRanges` are what the fsyncs made durable) on the callback queue. Nothing is
    /// written after it, so the fsync runs right after the write, after the sync queue's earlier fsyncs.
    func finish(_ buffers: [ByteBuffer], at offset: Int64, done: @escaping @Sendable (Snapshot) -> Void) {
        writeQueue.async {
            _ = self.performWrite(buffers, at: offset)
            self.syncQueue.sync {} // an earlier checkpoint's fsync (and its callback) goes first
            _ = self.performSync()
            self.giveBackReservations()
            close(self.fd)
            let snapshot = self.snapshot
            self.callbackQueue.async { done(snapshot) }
        }
    }

    // MARK: - On the queues

    private func recordError(_ operation: String, _ code: Int32) {
        state.withLockedValue { s in
            if s.error == nil { s.error = FileIOError(operation: operation, path: path, errno: code) }
        }
    }

    private func performTruncate() -> Bool {
        if ftruncate(fd, 0) != 0 {
            recordError("truncate", errno)
            return false
        }
        writebackPending = 0
        // Nothing is durable any more, whatever the fsync below says.
        state.withLockedValue {
            $0.writtenRanges = ByteRanges()
            $0.durableRanges = ByteRanges()
        }
        if let account {
            allowed = 0
            account.set(0)
        }
        if fsync(fd) != 0 {
            recordError("fsync", errno)
            return false
        }
        return true
    }

    /// A request wrote up to `end`: reserves the next window when the plan says so, keeping the file's size
    /// (so restarts and resume still see only what was written), after checking the free space it would leave.
    /// Where the filesystem cannot reserve (EOPNOTSUPP, ENOSYS, EINVAL), the transfer goes on without; no space
    /// (ENOSPC, EDQUOT), a length past the filesystem's limit (EFBIG) or EIO is the file error.
    private func reserve(after end: Int64) -> Bool {
        let before = reservations
        guard let range = reservations.wrote(upTo: end) else { return true }
        guard keepsFloor(adding: Int64(range.count)) else { return false }
        if account != nil, !surelyWithinAllowance(), !mayHold(onDisk(), partly: false) {
            reservations = before // beyond the uid's budget: no reservation (the writes ask for themselves)
            return true
        }
        #if os(Linux)
        while htd_preallocate(fd, range.lowerBound, Int64(range.count)) != 0 {
            let e = errno
            switch e {
            case EINTR:
                continue
            case ENOSPC, EDQUOT, EFBIG, EIO:
                giveBackReservations() // frees blocks a partly done fallocate kept
                recordError("reserve \(range.count) bytes for", e)
                return false
            default:
                return true
            }
        }
        #endif
        return true
    }

    /// Whether `adding` more bytes leaves at least the floor free on the file system (`fstatvfs`); records the
    /// `diskFull` error when not. A file system that cannot say is not held back.
    private func keepsFloor(adding: Int64) -> Bool {
        writtenSinceSpaceCheck = 0
        var fs = statvfs()
        guard fstatvfs(fd, &fs) == 0 else { return true }
        let (size, free) = fileSystemSize(fs)
        let floorBytes = floor.bytes(ofFileSystemSize: size)
        guard floorBytes > 0, free - adding < floorBytes else { return true }
        recordError("write below min-free-space (\(floorBytes) bytes stay free on the file system for everyone; "
            + "\(free) are free) to", ENOSPC)
        return false
    }

    /// Gives back what was reserved and never written, so a stopped transfer holds only the bytes it received:
    /// a hole punched over each such range inside the file (gaps between segments), and the blocks past its end
    /// freed by truncating it to its own size (ext4 punches no hole past the end; truncation frees them there).
    private func giveBackReservations() {
        let written = state.withLockedValue { $0.writtenRanges }
        let unwritten = reservations.unwritten(written)
        reservations = ReservationPlan(limit: reservations.limit)
        if let account {
            allowed = written.count
            account.set(allowed)
        }
        guard !unwritten.isEmpty else { return }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return }
        let size = Int64(st.st_size)
        #if os(Linux)
        for range in unwritten where range.lowerBound < size {
            _ = htd_punch_hole(fd, range.lowerBound, min(size, range.upperBound) - range.lowerBound)
        }
        #endif
        if unwritten.contains(where: { $0.upperBound > size }) { _ = ftruncate(fd, off_t(size)) }
    }

    // MARK: - The uid's budget (max-disk-per-uid)

    /// Whether the file holds no more than it is allowed even with `extra` new bytes: a bound from the stored
    /// counts (written, reserved, overlaps counted twice), so the usual write builds no union of ranges.
    private func surelyWithinAllowance(adding extra: Int64 = 0) -> Bool {
        state.withLockedValue { $0.writtenRanges.count } + reservations.reserved.count + extra <= allowed
    }

    /// The bytes the file holds (written or reserved).
    private func onDisk(adding range: Range<Int64>? = nil) -> Int64 {
        var held = state.withLockedValue { $0.writtenRanges }.union(reservations.reserved)
        if let range { held.insert(range) }
        return held.count
    }

    /// Whether the file may hold `bytes`: past what it is allowed, the ledger is asked for them. `partly`: what
    /// it grants is kept even when that is less (a write takes it; whatever the file does not hold goes back when
    /// the transfer stops); otherwise all of it or nothing.
    private func mayHold(_ bytes: Int64, partly: Bool) -> Bool {
        guard let account, bytes > allowed else { return true }
        allowed = account.grow(to: bytes, partly: partly)
        return allowed >= bytes
    }

    /// A download of a known length takes from its uid's budget, at once, all the file may still hold (what it
    /// holds and `offset..<end`), or nothing: downloads that could not all finish within the budget never split
    /// it between them and stop half way; one that does not fit writes nothing and waits (`limitExceeded`) until
    /// another of the uid's downloads finishes or is canceled.
    private func commitBudget(from offset: Int64, to end: Int64?) -> Bool {
        guard let account, let end, end > offset else { return true }
        let needed = onDisk(adding: offset..<end)
        if mayHold(needed, partly: false) { return true }
        let limit = account.limit
        recordOverBudget(operation: "begin writing", reason: needed > limit
            ? "the download needs \(needed) bytes on disk, more than max-disk-per-uid allows uid \(account.uid) "
                + "(\(limit) bytes); it waits until the limit is raised or the task is canceled"
            : "the download needs \(needed) bytes on disk and uid \(account.uid)'s unfinished downloads and kept resume "
                + "data already hold \(account.charged) of the \(limit) bytes max-disk-per-uid allows; it goes on once "
                + "some of them finish or are canceled")
        return false
    }

    /// How many of the bytes of a write over `range` the budget lets the file hold: all of them, or those up to
    /// where the new bytes (outside what the file holds) use up what the ledger grants.
    private func budgetAllows(_ range: Range<Int64>) -> Int64 {
        if surelyWithinAllowance(adding: Int64(range.count)) || reservations.reserved.contains(range) {
            return Int64(range.count)
        }
        let held = state.withLockedValue { $0.writtenRanges }.union(reservations.reserved)
        var needed = held
        needed.insert(range)
        if mayHold(needed.count, partly: true) { return Int64(range.count) }
        var room = allowed - held.count
        for gap in held.gaps(total: range.upperBound) where gap.upperBound > range.lowerBound {
            let new = max(gap.lowerBound, range.lowerBound)..<gap.upperBound
            if Int64(new.count) > room { return max(0, new.lowerBound + room - range.lowerBound) }
            room -= Int64(new.count)
        }
        return Int64(range.count)
    }

    private func recordOverBudget(operation: String = "write", reason: String? = nil) {
        guard let account else { return }
        let reason = reason ?? "uid \(account.uid)'s unfinished downloads and kept resume data would hold more than "
            + "max-disk-per-uid allows (\(account.limit) bytes); the download goes on once some of them finish or are "
            + "canceled"
        state.withLockedValue { s in
            guard s.error == nil else { return }
            s.error = FileIOError(operation: operation, path: path, errno: EDQUOT, code: TaskErrorCode.limitExceeded,
                                  reason: reason)
        }
    }

    /// The first `count` bytes of `buffers`.
    private static func prefix(_ buffers: [ByteBuffer], _ count: Int64) -> [ByteBuffer] {
        var left = Int(count), out: [ByteBuffer] = []
        for buffer in buffers where left > 0 {
            let n = min(left, buffer.readableBytes)
            out.append(buffer.getSlice(at: buffer.readerIndex, length: n)!)
            left -= n
        }
        return out
    }

    /// fsync; returns the new durable ranges, or nil if the fsync failed (the error is recorded).
    private func performSync() -> ByteRanges? {
        let target = state.withLockedValue { $0.writtenRanges }
        guard fsync(fd) == 0 else {
            recordError("fsync", errno)
            return nil
        }
        if directoryNeedsSync {
            do {
                try POSIX.fsyncDirectory(containing: path)
                directoryNeedsSync = false
            } catch let error as FileIOError {
                recordError(error.operation, error.errno)
                return nil
            } catch {
                recordError("fsync directory", EIO)
                return nil
            }
        }
        // What was written before the fsync began, unless a truncate took it away meanwhile.
        return state.withLockedValue { s in
            s.durableRanges.formUnion(target.intersection(s.writtenRanges))
            return s.durableRanges
        }
    }

    /// pwritev of all readable bytes at `start`; false after any error (then nothing more is written).
    private func performWrite(_ buffers: [ByteBuffer], at start: Int64) -> Bool {
        guard state.withLockedValue({ $0.error == nil }) else { return false }
        if buffers.isEmpty { return true }
        var buffers = buffers
        var overBudget = false
        if account != nil {
            let length = Int64(buffers.reduce(0) { $0 + $1.readableBytes })
            let fits = budgetAllows(start..<(start + length))
            if fits < length {
                buffers = Self.prefix(buffers, fits)
                overBudget = true
            }
        }
        defer { if overBudget { recordOverBudget() } }
        if buffers.isEmpty { return false }
        var offset: Int64? = start
        var iovecs: [iovec] = []
        iovecs.reserveCapacity(buffers.count)
        var storages: [Unmanaged<AnyObject>] = []
        storages.reserveCapacity(buffers.count)
        defer { for s in storages { s.release() } }
        for buffer in buffers where buffer.readableBytes > 0 {
            buffer.withUnsafeReadableBytesWithStorageManagement { bytes, storage in
                storages.append(storage.retain())
                iovecs.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress),
                                    iov_len: bytes.count))
            }
        }
        offset = start
        var index = 0
        var failure: Int32?
        iovecs.withUnsafeMutableBufferPointer { iov in
            while index < iov.count {
                let count = Int32(min(iov.count - index, Self.maxIOVecs))
                let n = pwritev(fd, iov.baseAddress! + index, count, off_t(offset!))
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                if n == 0 {
                    failure = EIO  // no progress on a non-empty write: do not spin
                    return
                }
                offset! += Int64(n)
                // Skip fully written iovecs, then advance into a partly written one.
                var remaining = n
                while index < iov.count, remaining >= iov[index].iov_len {
                    remaining -= iov[index].iov_len
                    index += 1
                }
                if remaining > 0 {
                    iov[index].iov_base = iov[index].iov_base! + remaining
                    iov[index].iov_len -= remaining
                }
            }
        }
        let end = offset!
        state.withLockedValue { $0.writtenRanges.insert(start..<end) }
        if let failure {
            recordError("write", failure)
            return false
        }
        if overBudget { return false }
        startWriteback(after: end - start)
        // The next window is reserved ahead of what arrived; past the reservations (a length not announced) the
        // free space is looked at every few MiB.
        writtenSinceSpaceCheck += end - start
        if !reserve(after: end) { return false }
        if writtenSinceSpaceCheck >= Self.spaceCheckInterval, !keepsFloor(adding: 0) { return false }
        return true
    }

    /// Starts the writeback of the file's dirty pages once `writebackChunk` or more were written since the last
    /// time, without waiting for it (`sync_file_range` with `SYNC_FILE_RANGE_WRITE` over the whole file, so
    /// writes at several offsets are covered too; pages already under writeback are skipped). It makes nothing
    /// durable: the fsyncs still do that, and a failure here is left to them to find.
    private func startWriteback(after count: Int64) {
        writebackPending += count
        guard writebackPending >= Self.writebackChunk else { return }
        #if os(Linux)
        _ = htd_start_writeback(fd, 0, 0)
        #endif
        writebackPending = 0
    }
}
