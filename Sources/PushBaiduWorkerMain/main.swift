// PushBaiduWorkerMain: the `pushhub-baidu-worker` executable: PushWorker's engine and command line for Baidu Cloud Push.

import PushModel
import PushWorker

/// `pushhub-baidu-worker`.
enum Baidu: WorkerPlatform { static let platform = Platform.baidu }

await WorkerCommand<Baidu>.start()
