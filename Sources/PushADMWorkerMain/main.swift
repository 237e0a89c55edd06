// PushADMWorkerMain: the `pushhub-adm-worker` executable: PushWorker's engine and command line for Amazon Device Messaging.

import PushModel
import PushWorker

/// `pushhub-adm-worker`.
enum ADM: WorkerPlatform { static let platform = Platform.adm }

await WorkerCommand<ADM>.start()
