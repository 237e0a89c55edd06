import Foundation

/// The parts of a `multipart/mixed` body, by the `name` of their Content-Disposition.
enum MultipartBody {
    struct Part {
        var name: String?
        var contentType: String?
        var body: Data
    }

    /// The boundary parameter of a multipart Content-Type.
    static func boundary(in contentType: String?) -> String? {
        guard let contentType, contentType.lowercased().hasPrefix("multipart/") else { return nil }
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if pair.count == 2, pair[0].lowercased() == "boundary" {
                // RFC 2046: 1 to 70 characters.
                let boundary = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                return (1...70).contains(boundary.utf8.count) ? boundary : nil
            }
        }
        return nil
    }

    static func parts(_ body: Data, boundary: String) throws -> [Part] {
        let text = String(decoding: body, as: UTF8.self)
        let delimiter = "--" + boundary
        guard text.contains(delimiter) else { throw HubAPIError(.badRequest, "the multipart body has no part delimited by --\(boundary)") }
        var parts: [Part] = []
        for chunk in text.components(separatedBy: delimiter).dropFirst() {
            guard parts.count < 8 else { throw HubAPIError(.badRequest, "a multipart body holds at most 8 parts") }
            if chunk.hasPrefix("--") { break }
            // Headers and content are separated by an empty line (CRLF or LF).
            let trimmed = chunk.drop { $0 == "\r" || $0 == "\n" }
            guard let separator = trimmed.range(of: "\r\n\r\n") ?? trimmed.range(of: "\n\n") else {
                throw HubAPIError(.badRequest, "a multipart part has no empty line between its headers and content")
            }
            var part = Part(body: Data(trimmed[separator.upperBound...].trimmingCharacters(in: .newlines).utf8))
            for line in trimmed[..<separator.lowerBound].split(whereSeparator: \.isNewline) {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                if name == "content-type" { part.contentType = value }
                if name == "content-disposition" {
                    for parameter in value.split(separator: ";") {
                        let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                        if pair.count == 2, pair[0].lowercased() == "name" {
                            part.name = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                        }
                    }
                }
            }
            parts.append(part)
        }
        return parts
    }
}
