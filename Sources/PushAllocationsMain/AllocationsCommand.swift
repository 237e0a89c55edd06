import ArgumentParser
import CMallocCount
import Foundation
import PushConfiguration
import PushEnvironment
import PushLoad
import PushModel
import PushProviders
import PushWorker
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `pushhub-allocations`: counts the heap allocations (malloc, calloc, realloc) a delivery
/// costs on a worker's path, against a running simulator: a number that does not depend on the
/// machine's speed or load, for the regression guard in `make test`.
@main
struct AllocationsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushhub-allocations",
        abstract: "Count heap allocations per delivery on a worker's path: batch decoded, targets prepared, pushed, results encoded.",
        discussion: """
            Start pushhub sim --attach HUB first. Each DeliveryBatch (500 native targets, or --targets) goes through what the \
            worker does with it: WireCoding decodes it, DeliveryWorker.prepare makes each push, the platform's \
            provider sends them through PushHub's HTTP client to the simulator, and the ResultBatch is encoded. \
            Two batches warm up; the rest are counted. Prints ALLOCATIONS_PER_DELIVERY.
            """)

    @OptionGroup var pns: SimulatedPNSOptions

    @Option(help: "Batches counted, after two that warm up.")
    var batches = 10

    @Option(help: "Targets in each batch (1 is a single-user send's batch).")
    var targets = DeliveryBatch.maximumTargets

    func run() async throws {
        let platform = try pns.parsedPlatform()
        let (hub, simURL) = (pns.hub, pns.simURL)
        guard (1...1000).contains(batches) else { throw ValidationError("--batches must be between 1 and 1000") }
        guard (1...DeliveryBatch.maximumTargets).contains(targets) else {
            throw ValidationError("--targets must be between 1 and \(DeliveryBatch.maximumTargets)")
        }
        let size = targets
        let hubs = try HubsConfiguration.load(from: pns.configPath)
        let http = PNSHTTPClient(trustRootsFile: pns.trustRoots)
        let provider = try ProviderFactory.make(platform, hubs: hubs, http: http)
        let notificationId = UUID().uuidString.lowercased()
        let records = try (0..<batches + 2).map { number -> Data in
            let targets = (0..<size).map { index in
                let (handle, keys) = LoadPopulation.simulatedHandle(platform, id: "allocations-\(number)-\(index)", simulatorURL: simURL)
                return DeliveryBatch.Target(registrationId: nil, handle: handle, webPush: keys)
            }
            return try WireCoding.encode(
                DeliveryBatch(
                    notificationId: notificationId, hub: hub, platform: platform, kind: .native, format: platform.templateFormat,
                    body: LoadPayloads.native(platform), headers: LoadPayloads.nativeHeaders(platform), enqueuedAt: Date(), targets: targets))
        }
        var counted = 0
        var delivered = 0
        for (number, record) in records.enumerated() {
            if number == 2 { pushhub_allocations_start() }
            delivered += try await Self.work(record, provider: provider)
            if number >= 2 { counted += size }
        }
        let allocations = pushhub_allocations_stop()
        await http.shutdown()
        guard delivered == records.count * size else {
            throw ValidationError("\(delivered) of \(records.count * size) pushes were delivered")
        }
        print("\(allocations) heap allocations for \(counted) deliveries")
        print("ALLOCATIONS_PER_DELIVERY=\(String(format: "%.1f", Double(allocations) / Double(counted)))")
    }

    /// One batch the way the worker works it; the pushes delivered.
    static func work(_ record: Data, provider: any PushProvider) async throws -> Int {
        let batch = try WireCoding.decode(DeliveryBatch.self, from: record)
        let renderer = TemplateRenderer(properties: [:])
        let expiresAt = Date().addingTimeInterval(1800)
        var renderings = BatchRenderings()
        let deliveries = try batch.targets.map {
            try DeliveryWorker.prepare($0, of: batch, renderer: renderer, expiresAt: expiresAt, renderings: &renderings).get()
        }
        let answers = await provider.deliverAll(deliveries)
        let results = zip(batch.targets, answers).map { target, answer in
            DeliveryResult(
                registrationId: target.registrationId, handle: target.handle, outcome: answer.classification.finalOutcome,
                pnsStatus: answer.status, pnsReason: answer.reason, attempts: 1, dwellMs: 0)
        }
        _ = try WireCoding.encode(ResultBatch(notificationId: batch.notificationId, hub: batch.hub, platform: batch.platform, results: results))
        return answers.count { $0.classification == .delivered }
    }
}
