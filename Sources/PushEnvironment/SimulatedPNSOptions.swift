import ArgumentParser
import PushModel

/// Which hub's credentials to use against a running `pushhub sim`, for the tools that send a
/// worker's pushes to it (`pushhub bench pns-request`, `pushhub-allocations`).
public struct SimulatedPNSOptions: ParsableArguments {
    @Option(help: "pushhub.yaml (default: $PUSHHUB_CONFIG or ./data/pushhub.yaml).")
    public var config: String?

    @Option(help: "The hub.")
    public var hub = "pushhub-dev"

    @Option(help: "apns, fcm, wns, webpush, hms, adm, xiaomi or baidu.")
    public var platform: String = "apns"

    @Option(help: "Base URL of the simulator listener WNS channels and Web Push endpoints point at.")
    public var simURL = "https://127.0.0.1"

    @Option(help: "A PEM CA to trust besides the system's (the simulator's; default $PUSHHUB_PNS_CA).")
    public var trustCA: String?

    public init() {}

    /// `--platform` as a platform.
    public func parsedPlatform() throws -> Platform {
        guard let platform = Platform(named: platform) else { throw ValidationError("--platform must be \(Platform.names), not \(platform)") }
        return platform
    }

    public var configPath: String { config ?? PushHubEnvironment.current.configPath }
    public var trustRoots: String? { trustCA ?? PushHubEnvironment.current.pnsTrustRoots }
}
