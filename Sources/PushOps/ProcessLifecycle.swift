import Logging
import ServiceLifecycle

/// How every PushHub process runs its services: started in order, shut down in reverse on
/// SIGTERM or SIGINT, and cancelled when a graceful shutdown takes longer than
/// `maximumShutdown` (a service whose Kafka is gone would otherwise retry until SIGKILL).
/// Cancellation itself has no time limit: ServiceLifecycle ends an over-long cancellation with
/// `fatalError`, and closing a Kafka consumer (a synchronous commit, leaving the group) may
/// take a while; what never ends is left to the orchestrator's SIGKILL.
public enum ProcessLifecycle {
    public static let maximumShutdown: Duration = .seconds(30)

    public static func group(
        _ services: [ServiceGroupConfiguration.ServiceConfiguration], signals: Bool = true, maximumShutdown: Duration = Self.maximumShutdown,
        logger: Logger
    ) -> ServiceGroup {
        var configuration = ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: signals ? [.sigterm, .sigint] : [], logger: logger)
        configuration.maximumGracefulShutdownDuration = maximumShutdown
        configuration.maximumCancellationDuration = nil
        return ServiceGroup(configuration: configuration)
    }
}

/// Services that run side by side as one, for a group that would otherwise stop them one
/// after another: a graceful shutdown reaches them all at once (they share the task's), so
/// none takes new work while another finishes its own, and stopping takes as long as the
/// slowest, not the sum. `pushhub dev` runs its eight platform workers this way.
///
/// It ends when every one has ended. One that fails ends the others (cancelled) and its error
/// is thrown. One that returns before a graceful shutdown began ends the others too, and
/// `Ended` names it, as a service of the group returning would end the group.
public struct ConcurrentServices: Service, CustomStringConvertible {
    let services: [any Service]

    public init(_ services: [any Service]) {
        self.services = services
    }

    /// A service that returned before any shutdown.
    public struct Ended: Error, CustomStringConvertible {
        public var service: String
        public var description: String { "\(service) ended before a shutdown" }
    }

    public var description: String { "ConcurrentServices(\(services.map { "\(type(of: $0))" }.joined(separator: ", ")))" }

    public func run() async throws {
        try await withThrowingTaskGroup(of: Int.self) { group in
            for (index, service) in services.enumerated() {
                group.addTask {
                    try await service.run()
                    return index
                }
            }
            do {
                while let index = try await group.next() {
                    if !Task.isShuttingDownGracefully { throw Ended(service: "\(type(of: services[index]))") }
                }
            } catch {
                group.cancelAll()
                throw error
            }
        }
    }
}
