import Foundation

/// The Atom XML form of registrations in the hub API: `AppleRegistrationDescription`,
/// `GcmRegistrationDescription`, `FcmRegistrationDescription`, `FcmV1RegistrationDescription`,
/// `WindowsRegistrationDescription`, `BrowserRegistrationDescription`, `AdmRegistrationDescription`,
/// `BaiduRegistrationDescription`, `XiaomiRegistrationDescription`, PushHub's own
/// `HmsRegistrationDescription`, and the `…Template…` variant of each.
public enum RegistrationDescription {
    public struct Kind: Sendable {
        public var typeName: String
        public var format: NativeFormat
        /// The element holding the handle (for browsers, the endpoint; for Baidu, the channel id).
        public var handleElement: String
        /// Baidu's `BaiduUserId`: the handle is `{userId}-{channelId}`, as Azure has it.
        public var userElement: String? = nil
    }

    /// Baidu's template element for `msg_type`, kept as this header of the template.
    public static let baiduMessageTypeHeader = "X-Baidu-Message-Type"

    public static let kinds: [Kind] = [
        Kind(typeName: "Apple", format: .apple, handleElement: "DeviceToken"),
        Kind(typeName: "Gcm", format: .gcm, handleElement: "GcmRegistrationId"),
        Kind(typeName: "Fcm", format: .gcm, handleElement: "FcmRegistrationId"),
        Kind(typeName: "FcmV1", format: .fcmv1, handleElement: "FcmV1RegistrationId"),
        Kind(typeName: "Windows", format: .windows, handleElement: "ChannelUri"),
        Kind(typeName: "Browser", format: .browser, handleElement: "Endpoint"),
        Kind(typeName: "Adm", format: .adm, handleElement: "AdmRegistrationId"),
        Kind(typeName: "Baidu", format: .baidu, handleElement: "BaiduChannelId", userElement: "BaiduUserId"),
        Kind(typeName: "Xiaomi", format: .xiaomi, handleElement: "XiaomiRegistrationId"),
        Kind(typeName: "Hms", format: .hms, handleElement: "HmsPushToken"),
    ]

    public static let connectNamespace = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"

    /// Reads the registration description in an Atom entry.
    /// Errors name the element at fault; limits of the XML are `XMLNode`'s.
    public static func parse(_ body: Data, hub: String, registrationId: String) throws(WireError) -> Registration {
        let document = try XMLNode.parse(body)
        guard let description = document.find(where: { $0.hasSuffix("RegistrationDescription") }) else {
            throw .invalidField(field: "entry", reason: "holds no …RegistrationDescription element")
        }
        return try registration(in: description, hub: hub, registrationId: registrationId)
    }

    /// Reads one line of a job's input file: a description as Azure's SDKs serialize it, as
    /// its own element (`<GcmRegistrationDescription …>`) or as the base element with an
    /// `i:type` attribute. The id is the line's `RegistrationId`, empty when it has none.
    public static func parseLine(_ line: Data, hub: String) throws(WireError) -> Registration {
        var description = try XMLNode.parse(line)
        if description.name == "RegistrationDescription",
            let type = description.attributes.first(where: { $0.key == "type" || $0.key.hasSuffix(":type") })?.value
        {
            // `i:type="GcmRegistrationDescription"`, perhaps with a namespace prefix of its own.
            description.name = String(type.split(separator: ":").last ?? "")
        }
        guard description.name.hasSuffix("RegistrationDescription") else {
            throw .invalidField(field: description.name, reason: "a line holds one …RegistrationDescription element")
        }
        return try registration(in: description, hub: hub, registrationId: description.child("RegistrationId")?.text ?? "")
    }

    /// The registration a description element holds.
    static func registration(in description: XMLNode, hub: String, registrationId: String) throws(WireError) -> Registration {
        let isTemplate = description.name.hasSuffix("TemplateRegistrationDescription")
        let typeName = description.name.replacingOccurrences(of: isTemplate ? "TemplateRegistrationDescription" : "RegistrationDescription", with: "")
        guard let kind = kinds.first(where: { $0.typeName == typeName }) else {
            throw .invalidField(
                field: description.name,
                reason:
                    "unknown description type; known are \(kinds.map { $0.typeName + "RegistrationDescription" }.joined(separator: ", ")) and their Template variants"
            )
        }
        guard var handle = description.child(kind.handleElement)?.text, !handle.isEmpty else {
            throw .invalidField(field: "\(description.name).\(kind.handleElement)", reason: "missing")
        }
        if let userElement = kind.userElement {
            // Azure splits the handle at its first hyphen: a user id holds none.
            guard let user = description.child(userElement)?.text, !user.isEmpty, !user.contains("-") else {
                throw .invalidField(field: "\(description.name).\(userElement)", reason: "missing, or holds a hyphen")
            }
            handle = user + "-" + handle
        }
        // No push service's handle comes near this; the store indexes handles, and PostgreSQL's
        // index rows hold at most 2,704 bytes.
        guard handle.utf8.count <= EndpointPolicy.maximumURLLength else {
            throw .invalidField(
                field: "\(description.name).\(kind.handleElement)", reason: "is longer than \(EndpointPolicy.maximumURLLength) bytes")
        }
        var webPush: WebPushKeys?
        if kind.format == .browser {
            guard let p256dh = description.child("P256DH")?.text, !p256dh.isEmpty, let auth = description.child("Auth")?.text, !auth.isEmpty else {
                throw .invalidField(field: description.name, reason: "a browser registration needs P256DH and Auth")
            }
            webPush = WebPushKeys(p256dh: p256dh, auth: auth)
        }
        let tags = (description.child("Tags")?.text ?? "").split(separator: ",").map { String($0.trimmingSpaces) }.filter {
            !$0.isEmpty
        }
        try Tags.validate(tags, field: "\(description.name).Tags")
        var template: Template?
        if isTemplate {
            guard let body = description.child("BodyTemplate")?.text, !body.isEmpty else {
                throw .invalidField(field: "\(description.name).BodyTemplate", reason: "missing")
            }
            var headers: [String: String]?

            if let wnsHeaders = description.child("WnsHeaders") {
                headers = [:]
                for header in wnsHeaders.children where header.name == "WnsHeader" {
                    guard let name = header.child("Header")?.text, !name.isEmpty else {
                        throw .invalidField(field: "\(description.name).WnsHeaders", reason: "a WnsHeader needs a Header")
                    }
                    headers?[name] = header.child("Value")?.text ?? ""
                }
            }
            if kind.format == .baidu, let type = description.child("MessageType")?.text {
                guard type == "0" || type == "1" else {
                    throw .invalidField(field: "\(description.name).MessageType", reason: "must be 0 (message) or 1 (notification)")
                }
                headers = (headers ?? [:]).filter { !CaseFolding.equal($0.key, baiduMessageTypeHeader) }
                headers?[baiduMessageTypeHeader] = type
            }
            template = Template(
                name: description.child("TemplateName")?.text, body: body, headers: headers,
                expiry: description.child("Expiry")?.text)
            try TemplateRenderer.validate(
                body: body, headers: headers, expiry: template?.expiry, format: kind.format, field: "\(description.name).BodyTemplate")
        }
        var expiresAt: Date?
        if let expiration = description.child("ExpirationTime")?.text, !expiration.isEmpty {
            guard let date = RFC3339.parse(expiration) else {
                throw .invalidField(field: "\(description.name).ExpirationTime", reason: "must be an RFC 3339 date-time")
            }
            expiresAt = date
        }
        return Registration(
            registrationId: registrationId, hub: hub, format: kind.format, handle: handle, webPush: webPush, tags: tags,
            template: template, expiresAt: expiresAt, updatedAt: Date())
    }

    /// The description element for a registration.
    public static func xml(_ registration: Registration) -> String { xml(registration, cdata: true) }

    /// One line of an export file, as Azure's SDKs serialize a description: the element
    /// alone, its line breaks written as character references so it stays one line.
    public static func line(_ registration: Registration) -> String {
        let element = xml(registration, cdata: false)
        guard element.utf8.contains(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") }) else { return element + "\n" }
        return element.replacingOccurrences(of: "\n", with: "&#10;").replacingOccurrences(of: "\r", with: "&#13;") + "\n"
    }

    static func xml(_ registration: Registration, cdata: Bool) -> String {
        let kind = kinds.first { $0.format == registration.format && ($0.typeName != "Fcm") } ?? kinds[0]
        let element = kind.typeName + (registration.template == nil ? "" : "Template") + "RegistrationDescription"
        var fields = "<ETag>\(registration.version)</ETag>"
        if let expiresAt = registration.expiresAt { fields += "<ExpirationTime>\(RFC3339.format(expiresAt))</ExpirationTime>" }
        fields += "<RegistrationId>\(TemplateRenderer.escapeXML(registration.registrationId))</RegistrationId>"
        if !registration.tags.isEmpty { fields += "<Tags>\(TemplateRenderer.escapeXML(registration.tags.joined(separator: ",")))</Tags>" }
        if let userElement = kind.userElement, let hyphen = registration.handle.firstIndex(of: "-") {
            fields += "<\(userElement)>\(TemplateRenderer.escapeXML(String(registration.handle[..<hyphen])))</\(userElement)>"
            fields +=
                "<\(kind.handleElement)>\(TemplateRenderer.escapeXML(String(registration.handle[registration.handle.index(after: hyphen)...])))</\(kind.handleElement)>"
        } else {
            fields += "<\(kind.handleElement)>\(TemplateRenderer.escapeXML(registration.handle))</\(kind.handleElement)>"
        }
        if let keys = registration.webPush {
            fields += "<P256DH>\(TemplateRenderer.escapeXML(keys.p256dh))</P256DH><Auth>\(TemplateRenderer.escapeXML(keys.auth))</Auth>"
        }
        if let template = registration.template {
            if cdata {
                fields += "<BodyTemplate><![CDATA[\(template.body.replacingOccurrences(of: "]]>", with: "]]]]><![CDATA[>"))]]></BodyTemplate>"
            } else {
                fields += "<BodyTemplate>\(TemplateRenderer.escapeXML(template.body))</BodyTemplate>"
            }
            // Baidu's message type is its own element; other headers (WNS's) go as WnsHeaders.
            let messageType = kind.format == .baidu ? template.headers?.first { CaseFolding.equal($0.key, baiduMessageTypeHeader) } : nil
            let otherHeaders = template.headers?.filter { $0.key != messageType?.key }
            if let headers = otherHeaders, !headers.isEmpty {
                fields +=
                    "<WnsHeaders>"
                    + headers.sorted { $0.key < $1.key }.map {
                        "<WnsHeader><Header>\(TemplateRenderer.escapeXML($0.key))</Header><Value>\(TemplateRenderer.escapeXML($0.value))</Value></WnsHeader>"
                    }.joined() + "</WnsHeaders>"
            }
            if let expiry = template.expiry { fields += "<Expiry>\(TemplateRenderer.escapeXML(expiry))</Expiry>" }
            if let name = template.name { fields += "<TemplateName>\(TemplateRenderer.escapeXML(name))</TemplateName>" }
            if let messageType { fields += "<MessageType>\(TemplateRenderer.escapeXML(messageType.value))</MessageType>" }
        }
        return "<\(element) xmlns:i=\"http://www.w3.org/2001/XMLSchema-instance\" xmlns=\"\(connectNamespace)\">\(fields)</\(element)>"
    }

    /// An Atom entry for one registration; `base` is `https://host/hub`.
    public static func entry(_ registration: Registration, base: String) -> String {
        atomEntry(
            link: "\(base)/registrations/\(registration.registrationId)?api-version=2015-01", title: registration.registrationId,
            updated: registration.updatedAt, content: xml(registration))
    }

    /// An Atom entry as the hub API writes them: its link as id and self link, a title, and
    /// `content` (XML) inside.
    public static func atomEntry(link: String, title: String, updated: Date, content: String) -> String {
        """
        <entry xmlns="http://www.w3.org/2005/Atom"><id>\(TemplateRenderer.escapeXML(link))</id>\
        <title type="text">\(TemplateRenderer.escapeXML(title))</title>\
        <updated>\(RFC3339.format(updated))</updated>\
        <link rel="self" href="\(TemplateRenderer.escapeXML(link))"/>\
        <content type="application/xml">\(content)</content></entry>
        """
    }

    /// An Atom feed of registrations.
    public static func feed(_ registrations: [Registration], base: String) -> String {
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><feed xmlns=\"http://www.w3.org/2005/Atom\">"
            + "<title type=\"text\">Registrations</title><id>\(TemplateRenderer.escapeXML(base))/registrations</id>"
            + "<updated>\(RFC3339.format(Date()))</updated>"
            + registrations.map { entry($0, base: base) }.joined() + "</feed>"
    }
}
