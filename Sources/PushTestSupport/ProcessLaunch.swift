import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Test support only (no production target depends on it).
///
/// Starts child processes one at a time across the whole test run. swift-corelibs-foundation's
/// `Process.run()` has crashed (a bad memcpy) when several test tasks launched at once; a
/// `flock` on one file serializes launches across every test module in this process, since
/// each open of the file gets a lock of its own.
public enum ProcessLaunch {
    static let lockPath = FileManager.default.temporaryDirectory.appendingPathComponent("pushhub-tests-process-launch.lock").path

    public static func run(_ process: Process) throws {
        let descriptor = open(lockPath, O_CREAT | O_RDWR, 0o600)
        guard descriptor >= 0 else { return try process.run() }
        defer { close(descriptor) }
        flock(descriptor, LOCK_EX)
        defer { flock(descriptor, LOCK_UN) }
        try process.run()
    }
}

extension ProcessLaunch {
    /// Runs `arguments` (through `/usr/bin/env`) to the end; its exit status and its standard
    /// output and error together.
    public static func output(_ arguments: [String], environment: [String: String] = [:], removing: [String] = []) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        var variables = ProcessInfo.processInfo.environment
        for name in removing { variables.removeValue(forKey: name) }
        process.environment = variables.merging(environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try run(process)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
