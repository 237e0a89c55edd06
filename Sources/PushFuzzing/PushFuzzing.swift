// PushFuzzing: the fuzz targets' harness: each parser that takes input from outside as one
// target, for `pushhub-fuzz` (docs/security.md).
