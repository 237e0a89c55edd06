import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One request to `url`: `method`, `authorization`, then `contentType` when given, then `headers` (so they win), and
/// `body` as UTF-8. Returns the status (0 when the answer is not HTTP), the body as text and the response.
func httpCall(
    _ method: String, _ url: String, _ body: String? = nil, authorization: String, contentType: String? = nil, headers: [String: String] = [:]
) async throws -> (Int, String, HTTPURLResponse?) {
    var request = URLRequest(url: URL(string: url)!)
    request.httpMethod = method
    request.setValue(authorization, forHTTPHeaderField: "Authorization")
    if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    request.httpBody = body.map { Data($0.utf8) }
    let (data, response) = try await URLSession.shared.data(for: request)
    let http = response as? HTTPURLResponse
    return (http?.statusCode ?? 0, String(decoding: data, as: UTF8.self), http)
}
