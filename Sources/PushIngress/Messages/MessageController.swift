import Foundation
import HTTPTypes
import Hummingbird
import PushModel

/// `POST /{hub}/messages` (Send right): a native or template notification to a tag expression,
/// to everyone, or with `?direct` to one device handle. 201 only after the request is queued
/// in Kafka; 503 with `Retry-After` when it cannot be.
struct MessageController: Sendable {
    let access: HubAccess
    let publisher: any NotificationPublisher
    static let bodyLimit = 64 * 1024

    func addRoutes(to router: Router<IngressContext>) {
        router.post("{hub}/messages", use: send)
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
        do {
            try await publisher.publish(sendRequest)
        } catch {
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
