import Foundation
import Logging
import PushDispatcher
import PushKafka
import PushModel
import PushOps
import PushStore

/// One broadcast to N registrations through the real dispatcher on the embedded cluster:
/// how long dispatching takes, and whether memory stays flat while it pages the audience.
public struct DispatchBenchmark: Sendable {
    public struct Figures: Sendable {
        public var registrations: Int
        public var seedSeconds: Double
        public var dispatchSeconds: Double
        public var batches: Int
        /// Resident memory before the broadcast, and the most seen while dispatching (MB).
        public var rssBeforeMB: Double
        public var rssPeakMB: Double
        public var rssSamples: [(tenthsOfSecond: Int, mb: Double)]
    }

    public var registrations: Int
    public var path: String
    let logger: Logger

    public init(registrations: Int, path: String, logger: Logger) {
        self.registrations = registrations
        self.path = path
        self.logger = logger
    }

    public func run(progress: (String) -> Void) async throws -> Figures {
        let store = try await StoreLocation(path).open(logger: logger)
        let seedStart = ContinuousClock.now
        let now = Date()
        for start in stride(from: 0, to: registrations, by: 10_000) {
            try await store.importRegistrations(
                (start..<min(start + 10_000, registrations)).map { index in
                    Registration(
                        registrationId: "r\(index)", hub: "bench", format: .apple, handle: String(format: "%064x", index), tags: ["all"],
                        updatedAt: now)
                })
        }
        let seedSeconds = (ContinuousClock.now - seedStart).seconds
        progress("seeded \(registrations) registrations in \(String(format: "%.1f", seedSeconds)) s")

        let cluster = try EmbeddedKafkaCluster.start(brokers: 1, logger: logger)
        defer { cluster.shutdown() }
        let topics = PushTopics(prefix: "bench.")
        for topic in topics.all { try cluster.createTopic(topic, partitions: 12) }
        let producer = try KafkaProducer.make(configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers), logger: logger)
        // The dispatcher's part as its process composes it.
        let wiring = KafkaWiring(
            servers: cluster.bootstrapServers, topics: topics, producer: producer, tuneConsumer: { $0.sessionTimeout = .seconds(3) })
        let part = try makeDispatcherServices(
            kafka: wiring, store: store, settings: DispatcherSettings(topics: topics, hubs: ["bench"]), group: "bench-dispatcher", logger: logger)
        let group = ProcessLifecycle.group([.init(service: producer)] + part.services, signals: false, logger: logger)
        let running = Task { try? await group.run() }
        defer { running.cancel() }

        var results = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "bench-results")
        results.sessionTimeout = .seconds(3)
        let summaries = try KafkaConsumer.make(configuration: results, topics: [topics.results], logger: logger)
        let rssBefore = Self.residentMB()
        let request = SendRequest(
            notificationId: UUID().uuidString.lowercased(), hub: "bench", audience: .broadcast, format: .apple, body: #"{"aps":{"alert":"hi"}}"#,
            enqueuedAt: Date())
        let start = ContinuousClock.now
        try await producer.send(KafkaOutgoingRecord(topic: topics.requests, key: request.notificationId, value: WireCoding.encode(request)))
        // Memory is sampled while the dispatcher works; the summary says when it is done.
        let sampler = Task {
            var samples: [(Int, Double)] = []
            while !Task.isCancelled {
                samples.append((Int((ContinuousClock.now - start).seconds * 10), Self.residentMB()))
                try? await Task.sleep(for: .milliseconds(250))
            }
            return samples
        }
        var dispatched = 0
        for await record in summaries.records {
            if let summary = try? WireCoding.decode(ResultBatch.self, from: record.value), summary.notificationId == request.notificationId {
                dispatched = summary.dispatched?.values.reduce(0, +) ?? 0
                break
            }
        }
        let dispatchSeconds = (ContinuousClock.now - start).seconds
        sampler.cancel()
        let samples = await sampler.value
        await summaries.close()
        guard dispatched == registrations else { throw BenchmarkError(message: "dispatched \(dispatched) of \(registrations) targets") }
        return Figures(
            registrations: registrations, seedSeconds: seedSeconds, dispatchSeconds: dispatchSeconds,
            batches: (registrations + DeliveryBatch.maximumTargets - 1) / DeliveryBatch.maximumTargets, rssBeforeMB: rssBefore,
            rssPeakMB: samples.map(\.1).max() ?? rssBefore, rssSamples: samples.map { (tenthsOfSecond: $0.0, mb: $0.1) })
    }

    /// The process's resident memory now, from /proc (MB).
    static func residentMB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes / 1024
    }
}
