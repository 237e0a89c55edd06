import Synchronization

/// Records handed to librdkafka and the callers awaiting their delivery reports.
/// librdkafka's delivery-report callback finds the waiter by the id passed as message opaque.
final class DeliveryWaiters: Sendable {
    private struct State {
        var nextID: UInt = 1
        var waiting: [UInt: (group: DeliveryGroup, index: Int)] = [:]
    }

    private let state = Mutex(State())

    func register(_ group: DeliveryGroup, index: Int) -> UInt {
        state.withLock { state in
            let id = state.nextID
            state.nextID &+= 1
            if state.nextID == 0 { state.nextID = 1 }
            state.waiting[id] = (group, index)
            return id
        }
    }

    /// Completes the waiter registered as `id`, once.
    func complete(_ id: UInt, with result: Result<KafkaDeliveryReport, KafkaError>) {
        let waiter = state.withLock { $0.waiting.removeValue(forKey: id) }
        waiter?.group.complete(waiter!.index, with: result)
    }

    /// Forgets `id` when librdkafka refused the record; true when it was still waiting.
    func cancel(_ id: UInt) -> Bool {
        state.withLock { $0.waiting.removeValue(forKey: id) != nil }
    }

    /// Fails every waiter still outstanding (after shutdown purged librdkafka's queues).
    func failAll(with error: KafkaError) {
        let all = state.withLock { state in
            defer { state.waiting.removeAll() }
            return Array(state.waiting.values)
        }
        for waiter in all { waiter.group.complete(waiter.index, with: .failure(error)) }
    }

    var outstanding: Int { state.withLock { $0.waiting.count } }
}

/// The delivery reports of one `sendAll` call, resumed when the last one arrives.
final class DeliveryGroup: Sendable {
    private struct State {
        var results: [Result<KafkaDeliveryReport, KafkaError>?]
        var remaining: Int
        var continuation: CheckedContinuation<[Result<KafkaDeliveryReport, KafkaError>], Never>?
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(results: Array(repeating: nil, count: count), remaining: count))
    }

    func complete(_ index: Int, with result: Result<KafkaDeliveryReport, KafkaError>) {
        let resume = state.withLock {
            state -> (CheckedContinuation<[Result<KafkaDeliveryReport, KafkaError>], Never>, [Result<KafkaDeliveryReport, KafkaError>])? in
            guard state.results[index] == nil else { return nil }
            state.results[index] = result
            state.remaining -= 1
            guard state.remaining == 0, let continuation = state.continuation else { return nil }
            state.continuation = nil
            return (continuation, state.results.map { $0! })
        }
        if let (continuation, results) = resume { continuation.resume(returning: results) }
    }

    /// Waits for every report. Not cancellable: a record handed to librdkafka will be
    /// acknowledged or fail, and the caller must learn which.
    func wait() async -> [Result<KafkaDeliveryReport, KafkaError>] {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [Result<KafkaDeliveryReport, KafkaError>]? in
                if state.remaining == 0 { return state.results.map { $0! } }
                state.continuation = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
