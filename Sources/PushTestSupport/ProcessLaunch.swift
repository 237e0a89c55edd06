import Foundation

/// Test support only (no production target depends on it).
///
/// Runs a command to its end (through `SpawnedProcess`, not Foundation's `Process`).
public enum ProcessLaunch {
    /// Runs `arguments` (the first looked up in PATH) to the end; its exit status and its
    /// standard output and error together. The waiting happens on a thread of its own, never
    /// on Swift's cooperative pool: two tests waiting there would stall every other test.
    public static func output(_ arguments: [String], environment: [String: String] = [:], removing: [String] = []) async throws -> (
        status: Int32, output: String
    ) {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try blockingOutput(arguments, environment: environment, removing: removing) }) }.start()
        }
    }

    static func blockingOutput(_ arguments: [String], environment: [String: String], removing: [String]) throws -> (status: Int32, output: String) {
        var variables = ProcessInfo.processInfo.environment
        for name in removing { variables.removeValue(forKey: name) }
        let process = try SpawnedProcess(arguments[0], arguments: Array(arguments.dropFirst()), environment: variables.merging(environment) { $1 })
        let data = process.output!.readDataToEndOfFile()
        return (process.wait(), String(decoding: data, as: UTF8.self))
    }
}
