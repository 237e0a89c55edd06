// PushHMSWorkerMain: the `pushhub-hms-worker` executable: PushWorker's engine and command line for Huawei Push Kit.

import PushModel
import PushWorker

/// `pushhub-hms-worker`.
enum HMS: WorkerPlatform { static let platform = Platform.hms }

await WorkerCommand<HMS>.start()
