import Logging
import ServiceLifecycle

extension KafkaConsumer {
    /// Runs `body` on each record until graceful shutdown, and marks a record done only after
    /// `body` returned. A `body` that throws is retried with exponential backoff (0.1 s to 10 s)
    /// until it passes or the task is cancelled; then the record is left for the partition's
    /// next owner, never skipped.
    public func processEach(logger: Logger, _ body: (KafkaRecord) async throws -> Void) async {
        for await record in records.cancelOnGracefulShutdown() {
            var delay = Duration.milliseconds(100)
            while !Task.isCancelled {
                do {
                    try await body(record)
                    markDone(record)
                    break
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
}
