import Foundation
import PushTestSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The `pushhub` executable built beside the test bundle.
let pushhubExecutable: URL = {
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    var directory = testBinary.deletingLastPathComponent()
    // The test binary sits in `<scratch>/<config>/` or inside a `.xctest` bundle below it.
    while !FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent("pushhub").path), directory.path != "/" {
        directory.deleteLastPathComponent()
    }
    return directory.appendingPathComponent("pushhub")
}()

/// The project's root directory, for tests that read or check its files.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A child process whose standard output is read line by line and whose standard input
/// takes lines.
final class ChildProcess: Sendable {
    private let process: SpawnedProcess
    private let buffer = LineBuffer()

    /// `error: .merge` reads standard error with standard output.
    init(
        _ executable: URL = pushhubExecutable, arguments: [String], environment: [String: String] = [:], error: SpawnedProcess.ErrorStream = .inherit
    ) throws {
        process = try SpawnedProcess(
            executable.path, arguments: arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
            input: true, error: error)
        // Standard output is read on a thread of its own: reading blocks.
        let output = process.output!
        Thread { [buffer] in
            while true {
                let chunk = output.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
            }
            buffer.finish()
        }.start()
    }

    var output: [String] { buffer.lines }

    var pid: pid_t { process.pid }

    /// The first output line starting with `prefix`, waiting up to `timeout` for it.
    func line(startingWith prefix: String, after skip: Int = 0, timeout: Duration = .seconds(30)) async -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = output.dropFirst(skip).first(where: { $0.hasPrefix(prefix) }) { return line }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    func send(_ line: String) {
        process.input?.write(Data((line + "\n").utf8))
    }

    func signal(_ signal: Int32) {
        process.signal(signal)
    }

    /// The exit status (128 + the signal when one ended it), or nil if the process is still
    /// running after `timeout`.
    func exitStatus(within timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.exitStatus == nil, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        // The output it wrote before it ended is read to its end first (the reading thread
        // may lag behind on busy cores), unless a child of its own keeps the pipe open.
        let outputDeadline = min(deadline, ContinuousClock.now + .seconds(5))
        while process.exitStatus != nil, !buffer.isFinished, ContinuousClock.now < outputDeadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return process.exitStatus
    }
}

/// Output split into lines as it arrives.
final class LineBuffer: Sendable {
    private struct State {
        var lines: [String] = []
        var partial = Data()
        var finished = false
    }

    private let state = Mutex(State())

    var lines: [String] { state.withLock { $0.lines } }

    /// True once the output reached its end.
    var isFinished: Bool { state.withLock { $0.finished } }

    func finish() { state.withLock { $0.finished = true } }

    func append(_ chunk: Data) {
        state.withLock { state in
            state.partial.append(chunk)
            while let newline = state.partial.firstIndex(of: 0x0A) {
                state.lines.append(String(decoding: state.partial[state.partial.startIndex..<newline], as: UTF8.self))
                state.partial.removeSubrange(state.partial.startIndex...newline)
            }
        }
    }
}

/// Asks for a notification's details (`fetch`) until they show `state`, or `timeout` passes;
/// the last details.
func detailsOnceIn(_ state: String, timeout: Duration, fetch: () async throws -> String) async throws -> String {
    var details = ""
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline, !details.contains("<State>\(state)</State>") {
        details = try await fetch()
        try await Task.sleep(for: .milliseconds(100))
    }
    return details
}
