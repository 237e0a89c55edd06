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
