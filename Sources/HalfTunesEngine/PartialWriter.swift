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
        /// Bytes in the file (written successfully).
        var written: Int64
        /// Bytes known to be fsynced.
        var durable: Int64
        var error: FileIOError?
    }

    /// IOV_MAX on Linux (not exported to Swift).
    static let maxIOVecs = 1024

    let path: String
    let fd: Int32
    /// Length of the partial after prepare.
    let kept: Int64
    private let writeQueue: DispatchQueue
    private let syncQueue: DispatchQueue
    private let callbackQueue: DispatchQueue
    private let state: NIOLockedValueBox<Snapshot>
    /// The file was created by this writer and its directory entry is not durable yet: the first fsync of its
    /// data also fsyncs the directory (before any length of it is reported durable). Only the sync queue reads
    /// and writes it (and the finishing write job, once the sync queue is idle).
    private nonisolated(unsafe) var directoryNeedsSync: Bool
    /// Where the bytes begin whose writeback has not been started yet (`startWriteback`). Only the write queue
    /// reads and writes it.
    private nonisolated(unsafe) var writebackFrom: Int64
    /// How many written bytes start their writeback at once: the page cache then flushes while the transfer goes
    /// on, and the 1-second checkpoints and the last fsync find little left to write (docs/benchmarks.md: 1 GiB
    /// with fsyncs every second, 2.0–2.2 s → 1.5–1.7 s on this disk).
    static let writebackChunk: Int64 = 8 << 20

    private init(path: String, fd: Int32, kept: Int64, created: Bool, label: String) {
        self.path = path
        self.fd = fd
        self.kept = kept
        self.directoryNeedsSync = created
        self.writebackFrom = kept
        self.writeQueue = DispatchQueue(label: "\(label).write")
        self.syncQueue = DispatchQueue(label: "\(label).sync")
        self.callbackQueue = DispatchQueue(label: "\(label).callbacks")
        self.state = NIOLockedValueBox(Snapshot(written: kept, durable: kept, error: nil))
    }

    /// Opens and prepares the partial off the caller's thread (`PartialFile.prepare`, keeping the fd open).
    static func open(path: String, durableOffset: Int64, label: String) async throws -> PartialWriter {
        let result: Result<PartialWriter, Error> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: Result {
                    let (fd, kept, created) = try PartialFile.openPrepared(path: path, durableOffset: durableOffset,
                                                                            deferNewFileSync: true)
                    return PartialWriter(path: path, fd: fd, kept: kept, created: created, label: label)
                })
            }
        }
        return try result.get()
    }

    var snapshot: Snapshot { state.withLockedValue { $0 } }

    /// Truncates to 0 when `truncate` (and fsyncs), reserves the space up to `preallocateTo` when given, then
    /// calls `callbacks` on the callback queue (with whether it worked). Without the space the file error is
    /// `diskFull` before a byte of the body is written.
    func begin(truncate: Bool, preallocateTo total: Int64? = nil, callbacks: @escaping @Sendable (Bool) -> Void) {
        writeQueue.async {
            let truncated = truncate ? self.performTruncate() : true
            let ok = truncated && (total.map { self.performPreallocate(to: $0) } ?? true)
            self.callbackQueue.async { callbacks(ok) }
        }
    }

    /// Writes `buffers` at the end of the written data; `written` runs on the write queue right after.
    /// With `sync`, then fsyncs on the sync queue and, if that worked, calls `checkpoint(durable)` on the
    /// callback queue; `synced` runs after that.
    func write(_ buffers: [ByteBuffer], sync: Bool, written: @escaping @Sendable (Bool) -> Void,
               checkpoint: @escaping @Sendable (Int64) -> Void, synced: @escaping @Sendable () -> Void) {
        writeQueue.async {
            let ok = self.performWrite(buffers)
            written(ok)
            guard sync else { return }
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

    /// The last job: writes `buffers`, fsyncs, closes the descriptor, then calls `done` with the final state
    /// (its `durable` is what the fsyncs made durable) on the callback queue. Nothing is written after it, so
    /// the fsync runs right after the write, after the sync queue's earlier fsyncs.
    func finish(_ buffers: [ByteBuffer], done: @escaping @Sendable (Snapshot) -> Void) {
        writeQueue.async {
            _ = self.performWrite(buffers)
            self.syncQueue.sync {} // an earlier checkpoint's fsync (and its callback) goes first
            _ = self.performSync()
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
        writebackFrom = 0
        // Nothing is durable any more, whatever the fsync below says.
        state.withLockedValue {
            $0.written = 0
            $0.durable = 0
        }
        if fsync(fd) != 0 {
            recordError("fsync", errno)
            return false
        }
        return true
    }

    /// Reserves the blocks from the written end up to `total`, keeping the file's size (so restarts and resume
    /// still see only what was written). Where the filesystem cannot (EOPNOTSUPP, ENOSYS, EINVAL), the transfer
    /// goes on without; no space (ENOSPC, EDQUOT), a length past the filesystem's limit (EFBIG) or EIO is the
    /// file error, and what a failed attempt reserved is given back.
    private func performPreallocate(to total: Int64) -> Bool {
        let start = state.withLockedValue { $0.written }
        guard total > start else { return true }
        #if os(Linux)
        while htd_preallocate(fd, start, total - start) != 0 {
            let e = errno
            switch e {
            case EINTR:
                continue
            case ENOSPC, EDQUOT, EFBIG, EIO:
                _ = ftruncate(fd, off_t(start))  // frees blocks a partly done fallocate kept past the end
                recordError("reserve \(total - start) bytes for", e)
                return false
            default:
                return true
            }
        }
        #endif
        return true
    }

    /// fsync; returns the new durable length, or nil if the fsync failed (the error is recorded).
    private func performSync() -> Int64? {
        let target = state.withLockedValue { $0.written }
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
        return state.withLockedValue { s in
            s.durable = max(s.durable, min(target, s.written))
            return s.durable
        }
    }

    /// pwritev of all readable bytes at the write position; false after any error (then nothing more is written).
    private func performWrite(_ buffers: [ByteBuffer]) -> Bool {
        var offset = state.withLockedValue { s -> Int64? in s.error == nil ? s.written : nil }
        guard let start = offset else { return false }
        if buffers.isEmpty { return true }
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
        state.withLockedValue { $0.written = end }
        if let failure {
            recordError("write", failure)
            return false
        }
        startWriteback(through: end)
        return true
    }

    /// Starts the writeback of what was written since the last call, once it is `writebackChunk` or more, without
    /// waiting for it (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`). It makes nothing durable: the fsyncs still
    /// do that, and a failure here is left to them to find.
    private func startWriteback(through end: Int64) {
        guard end - writebackFrom >= Self.writebackChunk else { return }
        #if os(Linux)
        _ = htd_start_writeback(fd, writebackFrom, end - writebackFrom)
        #endif
        writebackFrom = end
    }
}
