// PushAPNsWorkerMain: the `pushhub-apns-worker` executable: PushWorker's engine and command line for APNs.

import PushModel
import PushWorker

/// `pushhub-apns-worker`.
enum APNs: WorkerPlatform { static let platform = Platform.apns }

await WorkerCommand<APNs>.start()
