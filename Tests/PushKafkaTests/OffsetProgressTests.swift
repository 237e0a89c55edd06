import Testing

@testable import PushKafka

@Suite("Offset progress of one partition")
struct OffsetProgressTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var handedOut: [Int64]
        var done: [Int64]
        /// The offset stored after each `done`, nil when the position does not move.
        var stored: [Int64?]
        var testDescription: String { "out \(handedOut), done \(done)" }
    }

    @Test(arguments: [
        Case(handedOut: [0, 1, 2], done: [0, 1, 2], stored: [1, 2, 3]),
        Case(handedOut: [0, 1, 2], done: [2, 1, 0], stored: [nil, nil, 3]),
        Case(handedOut: [0, 1, 2, 3], done: [1, 0, 3, 2], stored: [nil, 2, nil, 4]),
        // Gaps in offsets (compaction, transaction markers) are fine.
        Case(handedOut: [5, 9, 12], done: [9, 5, 12], stored: [nil, 12, 13]),
        // A record done twice, or never handed out, changes nothing.
        Case(handedOut: [0, 1], done: [0, 0, 7, 1], stored: [1, nil, nil, 2]),
    ])
    func storedOffsets(_ example: Case) {
        var progress = OffsetProgress()
        for offset in example.handedOut { progress.handedOut(offset) }
        let stored = example.done.map { progress.markDone($0) }
        #expect(stored == example.stored)
    }

    @Test("a long run in order keeps little state and keeps counting right")
    func longRun() {
        var progress = OffsetProgress()
        for offset in Int64(0)..<10_000 {
            progress.handedOut(offset)
            #expect(progress.markDone(offset) == offset + 1)
        }
        #expect(progress.pendingCount == 0)
        progress.handedOut(10_000)
        progress.handedOut(10_001)
        #expect(progress.markDone(10_001) == nil)
        #expect(progress.pendingCount == 2)
        #expect(progress.markDone(10_000) == 10_002)
    }
}
