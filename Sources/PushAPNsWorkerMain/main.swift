import PushModel
import PushWorker

/// `pushhub-apns-worker`.
enum APNs: WorkerPlatform { static let platform = Platform.apns }

await WorkerCommand<APNs>.start()
