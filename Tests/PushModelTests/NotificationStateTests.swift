import PushModel
import Testing

@Suite("Notification states")
struct NotificationStateTests {
    typealias Tally = NotificationState.Tally

    @Test(
        "what the tallies make of an open notification",
        arguments: [
            (Tally(expected: nil), NotificationState.enqueued),
            (Tally(expected: nil, received: 1), .processing),
            (Tally(expected: 3, received: 1), .processing),
            (Tally(expected: 0), .noTargetFound),
            (Tally(expected: 3, received: 3), .completed),
            (Tally(expected: 3, received: 3, expired: 1), .completed),
            (Tally(expected: 3, received: 3, expired: 3), .abandoned),
            (Tally(expected: 3, received: 4), .completed),
            (Tally(expected: nil, received: 1, rejected: 1), .abandoned),
            (Tally(expected: 5, received: 1, rejected: 1), .abandoned),
        ])
    func fromEnqueued(_ tally: Tally, _ expected: NotificationState) {
        #expect(NotificationState.enqueued.settled(by: tally) == expected)
        #expect(NotificationState.processing.settled(by: tally) == (expected == .enqueued ? .processing : expected), "never back to Enqueued")
    }

    @Test("ended states stay as they are, whatever arrives", arguments: [NotificationState.completed, .noTargetFound, .abandoned, .cancelled])
    func endedStay(_ state: NotificationState) {
        #expect(state.hasEnded)
        for tally in [Tally(expected: nil), Tally(expected: 2, received: 1), Tally(expected: 1, received: 1), Tally(expected: nil, rejected: 1)] {
            #expect(state.settled(by: tally) == state)
        }
        #expect(!NotificationState.enqueued.hasEnded && !NotificationState.processing.hasEnded)
    }
}
