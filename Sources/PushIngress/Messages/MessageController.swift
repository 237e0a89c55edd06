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
    static let bodyLimit = 64 * 1024
    /// How far ahead a send may be scheduled.
    static let scheduleHorizon: TimeInterval = 7 * 24 * 3600

    func addRoutes(to routes: HubRoutes) {
        let group = routes.requiring(.send)
        group.post("{hub}/messages", use: send)
        group.post("{hub}/messages/$batch", use: sendBatch)
        group.get("{hub}/messages/{id}", use: details)
        group.post("{hub}/schedulednotifications", use: schedule)
        group.delete("{hub}/schedulednotifications/{id}", use: cancel)
    }

    @Sendable func send(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        let built = try await build(request, hub: hub, direct: request.uri.queryParameters.has("direct"))
        return try await publish(built.request, expression: built.expression, hub: hub, request, context)
    }

    /// Queues a checked send: 201 once Kafka acknowledged it, 503 with Retry-After when not.
    private func publish(
        _ sendRequest: SendRequest, expression: TagExpression? = nil, hub: HubsConfiguration.Hub, _ request: Request, _ context: HubRequestContext
    ) async throws
        -> Response
    {
        do {
            try await queue.enqueue(sendRequest, expression: expression)
        } catch is NotificationQueue.NotQueued {
            var response = try HubAPIError(.serviceUnavailable, "the notification could not be queued; try again").response(
                from: request, context: context)
            response.headers[.retryAfter] = "5"
            return response
        }
        return created(request, hub: hub.name, collection: "messages", id: sendRequest.notificationId)
    }

    /// `POST /{hub}/messages/$batch?direct`: one notification to up to 1,000 device handles, as
    /// `multipart/mixed` with a `notification` part and a `devices` part (a JSON list of handles).
    @Sendable func sendBatch(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        guard request.uri.queryParameters.has("direct") else {
            throw HubAPIError(.badRequest, "$batch sends are direct sends: add ?direct")
        }
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
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.rawName] = field.value }
        let sendRequest: SendRequest
        do {
            sendRequest = try SendRequestBuilder().build(
                hub: hub.name, format: formatText, tags: nil, handles: handles.map { DirectHandle(platform: platform, handle: $0) }, headers: headers,
                body: notification.body, contentType: notification.contentType)
            for (index, handle) in handles.enumerated() { try hub.checkEndpoint(handle, platform: platform, field: "devices[\(index)]") }
        } catch {
            throw HubAPIError.invalid(error)
        }
        return try await publish(sendRequest, hub: hub, request, context)
    }

    /// `POST /{hub}/schedulednotifications`: kept until `ServiceBusNotification-ScheduleTime`.
    @Sendable func schedule(_ request: Request, context: HubRequestContext) async throws -> Response {
        let hub = context.hub
        guard let schedules else { throw HubAPIError(.serviceUnavailable, "scheduled sends need the store") }
        guard let text = request.headers[.scheduleTime], let due = RFC3339.parse(text) else {
            throw HubAPIError(
                .badRequest, "ServiceBusNotification-ScheduleTime: an RFC 3339 time is needed, not \(request.headers[.scheduleTime] ?? "(none)")")
        }
        let now = Date()
        guard due > now.addingTimeInterval(-60), due <= now.addingTimeInterval(Self.scheduleHorizon) else {
            throw HubAPIError(.badRequest, "ServiceBusNotification-ScheduleTime: must be in the next 7 days, not \(text)")
        }
        let sendRequest = try await build(request, hub: hub, direct: false).request
        try await schedules.schedule(sendRequest, dueAt: due)
        return created(request, hub: hub.name, collection: "schedulednotifications", id: sendRequest.notificationId)
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
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.rawName] = field.value }
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
        return Response(
            status: .ok, headers: [.contentType: "application/xml; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: NotificationDetailsXML.xml(outcome, location: location))))
    }

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
