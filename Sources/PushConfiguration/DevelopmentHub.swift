import Crypto
import Foundation

extension HubsConfiguration {
    /// A configuration for one development hub with freshly generated keys: a full-access and
    /// a listen-only SAS rule, and the app-backend API bound to it.
    public static func development(hubName: String = "pushhub-dev") -> HubsConfiguration {
        HubsConfiguration(
            hubs: [
                Hub(
                    name: hubName,
                    sasRules: [
                        SASRule(name: "DefaultFullSharedAccessSignature", key: generateKey(), rights: [.listen, .send, .manage]),
                        SASRule(name: "DefaultListenSharedAccessSignature", key: generateKey(), rights: [.listen]),
                    ])
            ],
            appBackend: AppBackend(hub: hubName))
    }

    /// Loads `path`; when it does not exist, writes a development configuration there first
    /// and says so through `created`.
    public static func loadOrCreateDevelopment(at path: String, created: (HubsConfiguration) -> Void) throws -> HubsConfiguration {
        if FileManager.default.fileExists(atPath: path) { return try load(from: path) }
        let configuration = development()
        try configuration.write(to: path)
        created(configuration)
        return configuration
    }

    /// Writes the configuration to `path` (its directory made if needed), readable by the owner
    /// only: it holds keys. An existing file is replaced whole, never left half-written.
    public func write(to path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        let temporary = path + ".tmp-\(UUID().uuidString.prefix(8))"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(try yaml().utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ConfigurationError("\(path): could not be written")
        }
        guard rename(temporary, path) == 0 else {
            try? FileManager.default.removeItem(atPath: temporary)
            throw ConfigurationError("\(path): could not be replaced")
        }
    }

    /// 32 random bytes, base64, as Azure's keys look.
    static func generateKey() -> String {
        Data(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }).base64EncodedString()
    }

    /// `Endpoint=sb://HOST/;SharedAccessKeyName=…;SharedAccessKey=…` for one rule.
    public static func connectionString(endpoint: String, rule: SASRule) -> String {
        "Endpoint=sb://\(endpoint)/;SharedAccessKeyName=\(rule.name);SharedAccessKey=\(rule.key)"
    }
}
