import Foundation
import Logging
import PushEnvironment
import Synchronization
import Testing

final class TextLines: Sendable {
    let all = Mutex<[String]>([])
}

struct LogTestFailure: Error, CustomStringConvertible {
    var description: String { "the broker went away" }
}

@Suite("Text logs")
struct TextLogTests {
    @Test("time, level, logger, the metadata in key order, source and message on one line; below the level nothing")
    func lines() throws {
        let lines = TextLines()
        var logger = Logger(label: "pushhub.test") { label in
            TextLogHandler(label: label, logLevel: .info) { line in lines.all.withLock { $0.append(line) } }
        }
        logger[metadataKey: "pushhub.platform"] = "apns"
        logger[metadataKey: "hb.request.id"] = "r-7"
        logger.debug("not written")
        logger.warning("batch not finished", metadata: ["pushhub.notification_id": "n-1", "kafka.offset": "\(42)", "hb.request.id": "r-8"])
        logger[metadataKey: "pushhub.platform"] = nil
        logger.error("send failed", error: LogTestFailure())
        let time = #"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}"#
        // A provider's metadata (a span's trace id) over the logger's, a line's own over both;
        // no label, no space before the colon.
        var traced = Logger(label: "") { label in
            var handler = TextLogHandler(label: label, logLevel: .info) { line in lines.all.withLock { $0.append(line) } }
            handler.metadataProvider = Logger.MetadataProvider { ["trace_id": "t-1", "span_id": "s-1"] }
            return handler
        }
        traced[metadataKey: "trace_id"] = "mine"
        traced[metadataKey: "a"] = "first"
        traced.info("traced", metadata: ["span_id": "s-2"])
        let written = lines.all.withLock { $0 }
        try #require(written.count == 3)
        #expect(
            written[2].wholeMatch(of: try Regex(time + #" info: a=first span_id=s-2 trace_id=t-1 \[PushOpsTests\] traced\n"#)) != nil, "\(written[2])"
        )
        #expect(
            written[0].wholeMatch(
                of: try Regex(
                    time
                        + #" warning pushhub\.test: hb\.request\.id=r-8 kafka\.offset=42 pushhub\.notification_id=n-1 pushhub\.platform=apns \[PushOpsTests\] batch not finished\n"#
                )) != nil, "\(written[0])")
        #expect(
            written[1].wholeMatch(
                of: try Regex(
                    time
                        + #" error pushhub\.test: error\.message=the broker went away error\.type=PushOpsTests\.LogTestFailure hb\.request\.id=r-7 \[PushOpsTests\] send failed\n"#
                )) != nil, "\(written[1])")
    }
}
