import ArgumentParser
import Foundation
import PushEnvironment
import PushIngress

/// `pushhub token`: a SAS token from a connection string, for curl and scripts.
struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print an Authorization header value (a SAS token) for a resource, made from a connection string.",
        discussion:
            "Examples:\n  pushhub token \"$PUSHHUB_CONNECTION_STRING\" /pushhub-dev\n  curl -H \"Authorization: $(pushhub token \"$PUSHHUB_CONNECTION_STRING\" /pushhub-dev --lifetime 600)\" \"$PUSHHUB_URL/pushhub-dev/registrations\""
    )

    @Argument(help: "Endpoint=sb://…;SharedAccessKeyName=…;SharedAccessKey=…")
    var connectionString: String

    @Argument(help: "The resource path the token is for, e.g. /myhub (the whole hub).")
    var path: String

    @Option(help: "Seconds the token stays valid.")
    var lifetime: Int = 3600

    func run() throws {
        guard let connection = ConnectionString(connectionString) else {
            throw ValidationError("not a connection string: Endpoint=sb://host/;SharedAccessKeyName=…;SharedAccessKey=…")
        }
        guard lifetime > 0 else { throw ValidationError("--lifetime must be positive") }
        print(connection.token(for: path.hasPrefix("/") ? path : "/" + path, lifetime: TimeInterval(lifetime)))
    }
}
