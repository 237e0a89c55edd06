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
    static let bodyLimit = 64 * 1024

    func addRoutes(to router: Router<IngressContext>) {
        router.post("{hub}/messages", use: send)
        router.get("{hub}/messages/{id}", use: details)
    }

    @Sendable func send(_ request: Request, context: IngressContext) async throws -> Response {
        let hub = try access.authorize(request, hub: try context.parameters.require("hub"), .send)
        let body = try await request.collectBody(upTo: Self.bodyLimit)
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.rawName] = field.value }
        var handle: DirectHandle?
        if request.uri.queryParameters.has("direct") {
            handle = try Self.directHandle(request)
        }
        let sendRequest: SendRequest
        do {
            sendRequest = try SendRequestBuilder().build(
                hub: hub.name, format: request.headers[.notificationFormat], tags: request.headers[.notificationTags], handle: handle,
                headers: headers, body: Data(buffer: body), contentType: request.headers[.contentType])
        } catch {
            throw HubAPIError.invalid(error)
        }
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
        let base = RegistrationController.base(request, hub.name)
        return Response(status: .created, headers: [
            .location: "\(base)/messages/\(sendRequest.notificationId)?api-version=2015-04",
            .trackingId: sendRequest.notificationId,
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
    static let p256dh = Self("P256DH")!
    static let auth = Self("Auth")!
}
