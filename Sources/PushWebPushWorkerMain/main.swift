import PushModel
import PushWorker

/// `pushhub-webpush-worker`.
enum WebPush: WorkerPlatform { static let platform = Platform.webpush }

await WorkerCommand<WebPush>.start()
