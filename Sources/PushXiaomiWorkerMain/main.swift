// PushXiaomiWorkerMain: the `pushhub-xiaomi-worker` executable: PushWorker's engine and command line for Xiaomi Mi Push.

import PushModel
import PushWorker

/// `pushhub-xiaomi-worker`.
enum Xiaomi: WorkerPlatform { static let platform = Platform.xiaomi }

await WorkerCommand<Xiaomi>.start()
