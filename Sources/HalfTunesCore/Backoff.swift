// Retry timing: exponential backoff with jitter, Retry-After clamping, the give-up rule, policy validation.
import HalfTunesProtocol

/// A session's `RetryPolicy` with every default filled in. Pure: the randomness of the jitter comes in as a
/// sample in [0, 1), so the same inputs always give the same delay.
public struct Backoff: Sendable, Equatable {
    /// Delay before the first retry, seconds.
    public var initial: Double
    /// Longest computed delay (before jitter), seconds.
    public var maximum: Double
    /// Each computed delay is multiplied by a factor in [1 - jitter, 1 + jitter].
    public var jitter: Double
    /// Longest `Retry-After` honoured, seconds.
    public var maximumRetryAfter: Double
    /// Transient failures in a row (without progress) after which the task fails; nil: no limit.
    public var maxAttempts: Int?

    /// Bounds checked by `validate`.
    public static let longestDelay: Double = 86_400
    public static let longestRetryAfter: Double = 7 * 86_400

    public init(initial: Double = RetryPolicy.defaultInitialDelay, maximum: Double = RetryPolicy.defaultMaxDelay,
                jitter: Double = RetryPolicy.defaultJitter, maximumRetryAfter: Double = RetryPolicy.defaultMaxRetryAfter,
                maxAttempts: Int? = nil) {
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
        self.maximumRetryAfter = maximumRetryAfter
        self.maxAttempts = maxAttempts
    }

    /// The policy with defaults for its missing fields (a missing `maxDelay` is never below `initialDelay`).
    public init(_ policy: RetryPolicy?) {
        let p = policy ?? RetryPolicy()
        let initial = p.initialDelay ?? RetryPolicy.defaultInitialDelay
        self.init(initial: initial, maximum: p.maxDelay ?? max(RetryPolicy.defaultMaxDelay, initial),
                  jitter: p.jitter ?? RetryPolicy.defaultJitter,
                  maximumRetryAfter: p.maxRetryAfter ?? RetryPolicy.defaultMaxRetryAfter, maxAttempts: p.maxAttempts)
    }

    /// As a `RetryPolicy` with every field set except `maxAttempts` when there is no limit.
    public var policy: RetryPolicy {
        RetryPolicy(initialDelay: initial, maxDelay: maximum, jitter: jitter, maxRetryAfter: maximumRetryAfter,
                    maxAttempts: maxAttempts)
    }

    /// The jitter factor for a sample in [0, 1): 1 - jitter at 0, rising linearly towards 1 + jitter.
    public func jitterFactor(_ sample: Double) -> Double {
        let s = sample.isFinite ? min(max(sample, 0), 1) : 0.5
        return 1 - jitter + 2 * jitter * s
    }

    /// Seconds before the retry that follows `failures` consecutive transient failures (1-based):
    /// min(maximum, initial·2^(failures-1)) × the jitter factor; a `Retry-After` (clamped to
    /// `maximumRetryAfter`) is a lower bound, so a retry never starts before the server asked.
    public func delay(failures: Int, retryAfter: Double?, jitterSample: Double) -> Double {
        let exponent = max(0, min(failures - 1, 62))
        var computed = initial
        for _ in 0..<exponent where computed < maximum { computed *= 2 }
        computed = min(maximum, computed) * jitterFactor(jitterSample)
        guard let retryAfter, retryAfter.isFinite, retryAfter > 0 else { return computed }
        return max(computed, min(retryAfter, maximumRetryAfter))
    }

    /// Whether a task that just had its `failures`-th transient failure in a row stops retrying.
    public func givesUp(after failures: Int) -> Bool {
        guard let maxAttempts else { return false }
        return failures >= maxAttempts
    }

    /// Why `policy` is unusable, as a sentence naming the field (prefixed with `field`), or nil when it is fine.
    public static func problem(with policy: RetryPolicy, field: String = "configuration.retry") -> String? {
        func seconds(_ name: String, _ value: Double?, allowZero: Bool, upTo limit: Double) -> String? {
            guard let value else { return nil }
            let low = allowZero ? value >= 0 : value > 0
            guard value.isFinite, low, value <= limit else {
                let range = allowZero ? "from 0 to \(Int(limit))" : "more than 0 and at most \(Int(limit))"
                return "\(field).\(name) must be \(range) seconds (got \(value))"
            }
            return nil
        }
        if let p = seconds("initialDelay", policy.initialDelay, allowZero: false, upTo: longestDelay) { return p }
        if let p = seconds("maxDelay", policy.maxDelay, allowZero: false, upTo: longestDelay) { return p }
        if let initial = policy.initialDelay, let maximum = policy.maxDelay, maximum < initial {
            return "\(field).maxDelay (\(maximum)) must not be less than initialDelay (\(initial))"
        }
        if policy.initialDelay == nil, let maximum = policy.maxDelay, maximum < RetryPolicy.defaultInitialDelay {
            return "\(field).maxDelay (\(maximum)) must not be less than initialDelay "
                + "(\(RetryPolicy.defaultInitialDelay), the default); set initialDelay too"
        }
        if let jitter = policy.jitter, !(jitter.isFinite && jitter >= 0 && jitter <= 1) {
            return "\(field).jitter must be from 0 to 1 (got \(jitter))"
        }
        if let p = seconds("maxRetryAfter", policy.maxRetryAfter, allowZero: true, upTo: longestRetryAfter) { return p }
        if let attempts = policy.maxAttempts, attempts < 1 {
            return "\(field).maxAttempts must be at least 1 (got \(attempts)); omit it to retry until the resource timeout"
        }
        return nil
    }
}
