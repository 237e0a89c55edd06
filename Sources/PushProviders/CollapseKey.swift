import Crypto
import Foundation
import PushModel

/// The collapse key PushHub gives a push whose send set none: the same for every attempt of
/// one notification to one device (for a template push, while the template stays the same),
/// so a device that gets the push twice (a send published again after a crash) shows it once.
/// Different notifications, and a notification's different templates for one device, get
/// different keys.
public enum CollapseKey {
    /// The `PNSDelivery.collapseVariant` of a template's pushes: 22 base64url characters of
    /// SHA-256 over its body, headers and expiry, each field's bytes after their length, so
    /// no two templates that differ share one. The pushes of one template share theirs, so a
    /// batch's targets, which usually share their template, share their headers too (and the
    /// same template twice on one device is the same push twice, shown once).
    public static func variant(of template: Template) -> String {
        var hasher = SHA256()
        func field(_ tag: String, _ text: String) {
            hasher.update(data: Data("\(tag)\(text.utf8.count):".utf8))
            hasher.update(data: Data(text.utf8))
        }
        field("b", template.body)
        for (name, value) in (template.headers ?? [:]).sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            field("h", name)
            field("v", value)
        }
        if let expiry = template.expiry { field("e", expiry) }
        return String(Base64URL.encode(Data(hasher.finalize())).prefix(22))
    }

    /// For `apns-collapse-id` (at most 64 bytes): the notification id when it fits, else a digest.
    static func apns(_ delivery: PNSDelivery) -> String {
        if delivery.collapseVariant == nil, delivery.notificationId.utf8.count <= 64 { return delivery.notificationId }
        return digest(delivery)
    }

    /// For Web Push's `Topic` (at most 32 base64url characters): a UUID's 32 hex digits, else
    /// a digest cut to 32 characters.
    static func webPushTopic(_ delivery: PNSDelivery) -> String {
        if delivery.collapseVariant == nil, FieldCheck.isUUID(delivery.notificationId) {
            // The hex digits, lowercase, without the dashes: byte by byte (this runs per target).
            return String(
                decoding: delivery.notificationId.utf8.lazy.filter { $0 != UInt8(ascii: "-") }.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 },
                as: UTF8.self)
        }
        return String(digest(delivery).prefix(32))
    }

    /// 43 base64url characters of SHA-256 over the id and the variant.
    private static func digest(_ delivery: PNSDelivery) -> String {
        var hasher = SHA256()
        hasher.update(data: Data(delivery.notificationId.utf8))
        if let variant = delivery.collapseVariant { hasher.update(data: Data(("\n" + variant).utf8)) }
        return Base64URL.encode(Data(hasher.finalize()))
    }
}
