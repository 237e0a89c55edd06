import Foundation
import Logging

/// Every environment variable PushHub's command line reads, read here and nowhere else.
struct PushHubEnvironment: Sendable {
    /// `PUSHHUB_KAFKA`: bootstrap servers, comma-separated.
    var kafkaBootstrapServers: [String]?
    /// `PUSHHUB_TOPIC_PREFIX`: prefix of every topic name.
    var topicPrefix: String?
    /// `PUSHHUB_LOG_LEVEL`: trace, debug, info, notice, warning, error or critical.
    var logLevel: Logger.Level
    /// `PUSHHUB_DATABASE`: the registration store.
    var database: String?

    static let current = PushHubEnvironment(ProcessInfo.processInfo.environment)

    init(_ variables: [String: String]) {
        kafkaBootstrapServers = variables["PUSHHUB_KAFKA"].map(Self.servers).flatMap { $0.isEmpty ? nil : $0 }
        topicPrefix = variables["PUSHHUB_TOPIC_PREFIX"]
        logLevel = variables["PUSHHUB_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .info
        database = variables["PUSHHUB_DATABASE"].flatMap { $0.isEmpty ? nil : $0 }
    }

    static func servers(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

/// Logs to standard error at the configured level; returns the process's logger.
func makeLogger(_ label: String) -> Logger {
    let level = PushHubEnvironment.current.logLevel
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
    return Logger(label: label)
}

/// Writes a line to standard output at once, so a script reading it need not wait for a
/// buffer to fill.
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// A command that could not do its work, as opposed to one used wrongly; printed without usage.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
}
