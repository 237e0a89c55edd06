import Foundation
import HTTPTypes
import Hummingbird
import PushModel
import PushStore

/// `POST /{hub}/messages` (Send right): a native or template notification to a tag expression,
/// to everyone, or with `?direct` to one device handle. 201 only after the request is queued
/// in Kafka; 503 with `Retry-After` when it cannot be.
struct MessageController: Sendable {
    let access: HubAccess
    let publisher: any NotificationPublisher
    let outcomes: (any OutcomeStore)?
    let schedules: (any ScheduleStore)?
    static let bodyLimit = 64 * 1024
    /// How far ahead a send may be scheduled.
    static let scheduleHorizon: TimeInterval = 7 * 24 * 3600

    func addRoutes(to router: Router<IngressContext>) {
        router.post("{hub}/messages", use: send)
        router.get("{hub}/messages/{id}", use: details)
        router.post("{hub}/schedulednotifications", use: schedule)
        router.delete("{hub}/schedulednotifications/{id}", use: cancel)
    }

    @Sendable func send(_ request: Request, context: IngressContext) async throws -> Response {
        let hub = try access.authorize(request, hub: try context.parameters.require("hub"), .send)
        let sendRequest = try await build(request, hub: hub, direct: request.uri.queryParameters.has("direct"))
        // Noted before it is queued, so a GET right after the 201 finds it.
        try await outcomes?.recordEnqueued(hub: hub.name, notificationId: sendRequest.notificationId, at: sendRequest.enqueuedAt)
        do {
            try await publisher.publish(sendRequest)
        } catch {
            try? await outcomes?.forgetEnqueued(hub: hub.name, notificationId: sendRequest.notificationId)
            var response = try HubAPIError(.serviceUnavailable, "the notification could not be queued; try again").response(from: request, context: context)
            response.headers[.retryAfter] = "5"
            return response
        }
        return Self.created(request, hub: hub.name, collection: "messages", id: sendRequest.notificationId)
    }

    /// `POST /{hub}/schedulednotifications`: kept until `ServiceBusNotification-ScheduleTime`.
    @Sendable func schedule(_ request: Request, context: IngressContext) async throws -> Response {
        let hub = try access.authorize(request, hub: try context.parameters.require("hub"), .send)
        guard let schedules else { throw HubAPIError(.serviceUnavailable, "scheduled sends need the store") }
        guard let text = request.headers[.scheduleTime], let due = RFC3339.parse(text) else {
            throw HubAPIError(.badRequest, "ServiceBusNotification-ScheduleTime: an RFC 3339 time is needed, not \(request.headers[.scheduleTime] ?? "(none)")")
        }
        let now = Date()
        guard due > now.addingTimeInterval(-60), due <= now.addingTimeInterval(Self.scheduleHorizon) else {
            throw HubAPIError(.badRequest, "ServiceBusNotification-ScheduleTime: must be in the next 7 days, not \(text)")
        }
        let sendRequest = try await build(request, hub: hub, direct: false)
        try await schedules.schedule(sendRequest, dueAt: due)
        return Self.created(request, hub: hub.name, collection: "schedulednotifications", id: sendRequest.notificationId)
    }

    @Sendable func cancel(_ request: Request, context: IngressContext) async throws -> Response {
        let hub = try access.authorize(request, hub: try context.parameters.require("hub"), .send)
        let id = try context.parameters.require("id")
        guard let schedules, try await schedules.cancelScheduled(hub: hub.name, notificationId: id) else {
            throw HubAPIError(.notFound, "no scheduled notification \(id) waiting to be sent")
        }
        return Response(status: .ok)
    }

    private func build(_ request: Request, hub: HubsConfiguration.Hub, direct: Bool) async throws -> SendRequest {
        let body = try await request.collectBody(upTo: Self.bodyLimit)
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.rawName] = field.value }
        var handle: DirectHandle?
        if direct {
            handle = try Self.directHandle(request)
        }
        do {
            return try SendRequestBuilder().build(
                hub: hub.name, format: request.headers[.notificationFormat], tags: request.headers[.notificationTags], handle: handle,
                headers: headers, body: Data(buffer: body), contentType: request.headers[.contentType])
        } catch {
            throw HubAPIError.invalid(error)
        }
    }

    static func created(_ request: Request, hub: String, collection: String, id: String) -> Response {
        Response(status: .created, headers: [
            .location: "\(RegistrationController.base(request, hub))/\(collection)/\(id)?api-version=2015-04",
            .trackingId: id,
        ])
    }

    @Sendable func details(_ request: Request, context: IngressContext) async throws -> Response {
        let hub = try access.authorize(request, hub: try context.parameters.require("hub"), .send)
        let id = try context.parameters.require("id")
        guard let outcomes, let outcome = try await outcomes.notification(hub: hub.name, id: id) else {
            throw HubAPIError(.notFound, "notification \(id) not found")
        }
        let location = "\(RegistrationController.base(request, hub.name))/messages/\(id)?api-version=2015-04"
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
