// PushLoad: the load generator (`pushhub load`) and the benchmarks.
