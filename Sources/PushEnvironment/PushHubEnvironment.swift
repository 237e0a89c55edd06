import Foundation
import Logging

/// Every environment variable PushHub's executables read, read here and nowhere else, with
/// the defaults that stand in for them.
public struct PushHubEnvironment: Sendable {
    /// `PUSHHUB_KAFKA`: bootstrap servers, comma-separated.
    public var kafkaBootstrapServers: [String]?
    /// `PUSHHUB_TOPIC_PREFIX`: prefix of every topic name.
    public var topicPrefix: String?
    /// `PUSHHUB_LOG_LEVEL`: trace, debug, info, notice, warning, error or critical.
    public var logLevel: Logger.Level
    /// `PUSHHUB_DATABASE`: the registration store (`postgres://…` or an SQLite path).
    public var database: String
    /// `PUSHHUB_CONFIG`: the path of `pushhub.yaml`.
    public var configPath: String
    /// `PUSHHUB_PNS_CA`: a PEM CA file the workers trust besides the system's (`pushhub sim`'s).
    public var pnsTrustRoots: String?

    public static let defaultDatabase = "data/pushhub.sqlite"
    public static let defaultConfigPath = "data/pushhub.yaml"

    public static let current = PushHubEnvironment(ProcessInfo.processInfo.environment)

    public init(_ variables: [String: String]) {
        func value(_ name: String) -> String? { variables[name].flatMap { $0.isEmpty ? nil : $0 } }
        kafkaBootstrapServers = value("PUSHHUB_KAFKA").map(Self.servers).flatMap { $0.isEmpty ? nil : $0 }
        topicPrefix = value("PUSHHUB_TOPIC_PREFIX")
        logLevel = value("PUSHHUB_LOG_LEVEL").flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .info
        database = value("PUSHHUB_DATABASE") ?? Self.defaultDatabase
        configPath = value("PUSHHUB_CONFIG") ?? Self.defaultConfigPath
        pnsTrustRoots = value("PUSHHUB_PNS_CA")
    }

    public static func servers(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

/// Logs to standard error at the configured level; returns the process's logger.
public func makeLogger(_ label: String) -> Logger {
    _ = loggingBootstrap
    return Logger(label: label)
}

/// swift-log may be bootstrapped once per process; a global's initializer runs once.
private let loggingBootstrap: Void = {
    let level = PushHubEnvironment.current.logLevel
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
}()

/// Writes a line to standard output at once, so a script reading it need not wait for a
/// buffer to fill.
public func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// A command that could not do its work, as opposed to one used wrongly; printed without usage.
public struct CommandFailure: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}
