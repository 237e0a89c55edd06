import Foundation
import PushModel
import PushStore

/// A job's two output files, opened cut back to the lengths its last position gives, and
/// appended to with each chunk. One runner uses them at a time.
final class JobOutput: @unchecked Sendable {
    private let output: FileHandle
    private let failed: FileHandle
    private(set) var outputBytes: Int64
    private(set) var failedBytes: Int64

    init(output: URL, failed: URL, position: JobPosition) throws {
        try FileManager.default.createDirectory(at: output.deletingLastPathComponent(), withIntermediateDirectories: true)
        self.output = try Self.open(output, length: position.outputBytes)
        self.failed = try Self.open(failed, length: position.failedBytes)
        outputBytes = position.outputBytes
        failedBytes = position.failedBytes
    }

    deinit {
        try? output.close()
        try? failed.close()
    }

    private static func open(_ url: URL, length: Int64) throws -> FileHandle {
        if !FileManager.default.fileExists(atPath: url.path) { FileManager.default.createFile(atPath: url.path, contents: nil) }
        let handle = try FileHandle(forWritingTo: url)
        // What a chunk wrote before the process died, uncommitted, goes.
        try handle.truncate(atOffset: UInt64(length))
        try handle.seekToEnd()
        return handle
    }

    /// Cuts both files back to a committed position's lengths: what a chunk wrote before its
    /// transaction failed goes.
    func reset(to position: JobPosition) throws {
        if outputBytes != position.outputBytes {
            try output.truncate(atOffset: UInt64(position.outputBytes))
            try output.seekToEnd()
            outputBytes = position.outputBytes
        }
        if failedBytes != position.failedBytes {
            try failed.truncate(atOffset: UInt64(position.failedBytes))
            try failed.seekToEnd()
            failedBytes = position.failedBytes
        }
    }

    /// Appends to both files and flushes them to disk before the position that names their
    /// new lengths is committed.
    func append(output text: String, failed failures: String) throws -> (outputBytes: Int64, failedBytes: Int64) {
        if !text.isEmpty {
            let data = Data(text.utf8)
            try output.write(contentsOf: data)
            try output.synchronize()
            outputBytes += Int64(data.count)
        }
        if !failures.isEmpty {
            let data = Data(failures.utf8)
            try failed.write(contentsOf: data)
            try failed.synchronize()
            failedBytes += Int64(data.count)
        }
        return (outputBytes, failedBytes)
    }
}

/// Reads an input file line by line from an offset, in blocks; a line longer than `maximum`
/// is read past and handed back as too long, never held whole.
struct JobLineReader {
    enum Line {
        case text(Data)
        case tooLong
    }

    private let handle: FileHandle
    private let maximum: Int
    /// Read bytes; those before `start` are consumed.
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false
    static let blockSize = 1 << 20

    init(path: String, offset: Int64, maximum: Int) throws {
        handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64(offset))
        self.maximum = maximum
    }

    func close() { try? handle.close() }

    /// The next line (without its newline) and the bytes it took, newline included; nil at the end.
    mutating func next() throws -> (line: Line, consumed: Int64)? {
        var skipped: Int64 = 0
        var searched = start
        while true {
            if let newline = buffer[searched...].firstIndex(of: UInt8(ascii: "\n")) {
                let length = newline - start
                let consumed = Int64(length + 1) + skipped
                defer { start = newline + 1 }
                if skipped > 0 || length > maximum { return (.tooLong, consumed) }
                var end = newline
                if end > start, buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                return (.text(Data(buffer[start..<end])), consumed)
            }
            if buffer.count - start > maximum {
                // Too long already: drop what there is and look for the line's end.
                skipped += Int64(buffer.count - start)
                buffer.removeAll(keepingCapacity: true)
                start = 0
            }
            if atEnd {
                guard buffer.count > start || skipped > 0 else { return nil }
                let consumed = Int64(buffer.count - start) + skipped
                let line: Line = skipped > 0 ? .tooLong : .text(Data(buffer[start...]))
                buffer.removeAll()
                start = 0
                return (line, consumed)
            }
            // Keep the unread part only, then read a block after it.
            if start > 0 {
                buffer.removeSubrange(0..<start)
                start = 0
            }
            searched = buffer.count
            let block = try handle.read(upToCount: Self.blockSize) ?? Data()
            if block.isEmpty { atEnd = true } else { buffer.append(contentsOf: block) }
        }
    }
}
