import Foundation
import PushModel

/// A token bucket: `perMinute` requests a minute, bursts of up to a second's worth. Callers
/// wait their turn.
public actor RateLimiter {
    private let perSecond: Double
    private let burst: Double
    private var available: Double
    private var updated: ContinuousClock.Instant

    public init(perMinute: Int) {
        perSecond = max(Double(perMinute) / 60, 1 / 60)
        burst = max(perSecond, 1)
        available = burst
        updated = .now
    }

    public func acquire() async {
        while true {
            let now = ContinuousClock.now
            let elapsed = now - updated
            available = min(burst, available + perSecond * elapsed.seconds)
            updated = now
            if available >= 1 {
                available -= 1
                return
            }
            let wait = (1 - available) / perSecond
            try? await Task.sleep(for: .milliseconds(Int(wait * 1000) + 1))
        }
    }
}
