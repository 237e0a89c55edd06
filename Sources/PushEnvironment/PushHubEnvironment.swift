import Foundation
import Logging
import OTel
import PushKafka
import PushModel
import Synchronization

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
    /// `PUSHHUB_LOG_FORMAT`: `text` (default) or `json`, one object per line for log collectors.
    public var logFormat: LogFormat
    /// `PUSHHUB_PNS_CA`: a PEM CA file the workers trust besides the system's (`pushhub sim`'s).
    public var pnsTrustRoots: String?
    /// `PUSHHUB_URL`, `PUSHHUB_HUB`, `PUSHHUB_CONNECTION_STRING`, `PUSHHUB_SIM_URL`: a running
    /// PushHub as `pushhub dev` prints it, which `pushhub load` drives.
    public var ingressURL: String?
    public var hub: String?
    public var connectionString: String?
    public var simulatorURL: String?
    /// `PUSHHUB_SIM_APNS_URL`: the simulator's HTTP/2 listener (every service, over TLS), where
    /// `pushhub load` points WNS channels and Web Push endpoints when it is set.
    public var simulatorHTTP2URL: String?
    /// `PUSHHUB_OTEL_ENDPOINT`: where spans go, over OTLP/HTTP (`http://collector:4318`);
    /// tracing is off without it.
    public var otelEndpoint: String?

    public static let defaultDatabase = "data/pushhub.sqlite"
    public static let defaultConfigPath = "data/pushhub.yaml"

    public static let current = PushHubEnvironment(ProcessInfo.processInfo.environment)

    public init(_ variables: [String: String]) {
        func value(_ name: String) -> String? { variables[name].flatMap { $0.isEmpty ? nil : $0 } }
        kafkaBootstrapServers = value("PUSHHUB_KAFKA").map(Self.servers).flatMap { $0.isEmpty ? nil : $0 }
        topicPrefix = value("PUSHHUB_TOPIC_PREFIX")
        logLevel = value("PUSHHUB_LOG_LEVEL").flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .info
        logFormat = value("PUSHHUB_LOG_FORMAT").flatMap { LogFormat(rawValue: $0.lowercased()) } ?? .text
        database = value("PUSHHUB_DATABASE") ?? Self.defaultDatabase
        configPath = value("PUSHHUB_CONFIG") ?? Self.defaultConfigPath
        pnsTrustRoots = value("PUSHHUB_PNS_CA")
        ingressURL = value("PUSHHUB_URL")
        hub = value("PUSHHUB_HUB")
        connectionString = value("PUSHHUB_CONNECTION_STRING")
        simulatorURL = value("PUSHHUB_SIM_URL")
        simulatorHTTP2URL = value("PUSHHUB_SIM_APNS_URL")
        otelEndpoint = value("PUSHHUB_OTEL_ENDPOINT")
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
    let (level, format) = (PushHubEnvironment.current.logLevel, PushHubEnvironment.current.logFormat)
    // Lines logged inside a span carry its trace_id and span_id (nothing outside one).
    LoggingSystem.bootstrap(
        { label, provider in
            var handler = LineLogHandler(label: label, logLevel: level, format: format)
            handler.metadataProvider = provider
            return handler
        }, metadataProvider: OTel.makeLoggingMetadataProvider())
}()

public enum LogFormat: String, Sendable {
    case text
    case json
}

/// Log lines on standard error, one an entry, in either format:
/// - text, laid out as swift-log's `StreamLogHandler` lays them out:
///   `<time> <level> <logger>: <key>=<value> … [<source>] <message>`, the metadata's keys in
///   order;
/// - JSON, one object a line: `time`, `level`, `logger`, `message`, and the metadata's keys
///   (`pushhub.notification_id`, `kafka.topic`, …) as they are.
///
/// The metadata is rendered when a line is written, not each time a key is set (as the stream
/// handler did): Hummingbird sets a request id on every request's logger, and rendering it
/// each time was a twentieth of a single-user send's allocations in the ingress, for lines
/// that are almost never written.
public struct LineLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let format: LogFormat
    let write: @Sendable (String) -> Void

    /// `write` takes each line, ended by a newline (standard error by default).
    public init(
        label: String, logLevel: Logger.Level, format: LogFormat = .text,
        write: @escaping @Sendable (String) -> Void = LineLogHandler.standardError
    ) {
        self.label = label
        self.logLevel = logLevel
        self.format = format
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        // The logger's metadata, a provider's (a span's ids) over it, the entry's over both.
        var all = metadata
        if let provided = metadataProvider?.get(), !provided.isEmpty { all.merge(provided) { $1 } }
        if let given = event.metadata, !given.isEmpty { all.merge(given) { $1 } }
        if let error = event.error {
            all["error.message"] = "\(error)"
            all["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        switch format {
        case .text:
            var line = Self.localTime() + " \(event.level)" + (label.isEmpty ? ":" : " \(label):")
            // Values come from outside (a PNS's words, a record's reason): a line break or an
            // escape sequence in one would write lines of its own, or rewrite a terminal's.
            for (key, value) in all.sorted(by: { $0.key < $1.key }) { line += " \(key)=" + Self.escaped("\(value)") }
            line += " [\(event.source)] " + Self.escaped(event.message.description) + "\n"
            write(line)
        case .json:
            var fields: [String: Any] = all.mapValues(Self.plain)
            fields["time"] = ISO8601DateFormatter().string(from: Date())
            fields["level"] = event.level.rawValue
            fields["logger"] = label
            fields["message"] = event.message.description
            guard let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
            write(String(decoding: data, as: UTF8.self) + "\n")
        }
    }

    /// `text` with its control characters (C0, DEL, C1), line and paragraph separators and
    /// backslashes written as escapes: `\n`, `\r`, `\t`, `\\`, or `\u{1B}`. What is left
    /// cannot start a line of its own or drive a terminal.
    static func escaped(_ text: String) -> String {
        guard text.utf8.contains(where: { FieldCheck.isControl($0) || $0 == UInt8(ascii: "\\") || $0 >= 0xC2 }) else { return text }
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x0A: escaped += "\\n"
            case 0x0D: escaped += "\\r"
            case 0x09: escaped += "\\t"
            case 0x5C: escaped += "\\\\"
            case 0..<0x20, 0x7F...0x9F, 0x2028, 0x2029: escaped += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    static func plain(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): text
        case .stringConvertible(let convertible): convertible.description
        case .array(let values): values.map(plain)
        case .dictionary(let values): values.mapValues(plain)
        }
    }

    /// The local time to the second with its offset from UTC: `2026-11-28T12:51:45+0000`.
    static func localTime() -> String {
        var now = time(nil)
        var parts = tm()
        guard localtime_r(&now, &parts) != nil else { return "<unknown>" }
        var text = [CChar](repeating: 0, count: 64)
        let count = strftime(&text, text.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
        return String(decoding: text.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Writes a line to standard error whole: one `write` where it can, and no other thread's
    /// line in between.
    public static let standardError: @Sendable (String) -> Void = { line in
        var line = line
        line.withUTF8 { bytes in writing.withLock { _ in writeWhole(bytes, to: STDERR_FILENO) } }
    }

    /// How long a line waits for a descriptor that takes nothing (a full pipe left
    /// non-blocking by whoever made it) before the rest of it is dropped.
    public static let stalledWriteWait: Int32 = 1_000

    /// Writes `bytes` to `descriptor`, again after a signal or a partial write. A non-blocking
    /// descriptor that is full is waited for (`poll`) at most `wait` ms each time, never spun
    /// on; the rest of a line it does not take by then is dropped, as stdio drops what a stream
    /// refuses. Says whether all of it was written.
    @discardableResult
    public static func writeWhole(_ bytes: UnsafeBufferPointer<UInt8>, to descriptor: Int32, wait: Int32 = stalledWriteWait) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var written = 0
        while written < bytes.count {
            let count = Foundation.write(descriptor, base + written, bytes.count - written)
            if count > 0 {
                written += count
            } else if count < 0, errno == EINTR {
                continue
            } else if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                let polled = poll(&ready, 1, wait)
                if polled < 0, errno == EINTR { continue }
                guard polled > 0, ready.revents & Int16(POLLOUT) != 0 else { return false }
            } else {
                return false
            }
        }
        return true
    }

    private static let writing = Mutex(())
}

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

/// PushHub's version, as `--version` prints it.
public enum PushHubVersion {
    public static let number = "0.1.0"

    /// `pushhub 0.1.0 (librdkafka 2.0.2)`.
    public static func line(_ command: String) -> String { "\(command) \(number) (librdkafka \(KafkaLibrary.version))" }
}
