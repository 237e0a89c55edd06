import Logging
import ServiceLifecycle

extension KafkaConsumer {
    /// Runs `body` on each record until graceful shutdown, at most `maximum` records at a time,
    /// and marks a record done only after `body` returned for it (offsets are committed only
    /// past records that are all done, so completion out of order is safe). A `body` that
    /// throws is retried with exponential backoff (0.1 s to 10 s) until it passes or the task
    /// is cancelled; then the record is left for the partition's next owner, never skipped.
    /// At graceful shutdown no new record is started and those started are finished.
    public func processEach(maximum: Int = 1, logger: Logger, _ body: @escaping @Sendable (KafkaRecord) async throws -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for await record in records.cancelOnGracefulShutdown() {
                if running >= maximum {
                    await group.next()
                    running -= 1
                }
                group.addTask { await self.process(record, logger: logger, body) }
                running += 1
            }
        }
    }

    private func process(_ record: KafkaRecord, logger: Logger, _ body: @Sendable (KafkaRecord) async throws -> Void) async {
        var delay = Duration.milliseconds(100)
        while !Task.isCancelled {
            do {
                try await body(record)
                markDone(record)
                return
            } catch {
                logger.error(
                    "record not processed, will retry",
                    metadata: [
                        "kafka.topic": "\(record.topic)", "kafka.offset": "\(record.offset)", "pushhub.notification_id": "\(record.keyString ?? "")",
                        "pushhub.error": "\(error)", "pushhub.retry_in": "\(delay)",
                    ])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(10))
            }
        }
    }
}
