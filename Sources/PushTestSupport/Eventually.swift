/// Waits for `condition`, checking every 20 ms, for at most `timeout`; whether it held.
public func eventually(timeout: Duration = .seconds(20), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return await condition()
}
