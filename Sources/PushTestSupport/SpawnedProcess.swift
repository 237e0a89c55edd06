import CSpawn
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Test support only (no production target depends on it).
///
/// A child process started with `posix_spawn`, not Foundation's `Process`: swift-corelibs-
/// foundation's `Process.run()` crashes now and then (a bad memcpy while it scans
/// `/proc/self/fd`) in a test process holding many descriptors. The child gets the pipes it
/// is given as standard input, output and error, and no other descriptor of ours.
public final class SpawnedProcess: Sendable {
    public let pid: pid_t
    /// Where the child's standard input is written; nil when it reads /dev/null.
    public let input: FileHandle?
    /// Where the child's standard output (and error, when merged) is read; nil when inherited.
    public let output: FileHandle?
    private let status = Mutex<Int32?>(nil)

    /// What becomes of the child's standard error.
    public enum ErrorStream: Sendable { case inherit, merge }

    /// Starts `executable` (an absolute path, or a name looked up in PATH).
    public init(
        _ executable: String, arguments: [String], environment: [String: String], input wantsInput: Bool = false,
        captureOutput: Bool = true, error: ErrorStream = .merge
    ) throws {
        var toChild: [Int32] = [-1, -1]
        var fromChild: [Int32] = [-1, -1]
        if wantsInput { guard pipe2(&toChild, O_CLOEXEC) == 0 else { throw SpawnError("pipe: errno \(errno)") } }
        if captureOutput {
            guard pipe2(&fromChild, O_CLOEXEC) == 0 else {
                for descriptor in toChild where descriptor >= 0 { close(descriptor) }
                throw SpawnError("pipe: errno \(errno)")
            }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if wantsInput {
            posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if captureOutput {
            posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
            if error == .merge { posix_spawn_file_actions_adddup2(&actions, fromChild[1], 2) }
        }
        // Nothing else of this process leaks into the child.
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        let result =
            executable.contains("/")
            ? posix_spawn(&child, executable, &actions, nil, argv, envp)
            : posix_spawnp(&child, executable, &actions, nil, argv, envp)
        for descriptor in [toChild[0], fromChild[1]] where descriptor >= 0 { close(descriptor) }
        guard result == 0 else {
            for descriptor in [toChild[1], fromChild[0]] where descriptor >= 0 { close(descriptor) }
            throw SpawnError("\(executable): posix_spawn failed with errno \(result)")
        }
        pid = child
        input = wantsInput ? FileHandle(fileDescriptor: toChild[1], closeOnDealloc: true) : nil
        output = captureOutput ? FileHandle(fileDescriptor: fromChild[0], closeOnDealloc: true) : nil
    }

    /// The exit status (128 + the signal for a child killed by one), or nil while it runs. The
    /// child is reaped here only, under the lock, so no one signals a reaped (reused) pid.
    public var exitStatus: Int32? {
        status.withLock { known in
            if let known { return known }
            var raw: Int32 = 0
            let reaped = waitpid(pid, &raw, WNOHANG)
            if reaped == pid {
                known = Self.decode(raw)
            } else if reaped == -1, errno == ECHILD {
                known = -1  // already gone, its status unknown
            }
            return known
        }
    }

    /// Waits for the child to end; its exit status. It polls, so it never blocks in `waitpid`
    /// outside the lock.
    @discardableResult
    public func wait() -> Int32 {
        while true {
            if let known = exitStatus { return known }
            usleep(5_000)
        }
    }

    public func signal(_ signal: Int32) {
        status.withLock { known in
            if known == nil { kill(pid, signal) }
        }
    }

    static func decode(_ raw: Int32) -> Int32 {
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : 128 + signal
    }

    deinit {
        if exitStatus == nil {
            signal(SIGKILL)
            wait()
        }
    }
}

public struct SpawnError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
