import ArgumentParser
import Foundation
import PushEnvironment
import PushIngress
import PushProviders

/// Where the hub API is and how to authorize to it, with the defaults `pushhub dev` prints.
struct HubAPIOptions: ParsableArguments {
    @Option(help: "The ingress (default: $PUSHHUB_URL or http://127.0.0.1:8080).")
    var url: String?

    @Option(help: "A connection string with Send and Manage rights (default: $PUSHHUB_CONNECTION_STRING).")
    var connectionString: String?

    /// The ingress's URL, without a trailing slash.
    func ingressURL(_ environment: PushHubEnvironment = .current) -> String {
        var url = url ?? environment.ingressURL ?? "http://127.0.0.1:8080"
        while url.hasSuffix("/") { url.removeLast() }
        return url
    }

    func connection(_ environment: PushHubEnvironment = .current) throws(CommandFailure) -> ConnectionString {
        guard let text = connectionString ?? environment.connectionString else {
            throw CommandFailure(description: "say how to authorize: --connection-string or PUSHHUB_CONNECTION_STRING (pushhub dev prints one)")
        }
        guard let connection = ConnectionString(text) else {
            throw CommandFailure(description: "--connection-string is not Endpoint=sb://HOST/;SharedAccessKeyName=…;SharedAccessKey=…")
        }
        return connection
    }

    /// One call to the hub API of `hub`: `path` is below `/{hub}` and may carry a query.
    /// `bodyLimit` keeps that much of the answer's body (default 64 KiB, past which it throws).
    func call(
        _ method: String, hub: String, _ path: String, headers: [(String, String)] = [], body: Data? = nil, bodyLimit: Int? = nil,
        timeout: Duration = .seconds(120)
    ) async throws -> PNSResponse {
        let connection = try connection()
        let http = PNSHTTPClient(connections: 1, requestTimeout: timeout)
        let url = "\(ingressURL())/\(hub)\(path)\(path.contains("?") ? "&" : "?")api-version=2015-04"
        do {
            let response = try await http.send(
                .init(rawValue: method), url, headers: [("Authorization", connection.token(for: "/\(hub)"))] + headers, body: body,
                bodyLimit: bodyLimit)
            await http.shutdown()
            return response
        } catch {
            await http.shutdown()
            throw CommandFailure(description: "the hub API at \(ingressURL()) did not answer: \(error)")
        }
    }
}
