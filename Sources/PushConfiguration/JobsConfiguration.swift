import Foundation

/// `jobs` in `pushhub.yaml`: where import and export jobs keep their files, and their limits.
public struct JobsConfiguration: Codable, Sendable, Equatable {
    /// The jobs directory: each hub's input files under `{directory}/{hub}/`, each job's
    /// files under `{directory}/{hub}/{jobId}/`. A relative path is beside `pushhub.yaml`
    /// (default `jobs`). Ingresses that share a PostgreSQL store share this directory too.
    public var directory: String?
    /// How long an ingress holds a job it runs without a word before another may take it
    /// over (default 30): a job whose ingress died goes on this long after.
    public var leaseSeconds: Int?
    /// The largest input a job reads, uploaded or from the directory (default 1 GiB).
    public var maximumInputBytes: Int64?

    public init(directory: String? = nil, leaseSeconds: Int? = nil, maximumInputBytes: Int64? = nil) {
        self.directory = directory
        self.leaseSeconds = leaseSeconds
        self.maximumInputBytes = maximumInputBytes
    }

    public var lease: TimeInterval { TimeInterval(leaseSeconds ?? 30) }
    public var inputLimit: Int64 { maximumInputBytes ?? 1 << 30 }

    /// The directory, a relative one taken from beside the configuration file at `configurationPath`.
    public func resolvedDirectory(configurationPath: String) -> String {
        let directory = directory ?? "jobs"
        if directory.hasPrefix("/") { return directory }
        return URL(fileURLWithPath: configurationPath).deletingLastPathComponent().appendingPathComponent(directory).standardized.path
    }

    func validate(at path: String) throws {
        if let directory, directory.isEmpty || directory.contains("\0") { throw ConfigurationError("\(path).directory: must be a path") }
        if let leaseSeconds, !(2...3_600).contains(leaseSeconds) { throw ConfigurationError("\(path).leaseSeconds: must be 2 to 3600") }
        if let maximumInputBytes, maximumInputBytes < 1_024 { throw ConfigurationError("\(path).maximumInputBytes: must be 1024 or more") }
    }
}
