import Foundation
import HTTPTypes
import Hummingbird
import PushConfiguration
import PushModel
import PushStore

/// `POST /{hub}/messages` (Send right): a native or template notification to a tag expression,
/// to everyone, or with `?direct` to one device handle. 201 only after the request is queued
/// in Kafka; 503 with `Retry-After` when it cannot be.
struct MessageController: Sendable {
    let access: HubAccess
    let queue: NotificationQueue
    let outcomes: (any OutcomeStore)?
    let schedules: (any ScheduleStore)?
    /// Debug sends (`?test`); nil refuses them.
    var debug: DebugSend?
    /// `Idempotency-Key`s.
    var idempotency: IdempotentSends
    static let bodyLimit = 64 * 1024
    /// How far ahead a send may be scheduled.
    static let scheduleHorizon: TimeInterval = 7 * 24 * 3600

    func addRoutes(to routes: HubRoutes) {
        let group = routes.requiring(.send)
        group.post("{hub}/messages", use: send)
        group.post("{hub}/messages/$batch", use: sendBatch)
        group.get("{hub}/messages/{id}", use: details)
        group.get("{hub}/messages/{id}/errors", use: errors)
        group.post("{hub}/schedulednotifications", use: schedule)
        group.delete("{hub}/schedulednotifications/{id}", use: cancel)
    }

    @Sendable func send(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        // Parsed once: each parse makes the parameters' strings and their dictionary again.
        let parameters = request.uri.queryParameters
        let built = try await build(request, hub: hub, direct: parameters.has("direct"))
        if DebugSend.isRequested(request, testParameter: parameters.has("test")) {
            guard request.headers[IdempotentSends.header] == nil else {
                throw HubAPIError(.badRequest, "Idempotency-Key: a debug send is not repeated as the first; leave the key out")
            }
            return try await debugSend(built.request, expression: built.expression, hub: hub, request, context)
        }
        return try await keyed(request, context, built.request, collection: "messages") { sending in
            try await queue.enqueue(sending, expression: built.expression)
        }
    }

    /// A debug send: 201 with Azure's NotificationOutcome once the sample's results came, or
    /// the time-out passed.
    private func debugSend(
        _ sendRequest: SendRequest, expression: TagExpression?, hub: HubsConfiguration.Hub, _ request: Request, _ context: HubRequestContext
    ) async throws -> Response {
        guard let debug else { throw HubAPIError(.serviceUnavailable, "debug sends are not available on this ingress") }
        let sent: DebugSend.Sent
        do {
            sent = try await debug.send(sendRequest, expression: expression)
        } catch is DebugSend.Busy {
            return try retryLater("too many debug sends are waiting for results; try again", after: 1, request, context)
        } catch is NotificationQueue.NotQueued {
            return try retryLater("the notification could not be queued; try again", after: 5, request, context)
        }
        var response = created(request, hub: hub.name, collection: "messages", id: sent.request.notificationId)
        response.headers[.contentType] = "application/xml; charset=utf-8"
        response.headers[DebugSend.matchedHeader] = "\(sent.sample.matched)\(sent.sample.capped ? "+" : "")"
        response.body = .init(byteBuffer: ByteBuffer(string: DebugSend.xml(sent, timeout: debug.timeout)))
        return response
    }

    /// Runs `send` for a checked request once per `Idempotency-Key`: 201 once it is queued
    /// (Kafka acknowledged it, or the store keeps it), 503 with Retry-After when it could not
    /// be; a repeat of a keyed request answers the first 201 again.
    private func keyed(
        _ request: Request, _ context: HubRequestContext, _ sendRequest: SendRequest, collection: String, extra: [String] = [],
        _ send: (SendRequest) async throws -> Void
    ) async throws -> Response {
        let hub = context.hub.name
        do {
            let answer = try await idempotency.run(
                request, scope: "hub:\(hub)", fingerprint: IdempotentSends.fingerprint(of: sendRequest, extra: [collection] + extra),
                collection: collection
            ) { reusing in
                // A retry of a send the queue did not answer for certain goes under its id.
                var sending = sendRequest
                if let reusing { sending.notificationId = reusing }
                try await send(sending)
                return sending.notificationId
            }
            switch answer {
            case .sent(let id):
                return created(request, hub: hub, collection: collection, id: id)
            case .replay(let id, let original):
                var response = created(request, hub: hub, collection: original, id: id)
                response.headers[IdempotentSends.replayHeader] = "true"
                return response
            }
        } catch is NotificationQueue.NotQueued {
            return try retryLater("the notification could not be queued; try again", after: 5, request, context)
        } catch let refusal as IdempotentSends.Refusal {
            guard let seconds = refusal.retryAfter else { throw HubAPIError(refusal.status, refusal.message) }
            return try retryLater(refusal.message, after: seconds, status: refusal.status, request, context)
        }
    }

    /// A debug send is `POST /{hub}/messages` only: elsewhere the flag would be a real send.
    static func refuseDebug(_ request: Request, _ what: String) throws {
        guard !DebugSend.isRequested(request) else {
            throw HubAPIError(.badRequest, "test: \(what) cannot be a debug send; use POST /{hub}/messages?test")
        }
    }

    /// 503 (or `status`) with `Retry-After`.
    private func retryLater(
        _ message: String, after seconds: Int, status: HTTPResponse.Status = .serviceUnavailable, _ request: Request, _ context: HubRequestContext
    ) throws -> Response {
        var response = try HubAPIError(status, message).response(from: request, context: context)
        response.headers[.retryAfter] = "\(seconds)"
        return response
    }

    /// `POST /{hub}/messages/$batch?direct`: one notification to up to 1,000 device handles, as
    /// `multipart/mixed` with a `notification` part and a `devices` part (a JSON list of handles).
    @Sendable func sendBatch(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        guard request.uri.queryParameters.has("direct") else {
            throw HubAPIError(.badRequest, "$batch sends are direct sends: add ?direct")
        }
        try Self.refuseDebug(request, "$batch")
        guard let boundary = MultipartBody.boundary(in: request.headers[.contentType]) else {
            throw HubAPIError(.unsupportedMediaType, "Content-Type must be multipart/mixed with a boundary")
        }
        let parts = try MultipartBody.parts(Data(buffer: try await request.collectBody(upTo: Self.bodyLimit * 2)), boundary: boundary)
        guard let notification = parts.first(where: { $0.name == "notification" }) else {
            throw HubAPIError(.badRequest, "the multipart body needs a part named notification")
        }
        guard let devices = parts.first(where: { $0.name == "devices" }) else {
            throw HubAPIError(.badRequest, "the multipart body needs a part named devices")
        }
        // The list is JSON; Azure's documentation shows it with single quotes, which is taken too.
        guard !JSONLimits.isTooDeep(devices.body) else { throw HubAPIError(.badRequest, "devices: \(JSONLimits.depthMessage)") }
        let handles =
            (try? JSONDecoder().decode([String].self, from: devices.body))
            ?? (try? JSONDecoder().decode(
                [String].self, from: Data(String(decoding: devices.body, as: UTF8.self).replacingOccurrences(of: "'", with: "\"").utf8)))
        guard let handles, !handles.isEmpty else {
            throw HubAPIError(.badRequest, "devices: must be a JSON list of device handles")
        }
        let formatText = request.headers[.notificationFormat]
        guard let platform = NotificationFormat(rawValue: (formatText ?? "").lowercased())?.platform, platform != .webpush else {
            throw HubAPIError(.badRequest, "ServiceBusNotification-Format: a batch direct send takes apple, gcm, fcmv1 or windows")
        }
        let headers = Self.passedThrough(request.headers)
        let sendRequest: SendRequest
        do {
            sendRequest = try SendRequestBuilder().build(
                hub: hub.name, format: formatText, tags: nil, handles: handles.map { DirectHandle(platform: platform, handle: $0) }, headers: headers,
                body: notification.body, contentType: notification.contentType)
            for (index, handle) in handles.enumerated() { try hub.checkEndpoint(handle, platform: platform, field: "devices[\(index)]") }
        } catch {
            throw HubAPIError.invalid(error)
        }
        return try await keyed(request, context, sendRequest, collection: "messages", extra: ["$batch"]) { sending in
            try await queue.enqueue(sending, expression: nil)
        }
    }

    /// `POST /{hub}/schedulednotifications`: kept until `ServiceBusNotification-ScheduleTime`.
    @Sendable func schedule(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        guard let schedules else { throw HubAPIError(.serviceUnavailable, "scheduled sends need the store") }
        try Self.refuseDebug(request, "a scheduled send")
        guard let text = request.headers[.scheduleTime], let due = RFC3339.parse(text) else {
            throw HubAPIError(
                .badRequest, "ServiceBusNotification-ScheduleTime: an RFC 3339 time is needed, not \(request.headers[.scheduleTime] ?? "(none)")")
        }
        let now = Date()
        guard due > now.addingTimeInterval(-60), due <= now.addingTimeInterval(Self.scheduleHorizon) else {
            throw HubAPIError(.badRequest, "ServiceBusNotification-ScheduleTime: must be in the next 7 days, not \(text)")
        }
        let sendRequest = try await build(request, hub: hub, direct: false).request
        return try await keyed(request, context, sendRequest, collection: "schedulednotifications", extra: [RFC3339.format(due)]) { sending in
            try await schedules.schedule(sending, dueAt: due)
        }
    }

    @Sendable func cancel(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        let id = try context.parameters.require("id")
        guard let schedules, try await schedules.cancelScheduled(hub: hub.name, notificationId: id) else {
            throw HubAPIError(.notFound, "no scheduled notification \(id) waiting to be sent")
        }
        return Response(status: .ok)
    }

    private func build(_ request: Request, hub: HubsConfiguration.Hub, direct: Bool) async throws -> (
        request: SendRequest, expression: TagExpression?
    ) {
        let body = try await request.collectBody(upTo: Self.bodyLimit)
        let headers = Self.passedThrough(request.headers)
        var handle: DirectHandle?
        if direct {
            handle = try Self.directHandle(request)
        }
        do {
            let built = try SendRequestBuilder().buildChecked(
                hub: hub.name, format: request.headers[.notificationFormat], tags: request.headers[.notificationTags],
                handles: handle.map { [$0] },
                headers: headers, body: Data(buffer: body), contentType: request.headers[.contentType])
            if let handle { try hub.checkEndpoint(handle.handle, platform: handle.platform, field: "ServiceBusNotification-DeviceHandle") }
            return built
        } catch {
            throw HubAPIError.invalid(error)
        }
    }

    func created(_ request: Request, hub: String, collection: String, id: String) -> Response {
        Response(
            status: .created,
            headers: [
                .location: "\(access.base(request, hub))/\(collection)/\(id)?api-version=2015-04",
                .trackingId: id,
            ])
    }

    @Sendable func details(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        let id = try context.parameters.require("id")
        guard let outcomes, let outcome = try await outcomes.notification(hub: hub.name, id: id) else {
            throw HubAPIError(.notFound, "notification \(id) not found")
        }
        let location = "\(access.base(request, hub.name))/messages/\(id)?api-version=2015-04"
        let errors = "\(access.base(request, hub.name))/messages/\(id)/errors?api-version=2015-04"
        return Response(
            status: .ok, headers: [.contentType: "application/xml; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: NotificationDetailsXML.xml(outcome, location: location, errorsLocation: errors))))
    }

    /// `GET /{hub}/messages/{id}/errors`: every target of the notification that did not end in
    /// success, one JSON object a line (`application/x-ndjson`), read from the store a page
    /// at a time as it is written out.
    @Sendable func errors(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        let id = try context.parameters.require("id")
        guard let outcomes, try await outcomes.notification(hub: hub.name, id: id) != nil else {
            throw HubAPIError(.notFound, "notification \(id) not found")
        }
        let first = try await storeCall { try await outcomes.failedTargets(hub: hub.name, notificationId: id, after: nil, limit: Self.errorsPage) }
        return Response(
            status: .ok, headers: [.contentType: "application/x-ndjson; charset=utf-8"],
            body: ResponseBody { writer in
                var page = first
                while !page.isEmpty {
                    var buffer = ByteBuffer()
                    for target in page { buffer.writeString(FeedbackJSON.line(target)) }
                    try await writer.write(buffer)
                    guard page.count == Self.errorsPage, let last = page.last?.target else { break }
                    page = try await outcomes.failedTargets(hub: hub.name, notificationId: id, after: last, limit: Self.errorsPage)
                }
                try await writer.finish(nil)
            })
    }

    /// The request's headers that go to the PNS (`SendRequestBuilder.passThrough`), the only
    /// ones the builder reads: the others (the SAS token, Host, the hub's own) are not copied.
    static func passedThrough(_ fields: HTTPFields) -> [String: String] {
        var headers: [String: String] = [:]
        for field in fields where SendRequestBuilder.passThrough(field.name.rawName) { headers[field.name.rawName] = field.value }
        return headers
    }

    /// Failed targets read from the store at a time.
    static let errorsPage = 1_000

    static func directHandle(_ request: Request) throws -> DirectHandle {
        guard let handle = request.headers[.deviceHandle], !handle.isEmpty else {
            throw HubAPIError(.badRequest, "ServiceBusNotification-DeviceHandle: a direct send needs the device handle")
        }
        let format = NotificationFormat(rawValue: (request.headers[.notificationFormat] ?? "").lowercased())
        guard let platform = format?.platform else {
            throw HubAPIError(.badRequest, "ServiceBusNotification-Format: a direct send needs a native format")
        }
        var keys: WebPushKeys?
        if platform == .webpush {
            guard let p256dh = request.headers[.p256dh], let auth = request.headers[.auth] else {
                throw HubAPIError(.badRequest, "P256DH and Auth: a direct Web Push send needs the subscription's keys")
            }
            keys = WebPushKeys(p256dh: p256dh, auth: auth)
        }
        return DirectHandle(platform: platform, handle: handle, webPush: keys)
    }
}

extension HTTPField.Name {
    static let notificationFormat = Self("ServiceBusNotification-Format")!
    static let notificationTags = Self("ServiceBusNotification-Tags")!
    static let deviceHandle = Self("ServiceBusNotification-DeviceHandle")!
    static let trackingId = Self("TrackingId")!
    static let scheduleTime = Self("ServiceBusNotification-ScheduleTime")!
    static let p256dh = Self("P256DH")!
    static let auth = Self("Auth")!
}
