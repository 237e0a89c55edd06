// PushTestSupport: helpers shared by the test targets: children started with `posix_spawn`
// (`SpawnedProcess`, `ProcessLaunch`), a store that fails on demand (`InterceptedStore`) and a
// seeded generator for inputs made at random (`SeededGenerator`), and `eventually`, which waits
// for a condition with a bound.
