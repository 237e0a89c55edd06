// PushFCMWorkerMain: the `pushhub-fcm-worker` executable: PushWorker's engine and command line for FCM.

import PushModel
import PushWorker

/// `pushhub-fcm-worker`.
enum FCM: WorkerPlatform { static let platform = Platform.fcm }

await WorkerCommand<FCM>.start()
