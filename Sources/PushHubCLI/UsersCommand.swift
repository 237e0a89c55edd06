import ArgumentParser
import Foundation
import PushEnvironment
import PushIngress
import PushStore

/// `pushhub users add NAME`: app-backend users, with bcrypt password hashes in the store.
/// `pushhub users hash`: the hash of a console account's password, for `pushhub.yaml`.
struct UsersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users", abstract: "Manage the app-backend API's users; hash a console account's password.",
        discussion:
            "Examples:\n  echo 'a long password' | pushhub users add alice\n  pushhub users add bob --database postgres://pushhub@localhost/pushhub < password.txt\n  echo 'a long password' | pushhub users hash",
        subcommands: [Add.self, Hash.self])

    /// A password from one line of standard input, refused when bcrypt could not use all of it.
    static func readPassword() throws -> String {
        guard let password = readLine(strippingNewline: true), password.count >= 8 else {
            throw CommandFailure(description: "give the password (at least 8 characters) as one line on standard input")
        }
        guard password.utf8.count <= UserAuthenticator.maximumPasswordBytes else {
            throw CommandFailure(
                description:
                    "a password is at most \(UserAuthenticator.maximumPasswordBytes) bytes (bcrypt ignores the rest, so a longer one would be weaker than it looks)"
            )
        }
        return password
    }

    struct Hash: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the bcrypt hash of a password read from standard input (one line), for console.accounts in pushhub.yaml.")

        func run() async throws {
            emit(hashPassword(try UsersCommand.readPassword()))
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a user, or set a user's password. The password is read from standard input (one line).",
            discussion:
                "Examples:\n  echo 'a long password' | pushhub users add alice\n  pushhub users add bob --database postgres://pushhub@localhost/pushhub < password.txt"
        )

        @Argument(help: "The user name; it becomes the tag username:NAME.")
        var name: String

        @Option(help: "The registration store: postgres://… or an SQLite path (default: $PUSHHUB_DATABASE or ./data/pushhub.sqlite).")
        var database: String?

        func validate() throws {
            guard !name.isEmpty, name.count <= 100,
                name.unicodeScalars.allSatisfy({ scalar in
                    ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                        || "_@#.-".unicodeScalars.contains(scalar)
                })
            else {
                throw ValidationError("a user name is 1 to 100 letters, digits and _ @ # . - (it becomes a tag)")
            }
        }

        func run() async throws {
            let password = try UsersCommand.readPassword()
            let location = StoreLocation(database ?? PushHubEnvironment.current.database)
            let store = try await location.open(logger: makeLogger("pushhub.users"))
            try await store.setUser(name: name, passwordHash: hashPassword(password))
            await store.close()
            emit("user \(name) saved in \(location)")
        }
    }
}
