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
    let quota: RichPayloadQuota
    /// `Idempotency-Key`s of `POST /api/notifications`, per sender.
    var idempotency = IdempotentSends(store: nil)
    static let messageLimit = 4 * 1024
    static let richLimit = 1024 * 1024
    /// What a rich payload may be: media only, never a document a browser would run.
    static let richTypes = ["image/", "audio/", "video/"]

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
        let answer: IdempotentSends.Answer
        do {
            answer = try await idempotency.run(
                request, scope: "api:\(hub):\(sender)",
                fingerprint: IdempotentSends.fingerprint(parts: ["api/notifications", pns, recipient, message]),
                collection: "messages"
            ) { reusing in
                try await publish(
                    format: native.format, body: native.body, contentType: native.contentType, headers: native.headers, to: recipient,
                    notificationId: reusing)
            }
        } catch is NotificationQueue.NotQueued {
            throw Self.notQueued
        } catch let refusal as IdempotentSends.Refusal {
            var error = AppBackendError(refusal.status, refusal.message)
            error.retryAfter = refusal.retryAfter
            throw error
        }
        switch answer {
        case .sent(let id): return try Self.jsonResponse(["notificationId": id])
        case .replay(let id, _):
            var response = try Self.jsonResponse(["notificationId": id])
            response.headers[IdempotentSends.replayHeader] = "true"
            return response
        }
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
        guard let mediaType = Self.mediaType(contentType) else {
            throw AppBackendError(
                .unsupportedMediaType,
                "Content-Type: a rich payload is image/*, audio/*, video/* or application/octet-stream, not \(contentType.prefix(100))")
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
        guard message.utf8.count <= Self.messageLimit, richType.utf8.count <= 64 else {
            throw AppBackendError(.badRequest, "message is at most \(Self.messageLimit) bytes and type at most 64")
        }
        // Both are kept with the payload (PostgreSQL refuses U+0000 in text); a type is a word.
        guard !message.utf8.contains(0) else { throw AppBackendError(.badRequest, "message must not hold U+0000") }
        do { try FieldCheck.noControlCharacters(richType, "type") } catch {
            throw AppBackendError(.badRequest, "type must not hold control characters")
        }
        // The send is checked before the payload is kept, and the payload is deleted again if
        // the send is not accepted: a refused send leaves nothing to fetch.
        _ = try richSend(pns: pns, richId: 0, message: message, richType: richType, to: recipient)
        let stored: RichPayload
        do {
            stored = try await richPayloads.storeRichPayload(
                RichPayload(
                    hub: hub, sender: sender, recipient: recipient, contentType: mediaType, richType: richType, message: message,
                    bytes: Data(buffer: bytes)),
                quota: quota)
        } catch let error as RichPayloadQuotaExceeded {
            throw AppBackendError(.tooManyRequests, error.description)
        }
        let id: String
        do {
            let send = try richSend(pns: pns, richId: stored.id, message: message, richType: richType, to: recipient)
            id = try await publish(format: send.format, body: send.body, contentType: "application/json", headers: send.headers, to: recipient)
        } catch let notQueued as NotificationQueue.NotQueued where notQueued.kept {
            // Part of the send went out, and recovery finishes it: its recipient will fetch the
            // payload, which stays.
            throw Self.notQueued
        } catch {
            try? await richPayloads.deleteRichPayload(hub: hub, id: stored.id)
            throw error is NotificationQueue.NotQueued ? Self.notQueued : error
        }
        return try Self.jsonResponse(["notificationId": id, "richId": String(stored.id)])
    }

    /// The silent push that tells the recipient's app a rich payload waits.
    private func richSend(pns: String, richId: Int64, message: String, richType: String, to recipient: String) throws
        -> (format: NotificationFormat, body: String, headers: [String: String])
    {
        let fields = ["richId": String(richId), "richMessage": message, "richType": richType]
        if pns == "apns" {
            // A silent push: content-available only, delivered in the background.
            var payload: [String: Any] = ["aps": ["content-available": 1, "sound": ""]]
            for (key, value) in fields { payload[key] = value }
            return (.apple, try Self.json(payload), ["apns-push-type": "background", "apns-priority": "5"])
        }
        return (.gcm, try Self.json(["data": fields]), [:])
    }

    /// The media type of a rich payload's Content-Type (parameters dropped), when it is one
    /// PushHub keeps.
    static func mediaType(_ contentType: String) -> String? {
        let type = MediaType.of(contentType)?.lowercased() ?? ""
        guard type.utf8.count <= 100, type.split(separator: "/").count == 2,
            type.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "/.+-_".contains($0)) })
        else { return nil }
        // SVG is a document that can run script, not media.
        guard !type.hasPrefix("image/svg") else { return nil }
        return type == "application/octet-stream" || richTypes.contains(where: { type.hasPrefix($0) }) ? type : nil
    }

    @Sendable func fetchRich(_ request: Request, context: IngressContext) async throws -> Response {
        let user = try RegisterController.user(context)
        let text = try context.parameters.require("id")
        guard let id = Int64(text), let richPayloads, let payload = try await richPayloads.richPayload(hub: hub, id: id, retention: quota.retention)
        else {
            throw AppBackendError(.notFound, "no rich notification \(text)")
        }
        guard payload.recipient == user || payload.sender == user else {
            throw AppBackendError(.forbidden, "rich notification \(text) is for someone else")
        }
        // Served as a download that no browser runs on PushHub's origin, whatever it holds.
        let mediaType = Self.mediaType(payload.contentType) ?? "application/octet-stream"
        return Response(
            status: .ok,
            headers: [
                .contentType: mediaType, .contentDisposition: "attachment; filename=\"rich-\(id)\"", .xContentTypeOptions: "nosniff",
                .contentSecurityPolicy: "default-src 'none'; sandbox", .cacheControl: "private, no-store",
            ],
            body: .init(byteBuffer: ByteBuffer(bytes: payload.bytes)))
    }

    /// Queues a native send to `username:{recipient}` (under `notificationId` when given);
    /// returns its notification id.
    private func publish(
        format: NotificationFormat, body: String, contentType: String, headers: [String: String], to recipient: String,
        notificationId: String? = nil
    ) async throws -> String {
        guard let queue else { throw AppBackendError(.serviceUnavailable, "sending needs Kafka; this ingress runs without it") }
        var request: SendRequest
        let expression: TagExpression?
        do {
            (request, expression) = try SendRequestBuilder().buildChecked(
                hub: hub, format: format.rawValue, tags: "username:\(recipient)", headers: headers, body: Data(body.utf8),
                contentType: contentType)
        } catch {
            throw AppBackendError(.badRequest, error.description)
        }
        if let notificationId { request.notificationId = notificationId }
        // `NotQueued` goes up as it is: an idempotency key learns of it before the caller
        // answers 503 (`notQueued`).
        try await queue.enqueue(request, expression: expression)
        return request.notificationId
    }

    /// 503 with `Retry-After`: the send could not be queued.
    static var notQueued: AppBackendError {
        var failure = AppBackendError(.serviceUnavailable, "the notification could not be queued; try again")
        failure.retryAfter = 5
        return failure
    }

    /// `to_tag`, the recipient's user name, which must make a valid `username:` tag.
    static func recipient(_ request: Request, default fallback: String?) throws -> String {
        let given: String? = request.uri.queryParameters.get("to_tag").map { String($0) }
        guard let name = given ?? fallback, !name.isEmpty else {
            throw AppBackendError(.badRequest, "to_tag: name the user to notify")
        }
        do throws(WireError) { try Tags.validate(["username:\(name)"], field: "to_tag") } catch {
            throw AppBackendError(.badRequest, error.description)
        }
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
