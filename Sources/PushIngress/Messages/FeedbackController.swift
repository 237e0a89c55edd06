import Foundation
import Hummingbird
import PushModel
import PushStore

/// `GET /{hub}/feedback?since=` (Manage): the handles PushHub pruned because their push service
/// called them invalid, with when and why, one JSON object a line in the order they were
/// pruned; what Azure keeps in its feedback container. Pages of `$top` (at most 1,000) with
/// `X-MS-ContinuationToken`.
struct FeedbackController: Sendable {
    let outcomes: any OutcomeStore
    static let pageLimit = 1_000

    func addRoutes(to routes: HubRoutes) {
        routes.requiring(.manage).get("{hub}/feedback", use: list)
    }

    @Sendable func list(_ request: Request, context: HubRequestContext) async throws -> Response {
        let parameters = request.uri.queryParameters
        var since = Date(timeIntervalSince1970: 0)
        if let text = parameters.get("since") {
            guard let date = RFC3339.parse(text) else { throw HubAPIError(.badRequest, "since: must be an RFC 3339 time, not \(text.prefix(40))") }
            since = date
        }
        let limit = try pageSize(request, default: Self.pageLimit, maximum: Self.pageLimit)
        let after = try continuation(request) { Int64($0).flatMap { $0 > 0 ? $0 : nil } }
        let page = try await storeCall { try await outcomes.prunedHandles(hub: context.hub.name, since: since, after: after, limit: limit) }
        var buffer = ByteBuffer()
        for pruned in page { buffer.writeString(FeedbackJSON.line(pruned)) }
        var response = Response(status: .ok, headers: [.contentType: "application/x-ndjson; charset=utf-8"], body: .init(byteBuffer: buffer))
        if page.count == limit, let last = page.last { response.headers[.continuationToken] = String(last.sequence) }
        return response
    }
}

/// The JSON lines of the error details and the feedback.
enum FeedbackJSON {
    /// A target that did not end in success; its handle shortened, as Azure's details are.
    static func line(_ target: FailedTarget) -> String {
        line([
            "handle": target.result.handle.map(HandleDisplay.shortened), "registrationId": target.result.registrationId,
            "platform": target.platform?.rawValue, "outcome": target.result.outcome.rawValue, "pnsStatus": target.result.pnsStatus,
            "pnsReason": target.result.pnsReason, "attempts": target.result.attempts, "time": RFC3339.format(target.at),
        ])
    }

    /// A pruned handle, whole: the app's backend needs it to forget the device too.
    static func line(_ pruned: PrunedHandle) -> String {
        line([
            "handle": pruned.handle, "platform": pruned.platform?.rawValue, "registrationId": pruned.registrationId,
            "notificationId": pruned.notificationId, "pnsStatus": pruned.pnsStatus, "pnsReason": pruned.pnsReason,
            "time": RFC3339.format(pruned.prunedAt),
        ])
    }

    private static func line(_ fields: [String: Any?]) -> String {
        let present = fields.compactMapValues { $0 }
        let data = (try? JSONSerialization.data(withJSONObject: present, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}
