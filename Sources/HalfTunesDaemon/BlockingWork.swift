// Blocking file work (fsyncs, links, digests, waiting for the journal's fsync) on threads of its own.
import NIOPosix

/// Swift's cooperative pool has one thread per core (two here) and runs the core actor, the connections and
/// the attempts: a thread blocked in `fsync` or hashing a large file there holds all of them up. Work that
/// blocks goes to this pool instead; the caller's task waits without holding a thread.
enum BlockingWork {
    /// Started once, for the life of the process (like NIO's own singletons).
    static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 8)
        pool.start()
        return pool
    }()

    /// Runs `body` on the pool and returns its result.
    static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        do {
            return try await pool.runIfActive(body)
        } catch {
            return body() // the pool is never shut down; should it be, the work still gets done
        }
    }
}
