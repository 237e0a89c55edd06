import Foundation
import PushConfiguration
import PushModel

/// Xiaomi Mi Push: `POST /v3/message/regid`, form-encoded, with `Authorization: key=<AppSecret>`.
/// The body of a `xiaomi` send is a JSON object of Mi Push's message fields (`payload`,
/// `title`, `description`, `pass_through`, `notify_type`, `time_to_live`, …; an `extra` object
/// becomes `extra.*` fields). PushHub adds `registration_id` and `restricted_package_name`.
public struct XiaomiService: PerDeviceService {
    public static let platform = Platform.xiaomi
    /// The limit PushHub holds a message to (bytes); Mi Push answers 65009 past its own.
    public static let maximumPayload = 4096
    /// Fields PushHub sets itself.
    static let reserved: Set<String> = ["registration_id", "restricted_package_name", "topic", "topics", "alias", "aliases", "user_account"]

    public struct Shared {
        var url: String
        /// The form after `registration_id`, starting with `&`.
        var rest: Data
        /// The content type and the app secret's `Authorization`, the same for every regid.
        var headers: PNSHeaderFields
    }

    public init() {}

    public func accessTokens(_ credentials: XiaomiCredentials, transport: any PNSTransport, now: @escaping @Sendable () -> Date)
        -> CachedAccessToken?
    { nil }

    public func shared(_ delivery: PNSDelivery, credentials: XiaomiCredentials) -> Result<Shared, NotSent> {
        guard let object = JSONLimits.dictionary(Data(delivery.body.utf8)) else {
            return .failure(NotSent(.payloadRejected, "10017: the Mi Push body is not a JSON object"))
        }
        var fields: [(String, String)] = [("restricted_package_name", credentials.packageName)]
        for (key, value) in object.sorted(by: { $0.key < $1.key }) {
            guard Self.isFieldName(key) else {
                return .failure(NotSent(.payloadRejected, "10017: a Mi Push field is named in letters, digits, . _ and -, not \(key.prefix(32))"))
            }
            if Self.reserved.contains(key) {
                return .failure(NotSent(.payloadRejected, "10017: \(key) is not allowed; PushHub addresses each device by its regid"))
            }
            if key == "extra", let extra = value as? [String: Any] {
                for (name, value) in extra.sorted(by: { $0.key < $1.key }) {
                    guard Self.isFieldName(name) else {
                        return .failure(
                            NotSent(.payloadRejected, "10017: an extra field is named in letters, digits, . _ and -, not \(name.prefix(32))"))
                    }
                    guard !(value is [String: Any] || value is [Any]) else {
                        return .failure(NotSent(.payloadRejected, "10017: extra.\(name) must be a string or number"))
                    }
                    fields.append(("extra.\(name)", FCMMessage.string(value)))
                }
            } else if key == "payload" || !(value is [String: Any] || value is [Any]) {
                // `payload` is a string Mi Push hands the app; an object is sent as its JSON.
                fields.append((key, FCMMessage.string(value)))
            } else {
                return .failure(NotSent(.payloadRejected, "10017: \(key) must be a string or number"))
            }
        }
        if let expiresAt = delivery.expiresAt, object["time_to_live"] == nil {
            fields.append(("time_to_live", String(max(1, Int((expiresAt.timeIntervalSinceNow * 1000).rounded(.up))))))
        }
        let rest = Data(("&" + FormEncoding.encode(fields)).utf8)
        // The limit is on what the app gets, not on its percent-encoding (a CJK character is 3
        // bytes, and 9 encoded).
        guard fields.reduce(0, { $0 + $1.1.utf8.count }) <= Self.maximumPayload + 512 else {
            return .failure(NotSent(.payloadRejected, "65009: the message is larger than \(Self.maximumPayload) bytes"))
        }
        return .success(
            Shared(
                url: "\(credentials.resolvedEndpoint)/v3/message/regid", rest: rest,
                headers: [("content-type", "application/x-www-form-urlencoded;charset=UTF-8"), ("authorization", "key=\(credentials.appSecret)")]))
    }

    /// A form field's name as Mi Push names them: nothing a form would read as another field.
    static func isFieldName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64
            && name.utf8.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == UInt8(ascii: ".")
                    || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-")
            }
    }

    /// One regid a request: a comma would make it several.
    public func address(of handle: String, credentials: XiaomiCredentials) -> Result<String, NotSent> {
        handle.isEmpty || handle.contains(",") ? .failure(NotSent(.invalidHandle, "bad regid")) : .success(handle)
    }

    public func request(_ shared: Shared, to regid: String, credentials: XiaomiCredentials) -> Result<PNSRequest, NotSent> {
        var body = Data("registration_id=\(FormEncoding.escape(regid))".utf8)
        body.append(shared.rest)
        return .success(PNSRequest(.url(shared.url), headers: shared.headers, body: body))
    }

    public func classify(_ response: PNSResponse) -> PNSAnswer {
        let object = response.json
        let code = (object?["code"] as? NSNumber)?.intValue
        let data = object?["data"] as? [String: Any]
        // Regids Mi Push refused, comma-separated; clients spell the key three ways.
        let bad = ["bad_regids", "bad_regIds", "badRegIds"].lazy.compactMap { data?[$0] as? String }.first { !$0.isEmpty }
        let classification = Self.classify(status: response.status, code: code, badRegids: bad, retryAfter: response.retryAfter)
        let reason = (object?["reason"] as? String) ?? (object?["description"] as? String)
        return PNSAnswer(
            classification, status: response.status,
            reason: classification == .delivered ? nil : bad != nil ? "bad regid" : code.map { "\($0) \(reason ?? "")" } ?? "HTTP \(response.status)")
    }

    /// Mi Push's answers: the HTTP status, the body's `code`, and the regids it refused.
    public static func classify(status: Int, code: Int?, badRegids: String?, retryAfter: Duration?) -> PNSClassification {
        if badRegids != nil { return .invalidHandle }
        switch (status, code) {
        case (200, 0): return .delivered
        // One regid that is not valid: `20301` "No valid targets!" (clients' reading; Mi Push
        // lists `bad_regids` only when some of several regids are bad).
        case (_, 65003), (_, 20301): return .invalidHandle
        case (_, 10008), (_, 10016), (_, 10017), (_, 65009), (413, _): return .payloadRejected
        case (_, 10027), (_, 10034), (_, 26004), (429, _): return .throttled(retryAfter: retryAfter)
        case (_, -1), (_, 1), (_, 10001), (_, 10002), (_, 10003), (_, 10037), (500..., _): return .retry(retryAfter: retryAfter)
        case (_, 10031), (_, 21301), (_, 21302), (_, 21303), (_, 22000), (_, 22006), (_, 22007), (_, 22022), (401, _), (403, _):
            return .misconfigured(.refusedByPNS(code.map { "Mi Push \($0)" } ?? "HTTP \(status)"))
        default: return .unknown(code.map { "\(status) \($0)" } ?? String(status))
        }
    }
}

/// Xiaomi Mi Push's provider.
public typealias XiaomiProvider = PerDeviceProvider<XiaomiService>
