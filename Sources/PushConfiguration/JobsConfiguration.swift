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
    /// A pause between two chunks of an import, in milliseconds (default 0): it spreads a large
    /// import out, leaving the store's writer to the API between chunks; tests use it to keep an
    /// import in its middle long enough to stop it there. At most 1000, half the shortest lease,
    /// so that a job keeps its lease through a pause.
    public var chunkPauseMilliseconds: Int?

    public init(directory: String? = nil, leaseSeconds: Int? = nil, maximumInputBytes: Int64? = nil, chunkPauseMilliseconds: Int? = nil) {
        self.directory = directory
        self.leaseSeconds = leaseSeconds
        self.maximumInputBytes = maximumInputBytes
        self.chunkPauseMilliseconds = chunkPauseMilliseconds
    }

    public var lease: TimeInterval { TimeInterval(leaseSeconds ?? 30) }
    public var inputLimit: Int64 { maximumInputBytes ?? 1 << 30 }
    public var chunkPause: Duration { .milliseconds(chunkPauseMilliseconds ?? 0) }

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
        if let chunkPauseMilliseconds, !(0...1_000).contains(chunkPauseMilliseconds) {
            throw ConfigurationError("\(path).chunkPauseMilliseconds: must be 0 to 1000")
        }
    }
}
