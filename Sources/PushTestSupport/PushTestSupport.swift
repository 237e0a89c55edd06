// PushTestSupport: helpers shared by the test targets: children started with `posix_spawn`
// (`SpawnedProcess`, `ProcessLaunch`) and a store that fails on demand (`InterceptedStore`).
