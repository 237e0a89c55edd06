import Foundation
import PushModel

/// One push to one device, ready for its provider: templates are already filled.
public struct PNSDelivery: Sendable {
    public var hub: String
    public var notificationId: String
    /// The device token, registration token, channel URI or subscription endpoint.
    public var handle: String
    /// A Web Push subscription's keys.
    public var webPush: WebPushKeys?
    /// The native format of `body`: `apple`, `gcm`, `fcmv1`, `windows` or `browser`.
    public var format: NotificationFormat
    public var body: String
    /// The send's headers (`apns-priority`, `X-WNS-Type`, `TTL`, …).
    public var headers: [String: String]
    /// After this the PNS need not deliver it.
    public var expiresAt: Date?
    /// What tells this push apart from the notification's other pushes to the same device
    /// (`CollapseKey.variant(of:)` its template); nil for a native push. Part of the derived
    /// collapse key.
    public var collapseVariant: String?

    public init(
        hub: String, notificationId: String, handle: String, webPush: WebPushKeys? = nil, format: NotificationFormat, body: String,
        headers: [String: String] = [:], expiresAt: Date? = nil, collapseVariant: String? = nil
    ) {
        self.hub = hub
        self.notificationId = notificationId
        self.handle = handle
        self.webPush = webPush
        self.format = format
        self.body = body
        self.headers = headers
        self.expiresAt = expiresAt
        self.collapseVariant = collapseVariant
    }

    /// The header named `name`, whatever its (ASCII) case. Byte by byte: providers ask for
    /// several headers of every push.
    public func header(_ name: String) -> String? {
        let wanted = name.utf8
        for (key, value) in headers where key.utf8.count == wanted.count {
            let same = key.utf8.elementsEqual(wanted) { a, b in
                a == b || (a | 0x20 == b | 0x20 && (97...122).contains(a | 0x20))
            }
            if same { return value }
        }
        return nil
    }
}

/// What a PNS said about one delivery (or why it was not sent), classified.
public struct PNSAnswer: Sendable, Equatable {
    public var classification: PNSClassification
    /// The PNS's HTTP status, when it answered.
    public var status: Int?
    /// The PNS's reason, or PushHub's when it did not send.
    public var reason: String?
    /// How long the PNS took to answer, when a request was sent (not part of equality).
    public var latency: Duration?

    public init(_ classification: PNSClassification, status: Int? = nil, reason: String? = nil, latency: Duration? = nil) {
        self.classification = classification
        self.status = status
        self.reason = reason
        self.latency = latency
    }

    public static func == (lhs: PNSAnswer, rhs: PNSAnswer) -> Bool {
        lhs.classification == rhs.classification && lhs.status == rhs.status && lhs.reason == rhs.reason
    }

    /// PushHub refused to send it: the target's data cannot be delivered.
    static func notSent(_ classification: PNSClassification, _ reason: String) -> PNSAnswer {
        PNSAnswer(classification, reason: reason)
    }

    /// PushHub did not send it: its set-up for the hub is wrong. The reason says what.
    static func notSent(_ problem: Misconfiguration) -> PNSAnswer {
        PNSAnswer(.misconfigured(problem), reason: problem.description)
    }

    /// The answer to one request of a batch: the transport's failure, or `classify`'s reading of
    /// the PNS's response, with the time it took.
    static func reading(_ exchange: PNSExchange, _ classify: (PNSResponse) async -> PNSAnswer) async -> PNSAnswer {
        switch exchange.result {
        case .failure(let error): return .transportFailed(error)
        case .success(let response):
            var answer = await classify(response)
            answer.latency = exchange.latency
            return answer
        }
    }

    /// The transport failed (connection, time-out): retried.
    static func transportFailed(_ error: any Error) -> PNSAnswer {
        if error is SendingStop.NotSent { return .stopped }
        return PNSAnswer(.retry(retryAfter: nil), reason: "transport: \(error)")
    }

    /// Not sent: its sender stopped first (`SendingStop`). Not an attempt; a worker hands the
    /// target back.
    public static let stopped = PNSAnswer(.retry(retryAfter: nil), reason: "not sent: stopping")
}

/// The lowercased hub names of a batch's pushes, made once per run of the same name, not once
/// per push (providers key their hubs by lowercased name).
struct HubNames {
    private var last: (name: String, key: String)?

    mutating func key(_ name: String) -> String {
        if let last, last.name == name { return last.key }
        let key = name.lowercased()
        last = (name, key)
        return key
    }
}

/// A push PushHub will not send, with the answer that says why.
public struct NotSent: Error, Sendable, Equatable {
    public var answer: PNSAnswer

    init(_ classification: PNSClassification, _ reason: String) { answer = .notSent(classification, reason) }

    init(_ answer: PNSAnswer) { self.answer = answer }
}

/// One platform's client: delivers one push and classifies the answer. Providers hold the
/// credentials of every hub; a hub without credentials for the platform gets `misconfigured`.
public protocol PushProvider: Sendable {
    var platform: Platform { get }
    func deliver(_ delivery: PNSDelivery) async -> PNSAnswer
    /// Delivers one batch's pushes together; the answers are in the same order.
    func deliverAll(_ deliveries: [PNSDelivery]) async -> [PNSAnswer]
}

extension PushProvider {
    /// Each push on its own task, timed: for a provider without a batch path.
    public func deliverAll(_ deliveries: [PNSDelivery]) async -> [PNSAnswer] {
        await withTaskGroup(of: (Int, PNSAnswer).self) { group in
            for (index, delivery) in deliveries.enumerated() {
                group.addTask {
                    let started = ContinuousClock.now
                    var answer = await deliver(delivery)
                    if answer.status != nil { answer.latency = ContinuousClock.now - started }
                    return (index, answer)
                }
            }
            var answers = [PNSAnswer?](repeating: nil, count: deliveries.count)
            for await (index, answer) in group { answers[index] = answer }
            return answers.map { $0! }
        }
    }
}

/// The `Retry-After` header: seconds, or an HTTP date.
public enum RetryAfter {
    public static func parse(_ value: String?, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        // At most a day: the worker waits no longer than its `maximumBackoff` in any case, and
        // the milliseconds of a time past the year 292 million would not fit an Int.
        if let seconds = Int(value) { return seconds >= 0 ? .seconds(min(seconds, maximumSeconds)) : nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return .milliseconds(Int(min(max(0, date.timeIntervalSince(now)), Double(maximumSeconds)) * 1000))
    }

    /// The longest wait an answer may ask for; a longer one is read as this.
    public static let maximumSeconds = 86_400
}

/// What loopback is, for the tools that must stay on this machine (the simulator, `pushhub load`).
/// Where deliveries may go is `EndpointPolicy`'s to say.
public enum PushEndpointPolicy {
    public static func isLoopback(_ host: String) -> Bool {
        let host = host.lowercased()
        return host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }
}
