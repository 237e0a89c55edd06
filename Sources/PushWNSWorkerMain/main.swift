import PushModel
import PushWorker

/// `pushhub-wns-worker`.
enum WNS: WorkerPlatform { static let platform = Platform.wns }

await WorkerCommand<WNS>.start()
