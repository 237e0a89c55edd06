import ArgumentParser
import Foundation
import PushConfiguration
import PushEnvironment
import PushIngress
import PushKafka
import PushLoad
import PushModel
import PushProviders
import PushSimulator
import PushWorker
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

extension BenchCommand {
    /// Feeds a running worker and times it: DeliveryBatches straight into its topic, results counted.
    struct Worker: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Produce DeliveryBatches of simulator handles for a running worker and count its results.",
            discussion:
                "Start pushhub sim --attach HUB and the platform's worker first. A batch of other devices warms the worker up first (WARM_UP_TARGETS=); then prints deliveries/s from the first batch produced to the last result.\n\nExamples:\n  pushhub bench worker --platform apns --targets 200000\n  pushhub bench worker --platform fcm --targets 50000 --sim-url \"$PUSHHUB_SIM_URL\""
        )

        @OptionGroup var kafka: KafkaOptions

        @Option(help: "The hub whose credentials the worker uses.")
        var hub = "pushhub-dev"

        @Option(help: "apns, fcm, wns, webpush, hms, adm, xiaomi or baidu.")
        var platform: String = "apns"

        @Option(help: "Targets to deliver.")
        var targets = 200_000

        @Option(help: "Base URL of the simulator's plain listener (for WNS and Web Push handles).")
        var simURL = "http://127.0.0.1"

        func run() async throws {
            guard let platform = Platform(named: platform) else { throw ValidationError("--platform must be \(Platform.names), not \(platform)") }
            guard targets > 0 else { throw ValidationError("--targets must be positive") }
            let logger = makeLogger("pushhub.bench")
            let servers = try kafka.servers()
            let topics = kafka.topics
            let notificationId = UUID().uuidString.lowercased()
            var configuration = KafkaConsumerConfiguration(bootstrapServers: servers, groupID: "pushhub-bench-\(notificationId)")
            configuration.offsetReset = .latest
            // The embedded cluster holds a fetch that finds nothing for the whole fetch wait
            // (Kafka answers as soon as a record arrives): at the default 50 ms, the clock
            // stopped up to 50 ms after the last result, counted against the worker.
            configuration.fetchWait = .milliseconds(5)
            // librdkafka's batch poll returns when it holds its whole batch or its time (100 ms)
            // is up: at the default 500 records, results (one record a batch) came to the
            // counter in steps of 100 ms, and the clock stopped up to 100 ms after the last.
            configuration.fetchBatchSize = 1
            let results = try KafkaConsumer.make(configuration: configuration, topics: [topics.results], logger: logger)
            // The results consumer must be in place before the first result can arrive.
            let wanted = targets
            // Counting must not compete with the worker for the CPU: results are counted by a
            // byte search for this notification's id and the delivered outcome, not decoded.
            let idBytes = Data(notificationId.utf8)
            let delivered = Data(#""outcome":"delivered""#.utf8)
            let warmUpId = UUID().uuidString.lowercased()
            let warmUpBytes = Data(warmUpId.utf8)
            let progress = Delivered()
            let counter = Task {
                var counted = 0
                for await record in results.records {
                    if Self.occurrences(of: warmUpBytes, in: record.value, atMost: 1) > 0 {
                        progress.warmedUp.store(true, ordering: .relaxed)
                        continue
                    }
                    guard Self.occurrences(of: idBytes, in: record.value, atMost: 1) > 0 else { continue }
                    counted += Self.occurrences(of: delivered, in: record.value)
                    progress.count.store(counted, ordering: .relaxed)
                    if counted >= wanted { break }
                }
                return counted
            }
            // Results that stop coming for a minute end the run (the counter's sequence ends
            // when its task is cancelled) rather than leave it waiting for ever.
            let watchdog = Task {
                var last = -1
                var quietSince = ContinuousClock.now
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    let now = progress.count.load(ordering: .relaxed)
                    if now != last {
                        last = now
                        quietSince = .now
                    } else if ContinuousClock.now - quietSince > Self.quietLimit {
                        counter.cancel()
                        return
                    }
                }
            }
            defer { watchdog.cancel() }
            // The results consumer reads from the topic's end: it must know where that is before
            // the warm-up goes, or the warm-up's result may come before it and never be read.
            guard await results.positioned(within: Self.quietLimit) else {
                throw ValidationError("the results consumer had no partitions of \(topics.results) within \(Self.quietLimit): is Kafka running?")
            }
            let producer = try KafkaProducer.make(configuration: KafkaProducerConfiguration(bootstrapServers: servers), logger: logger)
            // The deliveries topic's partitions and leaders are learnt before the clock starts,
            // as a process's producer learns its topics when it starts: unprepared, the first
            // batch waited 0.7 s for them, and the APNs worker's 200,000 targets were measured
            // at 54,000 a second where it delivered 85,000 a second once they came.
            await producer.prepare(topics: [topics.deliveries(platform)])
            /// One batch of `count` targets from `first`, as a record.
            func record(_ id: String, _ first: Int, _ count: Int, prefix: String) throws -> KafkaOutgoingRecord {
                let batchTargets = (first..<first + count).map { Self.target(platform, $0, prefix: prefix, simURL: simURL) }
                let batch = DeliveryBatch(
                    notificationId: id, hub: hub, platform: platform, kind: .native, format: platform.templateFormat,
                    body: LoadPayloads.native(platform), headers: LoadPayloads.nativeHeaders(platform), enqueuedAt: Date(), targets: batchTargets)
                return KafkaOutgoingRecord(
                    topic: topics.deliveries(platform), key: "\(id):\(first / DeliveryBatch.maximumTargets)", value: try WireCoding.encode(batch))
            }
            // One batch of other devices is delivered before the clock starts, as a running
            // worker has delivered before: its connections to the PNS are open and its consumer
            // is reading. Cold, the first results came 0.1 to 0.15 s after the first batch (TLS
            // handshakes, and the embedded cluster holding the worker's fetch), 8 % of a run of
            // 200,000 APNs targets. One is enough: a worker's group starts at the beginning of
            // its topic, and the results consumer is positioned. (One more each second without a
            // result put ten batches ahead of the measured ones where a batch took ten seconds,
            // as Web Push's do in a debug build on a loaded machine.)
            let warmUpStarted = ContinuousClock.now
            try await producer.sendAllAcknowledged([record(warmUpId, 0, DeliveryBatch.maximumTargets, prefix: "bench-warm-up")])
            while !progress.warmedUp.load(ordering: .relaxed) {
                guard ContinuousClock.now - warmUpStarted < Self.quietLimit, !counter.isCancelled else {
                    throw ValidationError("the warm-up batch had no result within \(Self.quietLimit): is the worker running?")
                }
                try await Task.sleep(for: .milliseconds(5))
            }
            // What the worker delivered besides the measured targets.
            emit("WARM_UP_TARGETS=\(DeliveryBatch.maximumTargets)")
            // The batches are made before the clock starts.
            var records: [KafkaOutgoingRecord] = []
            var index = 0
            while index < targets {
                let count = min(DeliveryBatch.maximumTargets, targets - index)
                records.append(try record(notificationId, index, count, prefix: "bench"))
                index += count
            }
            // At most `Self.aheadBytes` of batches produced and not yet delivered: the embedded
            // cluster keeps 5 MiB a partition and drops the oldest records beyond it, read or
            // not, and 200,000 Web Push targets (keys with each) are about 50 MB. A count of
            // targets instead (20,000) held APNs, whose targets are a fifth the size, to what
            // that count allowed in flight, whatever the worker could do.
            let bytes = records.reduce(0) { $0 + $1.value.count }
            let aheadTargets = max(DeliveryBatch.maximumTargets * Self.recordsAtOnce, Self.aheadBytes * targets / max(1, bytes))
            let started = ContinuousClock.now
            for chunk in stride(from: 0, to: records.count, by: Self.recordsAtOnce) {
                let produced = chunk * DeliveryBatch.maximumTargets
                while produced - progress.count.load(ordering: .relaxed) > aheadTargets, !counter.isCancelled {
                    try await Task.sleep(for: .milliseconds(5))
                }
                try await producer.sendAllAcknowledged(Array(records[chunk..<min(chunk + Self.recordsAtOnce, records.count)]))
            }
            let produced = ContinuousClock.now - started
            let deliveredCount = await counter.value
            guard deliveredCount >= wanted else {
                throw ValidationError("results stopped: \(deliveredCount) of \(wanted) targets delivered, none more for \(Self.quietLimit)")
            }
            let elapsed = ContinuousClock.now - started
            let seconds = elapsed.seconds
            emit("produced \(targets) targets in \(produced); \(deliveredCount) delivered in \(elapsed)")
            emit("DELIVERIES_PER_SECOND=\(Int(Double(deliveredCount) / seconds))")
            await results.close()
            await producer.shutdown()
        }

        /// Targets delivered so far, as the counter saw them.
        final class Delivered: Sendable {
            let count = Atomic<Int>(0)
            /// Whether the warm-up batch's results came.
            let warmedUp = Atomic<Bool>(false)
        }

        /// Bytes of batches produced ahead of the results at most (over the topic's partitions,
        /// about a fifth of the cluster's 5 MiB each on the benches' 4, with room for a chunk
        /// more and an uneven spread by key), and how long results may stop.
        static let aheadBytes = 4 << 20
        /// DeliveryBatches produced at a time (10, 40 and 100 delivered at the same rate).
        static let recordsAtOnce = 10
        static let quietLimit: Duration = .seconds(60)

        /// How often `needle` occurs in `haystack` (up to `atMost`), by memchr and memcmp: the
        /// harness must cost little beside the worker it measures.
        static func occurrences(of needle: Data, in haystack: Data, atMost: Int = .max) -> Int {
            guard !needle.isEmpty else { return 0 }
            return haystack.withUnsafeBytes { hay in
                needle.withUnsafeBytes { wanted in
                    guard let start = hay.baseAddress, let pattern = wanted.baseAddress else { return 0 }
                    var count = 0
                    var offset = 0
                    let first = Int32(wanted[0])
                    while count < atMost, hay.count - offset >= wanted.count,
                        let found = memchr(start + offset, first, hay.count - offset - wanted.count + 1)
                    {
                        let at = start.distance(to: UnsafeRawPointer(found))
                        if memcmp(found, pattern, wanted.count) == 0 {
                            count += 1
                            offset = at + wanted.count
                        } else {
                            offset = at + 1
                        }
                    }
                    return count
                }
            }
        }

        static func target(_ platform: Platform, _ index: Int, prefix: String, simURL: String) -> DeliveryBatch.Target {
            let (handle, keys) = LoadPopulation.simulatedHandle(platform, id: "\(prefix)-\(index)", simulatorURL: simURL)
            return DeliveryBatch.Target(registrationId: nil, handle: handle, webPush: keys)
        }
    }

    /// The exact request a worker would send for one push, for h2load against the simulator.
    struct PNSRequestCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pns-request",
            abstract: "Print the request a worker sends for one push (URL, protocol, headers) and write its body, for h2load against pushhub sim.",
            discussion:
                "Examples:\n  pushhub bench pns-request --platform fcm --body-file /tmp/body\n  pushhub bench pns-request --platform wns --sim-url \"$PUSHHUB_SIM_URL\" --body-file /tmp/body"
        )

        @OptionGroup var pns: SimulatedPNSOptions

        @Option(help: "Where to write the request's body.")
        var bodyFile: String

        func run() async throws {
            let platform = try pns.parsedPlatform()
            let (hub, simURL) = (pns.hub, pns.simURL)
            let hubs = try HubsConfiguration.load(from: pns.configPath)
            let http = PNSHTTPClient(trustRootsFile: pns.trustRoots)
            defer { Task { await http.shutdown() } }
            let capture = CapturingTransport(network: http)
            let provider = try ProviderFactory.make(platform, hubs: hubs, http: capture)
            let (handle, keys) = LoadPopulation.simulatedHandle(platform, id: "bench-h2load", simulatorURL: simURL)
            let answer = await provider.deliver(
                PNSDelivery(
                    hub: hub, notificationId: UUID().uuidString.lowercased(), handle: handle, webPush: keys, format: platform.templateFormat,
                    body: LoadPayloads.native(platform), headers: LoadPayloads.nativeHeaders(platform)))
            guard let request = capture.captured else { throw CommandFailure(description: "the provider sent nothing: \(answer)") }
            let url: String
            switch request.target {
            case .url(let whole): url = whole
            case .http2(let origin, let path): url = origin + path
            }
            try request.body.write(to: URL(fileURLWithPath: bodyFile))
            emit("URL=\(url)")
            emit("PROTOCOL=\(url.hasPrefix("https:") ? "h2" : "h1")")
            for field in request.headers.fields { emit("HEADER=\(field.name): \(field.value)") }
        }
    }
}

/// Passes token requests to the network and keeps the first push request, answering it 200.
final class CapturingTransport: PNSTransport {
    private let network: PNSHTTPClient
    private let kept = Mutex<PNSRequest?>(nil)

    init(network: PNSHTTPClient) { self.network = network }

    var captured: PNSRequest? { kept.withLock { $0 } }

    func send(_ request: PNSRequest) async throws -> PNSResponse {
        if request.headers.first(name: "content-type") == "application/x-www-form-urlencoded" { return try await network.send(request) }
        kept.withLock { if $0 == nil { $0 = request } }
        return PNSResponse(status: 201)
    }
}
