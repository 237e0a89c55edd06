import Foundation
import Logging
import PushEnvironment
import Synchronization
import Testing

final class Lines: Sendable {
    let all = Mutex<[Data]>([])
}

@Suite("JSON logs")
struct JSONLogTests {
    @Test("one object per line with time, level, logger, message and the metadata; below the level nothing")
    func lines() throws {
        let lines = Lines()
        var logger = Logger(label: "pushhub.test") { label in
            JSONLogHandler(label: label, logLevel: .info) { data in lines.all.withLock { $0.append(data) } }
        }
        logger[metadataKey: "pushhub.platform"] = "apns"
        logger.debug("not written")
        logger.warning("batch not finished", metadata: ["pushhub.notification_id": "n-1", "kafka.offset": "\(42)"])
        let written = lines.all.withLock { $0 }
        #expect(written.count == 1)
        let line = try #require(written.first)
        #expect(line.last == UInt8(ascii: "\n") && !line.dropLast().contains(UInt8(ascii: "\n")))
        let object = try #require(try JSONSerialization.jsonObject(with: line) as? [String: String])
        #expect(object["level"] == "warning")
        #expect(object["logger"] == "pushhub.test")
        #expect(object["message"] == "batch not finished")
        #expect(object["pushhub.notification_id"] == "n-1")
        #expect(object["kafka.offset"] == "42")
        #expect(object["pushhub.platform"] == "apns")
        #expect(object["time"].flatMap { ISO8601DateFormatter().date(from: $0) } != nil)
    }
}
