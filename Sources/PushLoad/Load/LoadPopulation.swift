import Foundation
import PushModel
import PushSimulator

/// Why a load run could not start or go on; names the option or field at fault.
public struct LoadFailure: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The devices a load run registers and sends to, derived from their index alone: any run
/// with the same prefix, count and mixes names the same installations, handles, users and tags,
/// so `send` finds what `register` made without keeping a list.
public struct LoadPopulation: Sendable, Equatable {
    /// How many devices there are.
    public var devices: Int
    /// Devices share users round-robin: device `i` belongs to user `i % users`.
    public var users: Int
    /// Starts every installation id and user id, so runs do not collide.
    public var prefix: String
    public var platforms: PlatformMix
    public var tags: TagMix
    /// Base URL of the simulator's plain listener: WNS channels and Web Push endpoints point there.
    public var simulatorURL: String

    /// Most devices one run may register.
    public static let maximumDevices = 10_000_000
    /// The template every installation carries; template sends set its one property.
    public static let templateName = "load"
    public static let templateProperty = "message"

    public init(
        devices: Int, users: Int? = nil, prefix: String = "load", platforms: PlatformMix = .default, tags: TagMix = .default, simulatorURL: String
    ) throws(LoadFailure) {
        guard (1...Self.maximumDevices).contains(devices) else { throw LoadFailure("--devices must be 1 to \(Self.maximumDevices), not \(devices)") }
        let users = users ?? devices
        guard (1...devices).contains(users) else { throw LoadFailure("--users must be 1 to --devices (\(devices)), not \(users)") }
        guard !prefix.isEmpty, prefix.count <= 64, prefix.unicodeScalars.allSatisfy({ Tags.isAllowed($0) && $0 != ":" }) else {
            throw LoadFailure("--prefix must be 1 to 64 letters, digits and _ @ # . -")
        }
        self.devices = devices
        self.users = users
        self.prefix = prefix
        self.platforms = platforms
        self.tags = tags
        self.simulatorURL = simulatorURL.hasSuffix("/") ? String(simulatorURL.dropLast()) : simulatorURL
    }

    public func installationId(_ index: Int) -> String { "\(prefix)-\(index)" }
    public func userId(ofUser user: Int) -> String { "\(prefix)-user-\(user)" }
    public func platform(_ index: Int) -> Platform { platforms.platform(of: index) }
    /// The tag expression that reaches exactly one user's devices.
    public func userTag(_ user: Int) -> String { Tags.user(userId(ofUser: user)) }

    /// A handle at the simulator for device `id` of `platform`: an APNs token, an FCM token, a
    /// WNS channel or a Web Push subscription (with its keys) under `simulatorURL`.
    public static func simulatedHandle(_ platform: Platform, id: String, simulatorURL: String) -> (handle: String, keys: WebPushKeys?) {
        switch platform {
        case .apns: return (SimulatedHandle.apns(id), nil)
        case .fcm: return ("fcm-\(id)", nil)
        case .wns: return (SimulatedHandle.wnsChannel(base: simulatorURL, id: id), nil)
        case .webpush:
            let subscription = SimulatedSubscription(id: id)
            return (subscription.endpoint(base: simulatorURL), subscription.keys)
        case .hms, .adm, .xiaomi: return ("\(platform.rawValue)-\(id)", nil)
        // Azure's `{userId}-{channelId}`.
        case .baidu: return ("user\(id.count)-\(id)", nil)
        }
    }

    /// The installation device `index` registers.
    public func installation(_ index: Int) -> Installation {
        let id = installationId(index)
        let platform = platform(index)
        let (handle, keys) = Self.simulatedHandle(platform, id: id, simulatorURL: simulatorURL)
        return Installation(
            installationId: id, userId: userId(ofUser: index % users), platform: platform.installationPlatform, pushChannel: handle,
            webPush: keys, tags: tags.tags(of: index),
            templates: [Self.templateName: LoadPayloads.template(platform)])
    }
}

/// Shares of the four platforms in whole percent, e.g. `apns=60,fcm=30,wns=5,webpush=5`.
public struct PlatformMix: Sendable, Equatable, CustomStringConvertible {
    public var shares: [Platform: Int]
    public static let `default` = PlatformMix(shares: [.apns: 60, .fcm: 30, .wns: 5, .webpush: 5])

    public init(shares: [Platform: Int]) { self.shares = shares }

    public init(parsing text: String) throws(LoadFailure) {
        var shares: [Platform: Int] = [:]
        for (name, value) in try MixText.pairs(text, option: "--platforms") {
            guard let platform = Platform(named: name) else { throw LoadFailure("--platforms: \(name) is not \(Platform.names)") }
            guard let percent = Int(value), (0...100).contains(percent) else {
                throw LoadFailure("--platforms: \(name)=\(value) must be a whole percent, 0 to 100")
            }
            shares[platform] = percent
        }
        guard shares.values.reduce(0, +) == 100 else {
            throw LoadFailure("--platforms: the shares must add up to 100, not \(shares.values.reduce(0, +))")
        }
        self.shares = shares
    }

    /// Device `index`'s platform. Each run of 100 consecutive devices has exactly the shares:
    /// the index is spread over 0..<100 by a multiplier prime to 100.
    public func platform(of index: Int) -> Platform {
        let slot = (index % 100) * 37 % 100
        var bound = 0
        for platform in Platform.allCases {
            bound += shares[platform] ?? 0
            if slot < bound { return platform }
        }
        return .apns
    }

    public var description: String { Platform.allCases.compactMap { p in shares[p].map { "\(p.rawValue)=\($0)" } }.joined(separator: ",") }
}

/// Tags and the share of devices that carry each, in percent, e.g. `Sports=50,Politics=33`;
/// each device draws each tag independently (deterministically, from its index).
public struct TagMix: Sendable, Equatable, CustomStringConvertible {
    public var tags: [(name: String, percent: Double)]
    public static let `default` = try! TagMix(parsing: "Sports=50,Politics=33,Music=25,Weather=10,lang:en=20")

    public init(parsing text: String) throws(LoadFailure) {
        var tags: [(String, Double)] = []
        for (name, value) in try MixText.pairs(text, option: "--tags") {
            do { try Tags.validate([name], field: "--tags") } catch { throw LoadFailure("\(error)") }
            guard let percent = Double(value), (0...100).contains(percent) else {
                throw LoadFailure("--tags: \(name)=\(value) must be a percent, 0 to 100")
            }
            tags.append((name, percent))
        }
        guard tags.count <= 50 else { throw LoadFailure("--tags: at most 50 tags, not \(tags.count)") }
        self.tags = tags
    }

    public func tags(of index: Int) -> [String] {
        tags.enumerated().compactMap { number, tag in
            Double(Self.mix(UInt64(index) &* 1_000_003 &+ UInt64(number)) % 10_000) < tag.percent * 100 ? tag.name : nil
        }
    }

    /// splitmix64's finalizer: a well-spread hash of an integer.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public var description: String { tags.map { "\($0.name)=\($0.percent)" }.joined(separator: ",") }

    public static func == (lhs: TagMix, rhs: TagMix) -> Bool { lhs.description == rhs.description }
}

enum MixText {
    static func pairs(_ text: String, option: String) throws(LoadFailure) -> [(String, String)] {
        var pairs: [(String, String)] = []
        for part in text.split(separator: ",") {
            guard let equals = part.lastIndex(of: "="), equals != part.startIndex else { throw LoadFailure("\(option): \(part) is not NAME=PERCENT") }
            pairs.append(
                (
                    String(part[..<equals]).trimmingCharacters(in: .whitespaces),
                    String(part[part.index(after: equals)...]).trimmingCharacters(in: .whitespaces)
                ))
        }
        guard !pairs.isEmpty else { throw LoadFailure("\(option) names nothing") }
        return pairs
    }
}

/// What load runs and benchmarks send: an ordinary notification per platform, and the template
/// each installation registers.
public enum LoadPayloads {
    public static func native(_ platform: Platform) -> String {
        switch platform {
        case .apns: #"{"aps":{"alert":{"title":"PushHub load","body":"A notification of ordinary size for the benchmark"},"badge":1}}"#
        case .fcm: #"{"message":{"notification":{"title":"PushHub load","body":"A notification of ordinary size"}}}"#
        case .wns: #"<toast><visual><binding template="ToastText01"><text id="1">PushHub load</text></binding></visual></toast>"#
        case .webpush: #"{"title":"PushHub load","body":"A notification of ordinary size"}"#
        case .hms:
            #"{"message":{"android":{"notification":{"title":"PushHub load","body":"A notification of ordinary size","click_action":{"type":3}}}}}"#
        case .adm: #"{"data":{"title":"PushHub load","body":"A notification of ordinary size"},"consolidationKey":"load"}"#
        case .xiaomi: #"{"title":"PushHub load","description":"A notification of ordinary size","payload":"load","pass_through":0}"#
        case .baidu: #"{"title":"PushHub load","description":"A notification of ordinary size"}"#
        }
    }

    /// Pass-through headers a native send of `platform` needs.
    public static func nativeHeaders(_ platform: Platform) -> [String: String] {
        platform == .wns ? ["X-WNS-Type": "wns/toast"] : [:]
    }

    public static func template(_ platform: Platform) -> Template {
        let property = "$(\(LoadPopulation.templateProperty))"
        switch platform {
        case .apns: return .init(body: #"{"aps":{"alert":"\#(property)"}}"#)
        case .fcm: return .init(body: #"{"message":{"notification":{"title":"PushHub load","body":"\#(property)"}}}"#)
        case .wns:
            return .init(
                body: #"<toast><visual><binding template="ToastText01"><text id="1">\#(property)</text></binding></visual></toast>"#,
                headers: ["X-WNS-Type": "wns/toast"])
        case .webpush: return .init(body: #"{"title":"PushHub load","body":"\#(property)"}"#)
        case .hms:
            return .init(body: #"{"message":{"android":{"notification":{"title":"PushHub load","body":"\#(property)","click_action":{"type":3}}}}}"#)
        case .adm: return .init(body: #"{"data":{"title":"PushHub load","body":"\#(property)"}}"#)
        case .xiaomi: return .init(body: #"{"title":"PushHub load","description":"\#(property)","payload":"load","pass_through":0}"#)
        case .baidu: return .init(body: #"{"title":"PushHub load","description":"\#(property)"}"#)
        }
    }

    /// A template send's properties.
    public static let templateProperties = #"{"\#(LoadPopulation.templateProperty)":"A notification of ordinary size for the benchmark"}"#
}

extension Platform {
    var installationPlatform: Installation.InstallationPlatform {
        switch self {
        case .apns: .apns
        case .fcm: .fcmv1
        case .wns: .wns
        case .webpush: .browser
        case .hms: .hms
        case .adm: .adm
        case .xiaomi: .xiaomi
        case .baidu: .baidu
        }
    }
}
