import ArgumentParser
import Foundation
import PushEnvironment
import PushModel

/// `pushhub installations list|count|delete`: installations by filters, through the hub API.
struct InstallationsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "installations", abstract: "List, count or delete a hub's installations by tag expression and other filters.",
        discussion: """
            Talks to the hub API (--url, --connection-string, or PUSHHUB_URL and PUSHHUB_CONNECTION_STRING as pushhub dev \\
            prints them) with a key that has the Manage right. Filters combine with AND.

            Examples:
              pushhub installations count --tag 'Sports && !Politics'
              pushhub installations list --platform apns --user-id alice
              pushhub installations delete --push-channel-expired true              # says how many, deletes nothing
              pushhub installations delete --push-channel-expired true --confirm 42 # deletes them, if still 42
            """,
        subcommands: [List.self, Count.self, Delete.self])

    /// The filters every subcommand takes, as the hub API's query.
    struct Filters: ParsableArguments {
        @OptionGroup var hubAPI: HubAPIOptions

        @Option(help: "The hub (default: $PUSHHUB_HUB or pushhub-dev).")
        var hub: String?

        @Option(help: "A tag or tag expression over the installations' tags.")
        var tag: String?

        @Option(help: "apns, gcm, fcmv1, wns, browser, hms, adm, xiaomi or baidu.")
        var platform: String?

        @Option(help: "The installations of one user id.")
        var userId: String?

        @Option(help: "true: the installations whose push channel a push service reported invalid; false: the others.")
        var pushChannelExpired: Bool?

        @Option(help: "Last updated before this RFC 3339 time.")
        var updatedBefore: String?

        @Option(help: "Last updated after this RFC 3339 time.")
        var updatedAfter: String?

        var hubName: String { hub ?? PushHubEnvironment.current.hub ?? "pushhub-dev" }

        /// `name=value&…`, percent-encoded.
        var query: String {
            let pairs: [(String, String?)] = [
                ("tag", tag), ("platform", platform), ("userId", userId), ("pushChannelExpired", pushChannelExpired.map { $0 ? "true" : "false" }),
                ("updatedBefore", updatedBefore), ("updatedAfter", updatedAfter),
            ]
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            return pairs.compactMap { name, value in value.map { "\(name)=\($0.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" } }
                .joined(separator: "&")
        }

        /// The count the hub API gives for these filters.
        func count() async throws -> Int {
            let body = try await get("/installations/$count?\(query)")
            guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any], let count = object["count"] as? Int else {
                throw CommandFailure(description: "the hub API's count is not {\"count\":N}: \(String(decoding: body.prefix(200), as: UTF8.self))")
            }
            return count
        }

        /// Each page of installations, in id order, until `each` says stop.
        func forEachPage(_ each: ([Installation]) async throws -> Bool) async throws {
            var token: String?
            repeat {
                let response = try await hubAPI.call(
                    "GET", hub: hubName, "/installations?\(query)&$top=1000" + (token.map { "&ContinuationToken=\($0)" } ?? ""))
                try Self.check(response.status, response.body)
                let page: [Installation]
                do { page = try WireCoding.makeDecoder().decode([Installation].self, from: response.body) } catch {
                    throw CommandFailure(description: "the hub API's listing is not a list of installations: \(error)")
                }
                guard try await each(page) else { return }
                token = response.headers.first(name: "X-MS-ContinuationToken")
            } while token != nil
        }

        func get(_ path: String) async throws -> Data {
            let response = try await hubAPI.call("GET", hub: hubName, path)
            try Self.check(response.status, response.body)
            return response.body
        }

        static func check(_ status: Int, _ body: Data) throws {
            guard status == 200 else {
                throw CommandFailure(description: "the hub API answered \(status): \(String(decoding: body.prefix(500), as: UTF8.self))")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "One line per installation: id, platform, user, expired, tags.")

        @OptionGroup var filters: Filters

        @Option(help: "Stop after this many.")
        var limit: Int?

        func run() async throws {
            var shown = 0
            emit("INSTALLATION\tPLATFORM\tUSER\tEXPIRED\tTAGS")
            try await filters.forEachPage { page in
                for installation in page {
                    if let limit, shown >= limit { return false }
                    emit(
                        "\(installation.installationId)\t\(installation.platform.rawValue)\t\(installation.userId ?? "-")\t"
                            + "\(installation.pushChannelExpired)\t\(installation.tags.joined(separator: ","))")
                    shown += 1
                }
                return true
            }
        }
    }

    struct Count: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "How many installations the filters take.")

        @OptionGroup var filters: Filters

        func run() async throws { emit("\(try await filters.count())") }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deletes the installations the filters take: first a dry run that counts them, then with --confirm COUNT.")

        @OptionGroup var filters: Filters

        @Option(help: "The count the dry run printed; the delete goes ahead only if the filters still take exactly that many.")
        var confirm: Int?

        func run() async throws {
            guard
                filters.tag != nil || filters.platform != nil || filters.userId != nil || filters.pushChannelExpired != nil
                    || filters.updatedBefore != nil || filters.updatedAfter != nil
            else { throw ValidationError("delete takes at least one filter; every installation is not a filter") }
            let count = try await filters.count()
            guard let confirm else {
                emit("\(count) installation(s) match; nothing was deleted. To delete them, run this again with --confirm \(count).")
                return
            }
            guard confirm == count else {
                throw CommandFailure(
                    description:
                        "--confirm \(confirm), but the filters now take \(count) installation(s); nothing was deleted. Check, then confirm \(count).")
            }
            var deleted = 0
            // Pages in id order: a deleted installation does not move the next page.
            try await filters.forEachPage { page in
                for installation in page where deleted < confirm {
                    var allowed = CharacterSet.urlPathAllowed
                    allowed.remove("/")
                    let id = installation.installationId.addingPercentEncoding(withAllowedCharacters: allowed) ?? installation.installationId
                    let response = try await filters.hubAPI.call("DELETE", hub: filters.hubName, "/installations/\(id)")
                    guard response.status == 204 || response.status == 200 || response.status == 404 else {
                        throw CommandFailure(
                            description: "deleting \(installation.installationId) answered \(response.status) after \(deleted) deleted: "
                                + String(decoding: response.body.prefix(300), as: UTF8.self))
                    }
                    deleted += 1
                }
                return deleted < confirm
            }
            emit("deleted \(deleted) installation(s)")
        }
    }
}
