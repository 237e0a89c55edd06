// PushWNSWorkerMain: the `pushhub-wns-worker` executable: PushWorker's engine and command line for WNS.

import PushModel
import PushWorker

/// `pushhub-wns-worker`.
enum WNS: WorkerPlatform { static let platform = Platform.wns }

await WorkerCommand<WNS>.start()
