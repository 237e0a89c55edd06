# Shared by the benchmark scripts (sourced).

# wait_for PREFIX FILE: waits up to 60 s for a line of FILE starting with PREFIX; on time-out
# shows FILE and FILE.err and exits.
wait_for() {
  for _ in $(seq 600); do grep -q "^$1" "$2" 2>/dev/null && return 0; sleep 0.1; done
  echo "no $1 in $2" >&2
  cat "$2" "$2.err" >&2 || true
  exit 1
}
