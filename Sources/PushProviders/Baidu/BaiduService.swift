import Crypto
import Foundation
import PushConfiguration
import PushModel

/// Baidu Cloud Push REST v3: `POST /rest/3.0/push/single_device`, a form signed with the app's
/// secret key (`sign`, an MD5 over the method, URL, sorted fields and secret). The body of a
/// `baidu` send is Baidu's `msg`: a notification (`title`, `description`, …) or a message of
/// the app's own. `msg_type` is the send's `X-Baidu-Message-Type` (0 message, 1
/// notification), else 1 for a body with a `title` or `description`, else 0.
public struct BaiduService: PerDeviceService {
    public static let platform = Platform.baidu
    /// The limit PushHub holds a `msg` to (bytes).
    public static let maximumPayload = 4096
    /// Baidu refuses a request without an SDK's user agent.
    static let userAgent = "BCCS_SDK/3.0 (Linux) PushHub (Baidu Push Server SDK V3.0.0)"

    public struct Shared {
        var url: String
        /// The body before the channel id (`apikey=…&channel_id=`) and after it, up to the
        /// signature (`&msg=…&timestamp=…&sign=`): encoded once for the run.
        var bodyHead: Data
        var bodyTail: Data
        /// The signature's MD5 fed with what comes before the channel id, and what comes after
        /// it (the fields and the secret key), encoded as Baidu signs them.
        var signer: Insecure.MD5
        var signedTail: Data
    }

    static let headers: PNSHeaderFields = [("content-type", "application/x-www-form-urlencoded;charset=utf-8"), ("user-agent", userAgent)]

    public init() {}

    public func accessTokens(_ credentials: BaiduCredentials, transport: any PNSTransport, now: @escaping @Sendable () -> Date)
        -> CachedAccessToken?
    { nil }

    public func shared(_ delivery: PNSDelivery, credentials: BaiduCredentials) -> Result<Shared, NotSent> {
        guard delivery.body.utf8.count <= Self.maximumPayload else {
            return .failure(NotSent(.payloadRejected, "30602: the msg is larger than \(Self.maximumPayload) bytes"))
        }
        guard let msg = JSONLimits.dictionary(Data(delivery.body.utf8)) else {
            return .failure(NotSent(.payloadRejected, "30602: the Baidu msg is not a JSON object"))
        }
        let type: String
        switch delivery.header("X-Baidu-Message-Type") {
        case nil: type = msg["title"] != nil || msg["description"] != nil ? "1" : "0"
        case "0": type = "0"
        case "1": type = "1"
        case let other?: return .failure(NotSent(.payloadRejected, "30602: X-Baidu-Message-Type must be 0 or 1, not \(other.prefix(16))"))
        }
        let url = "\(credentials.resolvedEndpoint)/rest/3.0/push/single_device"
        // In the order the signature takes them (sorted by name); channel_id goes between
        // apikey and these.
        var fields: [(String, String)] = [("msg", delivery.body)]
        if let expiresAt = delivery.expiresAt {
            fields.append(("msg_expires", String(min(604_800, max(1, Int(expiresAt.timeIntervalSinceNow.rounded(.up)))))))
        }
        fields.append(("msg_type", type))
        fields.append(("timestamp", String(Int(Date().timeIntervalSince1970))))
        var signer = Insecure.MD5()
        signer.update(data: Data(Self.signatureEncoding("POST\(url)apikey=\(credentials.apiKey)channel_id=").utf8))
        return .success(
            Shared(
                url: url, bodyHead: Data("apikey=\(FormEncoding.escape(credentials.apiKey))&channel_id=".utf8),
                bodyTail: Data("&\(FormEncoding.encode(fields))&sign=".utf8), signer: signer,
                signedTail: Data(Self.signatureEncoding(fields.map { "\($0.0)=\($0.1)" }.joined() + credentials.secretKey).utf8)))
    }

    /// The channel id: Azure's Baidu handle is `{userId}-{channelId}`; a bare channel id is
    /// taken too.
    public func address(of handle: String, credentials: BaiduCredentials) -> Result<String, NotSent> {
        let channel = handle.firstIndex(of: "-").map { handle[handle.index(after: $0)...] } ?? handle[...]
        return channel.isEmpty || channel.utf8.count > 64 ? .failure(NotSent(.invalidHandle, "30608: bad channel id")) : .success(String(channel))
    }

    public func request(_ shared: Shared, to channel: String, credentials: BaiduCredentials) -> Result<PNSRequest, NotSent> {
        var signer = shared.signer
        signer.update(data: Data(Self.signatureEncoding(channel).utf8))
        signer.update(data: shared.signedTail)
        let escaped = FormEncoding.escape(channel)
        var body = Data(capacity: shared.bodyHead.count + escaped.utf8.count + shared.bodyTail.count + 32)
        body.append(shared.bodyHead)
        body.append(contentsOf: escaped.utf8)
        body.append(shared.bodyTail)
        body.append(contentsOf: Hex.lowercase(signer.finalize()).utf8)
        return .success(PNSRequest(.url(shared.url), headers: Self.headers, body: body))
    }

    private static let upperHex = Array("0123456789ABCDEF".unicodeScalars)

    /// What Baidu's signature encodes its text with: PHP's `urlencode` (letters, digits and
    /// `-_.` kept, a space as `+`, every other byte as `%XX`, upper-case).
    public static func signatureEncoding(_ text: String) -> String {
        var encoded = ""
        encoded.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "): encoded += "+"
            default:
                encoded.unicodeScalars.append("%")
                encoded.unicodeScalars.append(upperHex[Int(byte >> 4)])
                encoded.unicodeScalars.append(upperHex[Int(byte & 0xF)])
            }
        }
        return encoded
    }

    /// The signature of a request with these fields (`sign` left out), for the simulator's check.
    public static func signature(method: String, url: String, fields: [String: String], secretKey: String) -> String {
        let sorted = fields.filter { $0.key != "sign" }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined()
        return Hex.lowercase(Insecure.MD5.hash(data: Data(signatureEncoding(method + url + sorted + secretKey).utf8)))
    }

    public func classify(_ response: PNSResponse) -> PNSAnswer {
        let object = response.json
        let code = (object?["error_code"] as? NSNumber)?.intValue ?? (object?["error_code"] as? String).flatMap { Int($0) }
        // Delivered only when Baidu says so: a 200 from anything else (a proxy, an empty body) is not.
        let accepted = code == nil && object?["response_params"] is [String: Any]
        let classification =
            accepted || code != nil || response.status != 200
            ? Self.classify(status: response.status, code: code, retryAfter: response.retryAfter) : .unknown("200 without response_params")
        let reason = object?["error_msg"] as? String
        return PNSAnswer(
            classification, status: response.status,
            reason: classification == .delivered ? nil : code.map { "\($0) \(reason ?? "")" } ?? "HTTP \(response.status)")
    }

    /// Baidu's answers: the HTTP status and the body's `error_code`.
    public static func classify(status: Int, code: Int?, retryAfter: Duration?) -> PNSClassification {
        switch (status, code) {
        case (200, nil): .delivered
        case (_, 30607), (_, 30608): .invalidHandle
        case (_, 30602), (_, 30605): .payloadRejected
        case (_, 30604), (_, 30699), (429, _): .throttled(retryAfter: retryAfter)
        case (_, 30600), (_, 30606), (500..., _): .retry(retryAfter: retryAfter)
        case (_, 30601), (_, 30603), (_, 30612), (_, 30613), (401, _), (403, _):
            .misconfigured(.refusedByPNS(code.map { "Baidu \($0)" } ?? "HTTP \(status)"))
        default: .unknown(code.map { "\(status) \($0)" } ?? String(status))
        }
    }
}

/// Baidu Cloud Push's provider.
public typealias BaiduProvider = PerDeviceProvider<BaiduService>
