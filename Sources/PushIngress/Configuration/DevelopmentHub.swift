import Crypto
import Foundation

extension HubsConfiguration {
    /// A configuration for one development hub with freshly generated keys: a full-access and
    /// a listen-only SAS rule, and the app-backend API bound to it.
    public static func development(hubName: String = "pushhub-dev") -> HubsConfiguration {
        HubsConfiguration(
            hubs: [
                Hub(name: hubName, sasRules: [
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
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        // The keys are secrets: only the owner may read the file.
        guard FileManager.default.createFile(atPath: path, contents: Data(try configuration.yaml().utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ConfigurationError("\(path): could not be written")
        }
        created(configuration)
        return configuration
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
