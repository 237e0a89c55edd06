// PushWebPushWorkerMain: the `pushhub-webpush-worker` executable: PushWorker's engine and command line for Web Push.

import PushModel
import PushWorker

/// `pushhub-webpush-worker`.
enum WebPush: WorkerPlatform { static let platform = Platform.webpush }

await WorkerCommand<WebPush>.start()
