// PushOps: `/health/live`, `/health/ready` and `/metrics` for every process, and how every process
// runs its services (`ProcessLifecycle`).
