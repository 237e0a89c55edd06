import Foundation
import Logging
import PushEnvironment
import Synchronization
import Testing

/// The lines a test's handler wrote.
final class LogLines: Sendable {
    let all = Mutex<[String]>([])
}

struct LogTestFailure: Error, CustomStringConvertible {
    var description: String { "the broker went away" }
}

@Suite("Log lines")
struct LogLinesTests {
    /// A logger whose handler keeps its lines, at `info`, with `provided` from a provider.
    static func logger(_ label: String, _ format: LogFormat, into lines: LogLines, provided: Logger.Metadata? = nil) -> Logger {
        Logger(label: label) { label in
            var handler = LineLogHandler(label: label, logLevel: .info, format: format) { line in lines.all.withLock { $0.append(line) } }
            if let provided { handler.metadataProvider = Logger.MetadataProvider { provided } }
            return handler
        }
    }

    @Test("text: time, level, logger, the metadata in key order, source and message on one line; below the level nothing")
    func text() throws {
        let lines = LogLines()
        var logger = Self.logger("pushhub.test", .text, into: lines)
        logger[metadataKey: "pushhub.platform"] = "apns"
        logger[metadataKey: "hb.request.id"] = "r-7"
        logger.debug("not written")
        logger.warning("batch not finished", metadata: ["pushhub.notification_id": "n-1", "kafka.offset": "\(42)", "hb.request.id": "r-8"])
        logger[metadataKey: "pushhub.platform"] = nil
        logger.error("send failed", error: LogTestFailure())
        // A provider's metadata (a span's ids) over the logger's, a line's own over both; no
        // label, no space before the colon.
        var traced = Self.logger("", .text, into: lines, provided: ["trace_id": "t-1", "span_id": "s-1"])
        traced[metadataKey: "trace_id"] = "mine"
        traced[metadataKey: "a"] = "first"
        traced.info("traced", metadata: ["span_id": "s-2"])
        let written = lines.all.withLock { $0 }
        try #require(written.count == 3)
        let time = #"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}"#
        let expected = [
            #" warning pushhub\.test: hb\.request\.id=r-8 kafka\.offset=42 pushhub\.notification_id=n-1 pushhub\.platform=apns \[PushOpsTests\] batch not finished\n"#,
            #" error pushhub\.test: error\.message=the broker went away error\.type=PushOpsTests\.LogTestFailure hb\.request\.id=r-7 \[PushOpsTests\] send failed\n"#,
            #" info: a=first span_id=s-2 trace_id=t-1 \[PushOpsTests\] traced\n"#,
        ]
        for (line, pattern) in zip(written, expected) {
            #expect(line.wholeMatch(of: try Regex(time + pattern)) != nil, "\(line)")
        }
    }

    @Test("text: a value's or a message's line breaks and other control characters are escaped; the entry stays one line")
    func textEscapes() throws {
        let lines = LogLines()
        let logger = Self.logger("pushhub.test", .text, into: lines)
        // As a Web Push endpoint's answer could say, to forge an entry or drive a terminal.
        logger.info(
            "handed back\nforged",
            metadata: ["pushhub.pns_reason": "no\r\n2026-01-01 error pushhub: forged\u{1B}[2J\tend \\n\u{85}\u{9B}\u{2028}ü"])
        let written = lines.all.withLock { $0 }
        try #require(written.count == 1)
        #expect(written[0].filter { $0 == "\n" || $0 == "\r\n" }.count == 1 && written[0].hasSuffix("\n"), "\(written)")
        #expect(
            written[0].contains(#"pushhub.pns_reason=no\r\n2026-01-01 error pushhub: forged\u{1B}[2J\tend \\n\u{85}\u{9B}\u{2028}ü"#), "\(written)")
        #expect(written[0].hasSuffix(#"handed back\nforged"# + "\n"), "\(written)")
    }

    @Test("JSON: one object per line with time, level, logger, message and the metadata; below the level nothing")
    func json() throws {
        let lines = LogLines()
        var logger = Self.logger("pushhub.test", .json, into: lines, provided: ["trace_id": "t-1"])
        logger[metadataKey: "pushhub.platform"] = "apns"
        logger.debug("not written")
        logger.warning("batch not finished", metadata: ["pushhub.notification_id": "n-1", "kafka.offset": "\(42)"])
        logger.error("send failed", error: LogTestFailure())
        let written = lines.all.withLock { $0 }
        try #require(written.count == 2)
        let objects = try written.map { line in
            #expect(line.last == "\n" && !line.dropLast().contains("\n"))
            return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        }
        #expect(objects[0]["level"] == "warning")
        #expect(objects[0]["logger"] == "pushhub.test")
        #expect(objects[0]["message"] == "batch not finished")
        #expect(objects[0]["pushhub.notification_id"] == "n-1")
        #expect(objects[0]["kafka.offset"] == "42")
        #expect(objects[0]["pushhub.platform"] == "apns")
        #expect(objects[0]["trace_id"] == "t-1")
        #expect(objects[0]["time"].flatMap { ISO8601DateFormatter().date(from: $0) } != nil)
        #expect(objects[1]["error.message"] == "the broker went away" && objects[1]["error.type"] == "PushOpsTests.LogTestFailure")
    }

    /// A pipe whose writing end is non-blocking and full, as a supervisor that made stderr a
    /// non-blocking pipe and stopped reading leaves it.
    static func fullNonBlockingPipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw LogTestFailure() }
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        let chunk = [UInt8](repeating: 0x78, count: 4096)
        while chunk.withUnsafeBufferPointer({ Foundation.write(ends[1], $0.baseAddress!, $0.count) }) > 0 {}
        return (ends[0], ends[1])
    }

    @Test("a line for a full non-blocking descriptor waits a bounded time, then is dropped; it never spins", .timeLimit(.minutes(1)))
    func fullDescriptorDropsTheLine() throws {
        let (readEnd, writeEnd) = try Self.fullNonBlockingPipe()
        defer {
            close(readEnd)
            close(writeEnd)
        }
        // On a thread of its own, so that a write that spins fails the test instead of holding it.
        final class Outcome: Sendable { let value = Mutex<(written: Bool, elapsed: Duration, cpu: Double)?>(nil) }
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let started = ContinuousClock.now
            func threadCPU() -> Double {
                var now = timespec()
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
                return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
            }
            let cpuBefore = threadCPU()
            let line = Array("a line nobody reads\n".utf8)
            let written = line.withUnsafeBufferPointer { LineLogHandler.writeWhole($0, to: writeEnd) }
            let cpu = threadCPU() - cpuBefore
            outcome.value.withLock { $0 = (written, ContinuousClock.now - started, cpu) }
            done.signal()
        }
        guard done.wait(timeout: .now() + 10) == .success, let result = outcome.value.withLock({ $0 }) else {
            Issue.record("the write did not return within 10 s")
            return
        }
        #expect(!result.written)
        #expect(result.elapsed >= .milliseconds(900), "waited \(result.elapsed)")
        #expect(result.cpu < 0.5, "spent \(result.cpu) s of CPU waiting")
    }

    @Test("a line for a full non-blocking descriptor is written whole once a reader makes room", .timeLimit(.minutes(1)))
    func fullDescriptorWritesOnceRead() async throws {
        let (readEnd, writeEnd) = try Self.fullNonBlockingPipe()
        defer { close(readEnd) }
        let line = Array(String(repeating: "0123456789", count: 1_000).utf8) + [0x0A]
        // A thread of its own, not one of Swift's pool, which the write holds meanwhile; it
        // reads until the writing end is closed.
        let (received, receivedGo) = AsyncStream.makeStream(of: [UInt8].self)
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 0.2)
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBufferPointer { Foundation.read(readEnd, $0.baseAddress!, $0.count) }
                guard count > 0 else { break }
                bytes += buffer[0..<count]
            }
            receivedGo.yield(bytes)
            receivedGo.finish()
        }
        let written = line.withUnsafeBufferPointer { LineLogHandler.writeWhole($0, to: writeEnd, wait: 10_000) }
        close(writeEnd)
        #expect(written)
        var all: [UInt8] = []
        for await bytes in received { all = bytes }
        // What filled the pipe, then the line whole.
        #expect(Array(all.suffix(line.count)) == line)
    }
}
