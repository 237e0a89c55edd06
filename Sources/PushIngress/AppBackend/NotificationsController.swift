import Foundation
import Hummingbird
import PushModel
import PushStore

/// The tutorials' send endpoints, bound to one hub:
/// `POST /api/notifications?pns=&to_tag=` sends "From {sender}: {message}" to `username:{to_tag}`;
/// `POST /api/notifications/rich` keeps a payload and sends a silent push with its id;
/// `GET /api/notifications/{id}` gives the payload to its recipient.
struct NotificationsController: Sendable {
    let hub: String
    /// Nil when the ingress runs without Kafka: sends answer 503.
    let queue: NotificationQueue?
    let richPayloads: (any RichPayloadStore)?
    static let messageLimit = 4 * 1024
    static let richLimit = 1024 * 1024

    func addRoutes(to group: RouterGroup<IngressContext>) {
        group.post("notifications", use: send)
        group.post("notifications/rich", use: sendRich)
        group.get("notifications/{id}", use: fetchRich)
    }

    @Sendable func send(_ request: Request, context: IngressContext) async throws -> Response {
        let sender = try RegisterController.user(context)
        let recipient = try Self.recipient(request, default: nil)
        let body = try await request.collectBody(upTo: Self.messageLimit)
        guard let message = try? JSONDecoder().decode(String.self, from: Data(buffer: body)) else {
            throw AppBackendError(.badRequest, "the body must be a JSON string: the message")
        }
        let pns = request.uri.queryParameters.get("pns")?.lowercased() ?? ""
        let text = "From \(sender): \(message)"
        let native: (format: NotificationFormat, body: String, contentType: String, headers: [String: String])
        switch pns {
        case "apns": native = (.apple, try Self.json(["aps": ["alert": text]]), "application/json", [:])
        case "fcm", "gcm": native = (.gcm, try Self.json(["data": ["message": text]]), "application/json", [:])
        case "wns":
            let toast = "<toast><visual><binding template=\"ToastText01\"><text id=\"1\">\(XML.escape(text))</text></binding></visual></toast>"
            native = (.windows, toast, "application/xml", ["X-WNS-Type": "wns/toast"])
        default:
            throw AppBackendError(.badRequest, "pns: \"\(pns)\" is not supported; use one of apns, fcm, gcm, wns")
        }
        let id = try await publish(format: native.format, body: native.body, contentType: native.contentType, headers: native.headers, to: recipient)
        return try Self.jsonResponse(["notificationId": id])
    }

    @Sendable func sendRich(_ request: Request, context: IngressContext) async throws -> Response {
        let sender = try RegisterController.user(context)
        let recipient = try Self.recipient(request, default: sender)
        guard let richPayloads else { throw AppBackendError(.serviceUnavailable, "rich notifications need the store") }
        let message = request.uri.queryParameters.get("message") ?? ""
        let richType = request.uri.queryParameters.get("type") ?? "img"
        guard let contentType = request.headers[.contentType], !contentType.isEmpty else {
            throw AppBackendError(.badRequest, "Content-Type: say what the payload is, e.g. image/png")
        }
        let bytes: ByteBuffer
        do {
            bytes = try await request.body.collect(upTo: Self.richLimit)
        } catch {
            throw AppBackendError(.contentTooLarge, "a rich payload is at most \(Self.richLimit) bytes")
        }
        guard bytes.readableBytes > 0 else { throw AppBackendError(.badRequest, "the body is the rich payload; it is empty") }
        let pns = request.uri.queryParameters.get("pns")?.lowercased() ?? "apns"
        guard ["apns", "fcm", "gcm"].contains(pns) else {
            throw AppBackendError(.badRequest, "pns: \"\(pns)\" is not supported for rich notifications; use apns, fcm or gcm")
        }
        let stored = try await richPayloads.storeRichPayload(RichPayload(
            hub: hub, sender: sender, recipient: recipient, contentType: contentType, richType: richType, message: message, bytes: Data(buffer: bytes)))
        let fields = ["richId": String(stored.id), "richMessage": message, "richType": richType]
        let id: String
        if pns == "apns" {
            // A silent push: content-available only, delivered in the background.
            var payload: [String: Any] = ["aps": ["content-available": 1, "sound": ""]]
            for (key, value) in fields { payload[key] = value }
            id = try await publish(format: .apple, body: try Self.json(payload), contentType: "application/json",
                                   headers: ["apns-push-type": "background", "apns-priority": "5"], to: recipient)
        } else {
            id = try await publish(format: .gcm, body: try Self.json(["data": fields]), contentType: "application/json", headers: [:], to: recipient)
        }
        return try Self.jsonResponse(["notificationId": id, "richId": String(stored.id)])
    }

    @Sendable func fetchRich(_ request: Request, context: IngressContext) async throws -> Response {
        let user = try RegisterController.user(context)
        let text = try context.parameters.require("id")
        guard let id = Int64(text), let richPayloads, let payload = try await richPayloads.richPayload(hub: hub, id: id) else {
            throw AppBackendError(.notFound, "no rich notification \(text)")
        }
        guard payload.recipient == user || payload.sender == user else {
            throw AppBackendError(.forbidden, "rich notification \(text) is for someone else")
        }
        return Response(status: .ok, headers: [.contentType: payload.contentType], body: .init(byteBuffer: ByteBuffer(bytes: payload.bytes)))
    }

    /// Queues a native send to `username:{recipient}`; returns its notification id.
    private func publish(format: NotificationFormat, body: String, contentType: String, headers: [String: String], to recipient: String) async throws -> String {
        guard let queue else { throw AppBackendError(.serviceUnavailable, "sending needs Kafka; this ingress runs without it") }
        let request: SendRequest
        do {
            request = try SendRequestBuilder().build(
                hub: hub, format: format.rawValue, tags: "username:\(recipient)", handle: nil, headers: headers, body: Data(body.utf8),
                contentType: contentType)
        } catch {
            throw AppBackendError(.badRequest, error.description)
        }
        do {
            try await queue.enqueue(request)
        } catch is NotificationQueue.NotQueued {
            var failure = AppBackendError(.serviceUnavailable, "the notification could not be queued; try again")
            failure.retryAfter = 5
            throw failure
        }
        return request.notificationId
    }

    /// `to_tag`, the recipient's user name, which must make a valid `username:` tag.
    static func recipient(_ request: Request, default fallback: String?) throws -> String {
        let given: String? = request.uri.queryParameters.get("to_tag").map { String($0) }
        guard let name = given ?? fallback, !name.isEmpty else {
            throw AppBackendError(.badRequest, "to_tag: name the user to notify")
        }
        do throws(WireError) { try Tags.validate(["username:\(name)"], field: "to_tag") } catch { throw AppBackendError(.badRequest, error.description) }
        return name
    }

    static func json(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
    }

    static func jsonResponse(_ object: [String: String]) throws -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))))
    }
}
