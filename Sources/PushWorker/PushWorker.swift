// PushWorker: the worker engine the four worker executables share: `DeliveryWorker`, providers
// from `pushhub.yaml` (`ProviderFactory`) and the workers' command line (`WorkerCommand`).
