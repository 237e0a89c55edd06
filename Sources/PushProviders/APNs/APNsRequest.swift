import Foundation
import PushModel

/// `apns-push-type`: what kind of push APNs is asked to deliver.
public enum APNsPushType: String, Sendable, CaseIterable {
    case alert, background, location, voip, complication, fileprovider, mdm, liveactivity, pushtotalk, widgets, controls

    /// The largest payload APNs takes for this type (VoIP pushes may be larger).
    public var maximumPayload: Int { self == .voip ? 5120 : 4096 }
}

/// `apns-priority`: 10 sends at once, 5 when the device saves power, 1 when it suits the device.
public enum APNsPriority: Int, Sendable, CaseIterable {
    case low = 1
    case powerAware = 5
    case immediate = 10
}

/// An APNs request's headers, typed. `fields` is what goes on the wire.
public struct APNsHeaders: Sendable, Equatable {
    public var pushType: APNsPushType
    public var topic: String
    public var priority: APNsPriority
    /// Seconds since 1970 after which APNs drops the push.
    public var expiration: Int?
    public var collapseId: String
    /// A UUID, as the send wrote it. Without one, APNs makes the apns-id itself and returns it.
    public var apnsId: String?

    public var fields: PNSHeaderFields {
        var fields: PNSHeaderFields = [
            ("apns-push-type", pushType.rawValue), ("apns-topic", topic), ("apns-priority", String(priority.rawValue)),
        ]
        if let expiration { fields.add("apns-expiration", String(expiration)) }
        fields.add("apns-collapse-id", collapseId)
        if let apnsId { fields.add("apns-id", apnsId) }
        return fields
    }
}

/// APNs requests built from a delivery, without a network: `POST /3/device/{token}`.
public enum APNsRequest {
    public static let maximumCollapseId = 64

    /// The request for `delivery` on `origin`, without its authorization, or the reason APNs
    /// would refuse it (so it is never sent).
    public static func make(_ delivery: PNSDelivery, bundleId: String, origin: String) -> Result<PNSRequest, APNsReason> {
        if let refused = checkToken(delivery.handle) { return .failure(refused) }
        switch shared(delivery, bundleId: bundleId) {
        case .success(let (headers, payload)):
            return .success(request(to: delivery.handle, origin: origin, headers: headers.fields, payload: payload))
        case .failure(let reason): return .failure(reason)
        }
    }

    /// A device token APNs would refuse, as Apple's reason; nil for one that may be sent.
    static func checkToken(_ token: String) -> APNsReason? {
        guard !token.isEmpty, token.utf8.count <= 200, token.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 | 0x20 >= 97 && $0 | 0x20 <= 102) })
        else {
            return .badDeviceToken
        }
        return nil
    }

    /// What every push of one shape (same send, same payload) shares: the headers and payload.
    static func shared(_ delivery: PNSDelivery, bundleId: String) -> Result<(APNsHeaders, Data), APNsReason> {
        let payload = Data(delivery.body.utf8)
        switch headers(for: delivery, payload: payload, bundleId: bundleId) {
        case .success(let headers):
            guard payload.count <= headers.pushType.maximumPayload else { return .failure(.payloadTooLarge) }
            return .success((headers, payload))
        case .failure(let reason): return .failure(reason)
        }
    }

    /// `POST /3/device/{token}` with `headers` and `payload`.
    static func request(to token: String, origin: String, headers: PNSHeaderFields, payload: Data) -> PNSRequest {
        PNSRequest(.http2(origin: origin, path: "/3/device/" + token), headers: headers, body: payload)
    }

    /// The typed headers, from the send's headers and the payload.
    public static func headers(for delivery: PNSDelivery, payload: Data, bundleId: String) -> Result<APNsHeaders, APNsReason> {
        let pushType: APNsPushType
        if let text = delivery.header("apns-push-type") {
            guard let known = APNsPushType(rawValue: text.lowercased()) else { return .failure(.invalidPushType) }
            pushType = known
        } else {
            pushType = isBackground(payload) ? .background : .alert
        }
        let priority: APNsPriority
        if let text = delivery.header("apns-priority") {
            guard let known = Int(text).flatMap(APNsPriority.init(rawValue:)) else { return .failure(.badPriority) }
            priority = known
        } else {
            priority = pushType == .background ? .powerAware : .immediate
        }
        var expiration = delivery.expiresAt.map { Int($0.timeIntervalSince1970) }
        if let text = delivery.header("apns-expiration") {
            guard let seconds = Int(text) else { return .failure(.badExpirationDate) }
            expiration = seconds
        }
        let collapseId = delivery.header("apns-collapse-id") ?? CollapseKey.apns(delivery)
        guard collapseId.utf8.count <= maximumCollapseId else { return .failure(.badCollapseId) }
        let apnsId = delivery.header("apns-id")
        if let apnsId, !FieldCheck.isUUID(apnsId) { return .failure(.badMessageId) }
        return .success(
            APNsHeaders(
                pushType: pushType, topic: delivery.header("apns-topic") ?? bundleId, priority: priority, expiration: expiration,
                collapseId: collapseId, apnsId: apnsId))
    }

    private static let contentAvailable = Array("content-available".utf8)

    /// A payload whose `aps` holds only `content-available: 1` is a background push.
    static func isBackground(_ payload: Data) -> Bool {
        // Most payloads do not mention it at all: no need to parse them.
        guard ByteSearch.firstOffset(of: contentAvailable, in: payload) != nil else { return false }
        guard let object = JSONLimits.dictionary(payload), let aps = object["aps"] as? [String: Any] else {
            return false
        }
        return aps.count == 1 && (aps["content-available"] as? NSNumber)?.intValue == 1
    }

    /// What PushHub does with a push it would not send for `reason`.
    static func notSent(_ reason: APNsReason) -> PNSAnswer {
        PNSAnswer(reason == .badDeviceToken ? .invalidHandle : .payloadRejected, reason: reason.description)
    }
}
