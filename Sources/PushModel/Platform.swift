/// A push notification service, and the suffix of its deliveries topic.
public enum Platform: String, Codable, Sendable, CaseIterable, CodingKeyRepresentable {
    case apns
    case fcm
    case wns
    case webpush
    /// Huawei Push Kit (HMS).
    case hms
    /// Amazon Device Messaging.
    case adm
    /// Xiaomi Mi Push.
    case xiaomi
    /// Baidu Cloud Push.
    case baidu

    /// Its place in `allCases`, found without a search.
    public var ordinal: Int {
        switch self {
        case .apns: 0
        case .fcm: 1
        case .wns: 2
        case .webpush: 3
        case .hms: 4
        case .adm: 5
        case .xiaomi: 6
        case .baidu: 7
        }
    }

    /// The consumer group its workers share unless told otherwise: `pushhub-<pns>-worker`.
    public var workerGroup: String { "pushhub-\(rawValue)-worker" }

    /// A platform by its name or by its native format's (`apple`, `fcmv1`, `gcm`, `windows`,
    /// `browser`), in any case: the one set of names the command line takes.
    public init?(named text: String) {
        let name = text.lowercased()
        if let platform = Platform(rawValue: name) {
            self = platform
        } else if let format = NativeFormat(rawValue: name) {
            self = format.platform
        } else {
            return nil
        }
    }

    /// The names `init(named:)` takes, for help and errors.
    public static let names = "apns (or apple), fcm (fcmv1, gcm), wns (windows), webpush (browser), hms, adm, xiaomi, baidu"
}

/// The format of a send: one platform's native payload, or a template notification whose
/// body holds the properties that every matching template is filled with.
public enum NotificationFormat: String, Codable, Sendable, CaseIterable {
    case apple
    case fcmv1
    case gcm
    case windows
    case browser
    case hms
    case adm
    case xiaomi
    case baidu
    case template

    /// The most bytes of a body in this format: the platform's payload limit, or a template
    /// notification's properties. Checked wherever a send comes from (the hub API's builder,
    /// and `SendRequest.validate` for those produced straight into Kafka), since the body is
    /// copied into every batch of the send.
    public func sizeLimit(headers: [String: String]) -> Int {
        switch self {
        case .apple: headers.first { $0.key.lowercased() == "apns-push-type" }?.value.lowercased() == "voip" ? 5120 : 4096
        case .gcm, .fcmv1: 4096
        case .windows: 5000
        case .browser: 4096
        // Huawei's and ADM's documented limits; Xiaomi's and Baidu's are not published in a
        // form PushHub could confirm, and 4 KiB is what their SDKs' guides suggest.
        case .hms: 4096
        case .adm: 6144
        case .xiaomi, .baidu: 4096
        case .template: 64 * 1024
        }
    }

    /// The platform a native format is delivered through; `nil` for `template`, which
    /// reaches every platform.
    public var platform: Platform? { NativeFormat(self)?.platform }

    /// A format by its name or by its platform's (`apns` for apple, `fcm` for fcmv1, `wns` for
    /// windows, `webpush` for browser), in any case: the one set of names the command line
    /// takes. (The hub API's `ServiceBusNotification-Format` takes Azure's names only.)
    public init?(named text: String) {
        let name = text.lowercased()
        if let format = NotificationFormat(rawValue: name) {
            self = format
            return
        }
        switch Platform(rawValue: name) {
        case .apns: self = .apple
        case .fcm: self = .fcmv1
        case .wns: self = .windows
        case .webpush: self = .browser
        case .hms: self = .hms
        case .adm: self = .adm
        case .xiaomi: self = .xiaomi
        case .baidu: self = .baidu
        case nil: return nil
        }
    }

    /// The names `init(named:)` takes, for help and errors.
    public static let names = "apple (or apns), fcmv1 (fcm), gcm, windows (wns), browser (webpush), hms, adm, xiaomi, baidu, template"
}

/// The format of a device's platform: a notification format other than `template`. What a
/// registration has, so its platform is never a guess.
public enum NativeFormat: String, Codable, Sendable, CaseIterable {
    case apple
    case fcmv1
    case gcm
    case windows
    case browser
    case hms
    case adm
    case xiaomi
    case baidu

    public var platform: Platform {
        switch self {
        case .apple: .apns
        case .fcmv1, .gcm: .fcm
        case .windows: .wns
        case .browser: .webpush
        case .hms: .hms
        case .adm: .adm
        case .xiaomi: .xiaomi
        case .baidu: .baidu
        }
    }

    /// The same format as a notification format.
    public var notificationFormat: NotificationFormat { NotificationFormat(rawValue: rawValue)! }

    /// `format` unless it is `template`.
    public init?(_ format: NotificationFormat) { self.init(rawValue: format.rawValue) }
}

extension Platform {
    /// The native format a filled template is in on this platform (FCM: v1; a filled `gcm`
    /// template is recognised by its shape).
    public var templateFormat: NotificationFormat {
        switch self {
        case .apns: .apple
        case .fcm: .fcmv1
        case .wns: .windows
        case .webpush: .browser
        case .hms: .hms
        case .adm: .adm
        case .xiaomi: .xiaomi
        case .baidu: .baidu
        }
    }
}
