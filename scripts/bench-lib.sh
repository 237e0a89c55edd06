# Shared by the benchmark scripts (sourced).

# wait_for PREFIX FILE: waits up to 60 s for a line of FILE starting with PREFIX; on time-out
# shows FILE and FILE.err and exits.
wait_for() {
  for _ in $(seq 600); do grep -q "^$1" "$2" 2>/dev/null && return 0; sleep 0.1; done
  echo "no $1 in $2" >&2
  cat "$2" "$2.err" >&2 || true
  exit 1
}

# stop NAME PID: SIGTERM, then 30 s to exit before SIGKILL; says when it did not stop by
# itself. Callers stop their processes in the reverse order of their start (Kafka last): a
# worker whose Kafka went first waited for ever in librdkafka's consumer close.
stop() {
  kill "$2" 2>/dev/null || return 0
  for _ in $(seq 300); do kill -0 "$2" 2>/dev/null || return 0; sleep 0.1; done
  echo "$1 did not stop within 30 s of SIGTERM; killed" >&2
  kill -9 "$2" 2>/dev/null || true
}

# cpu_ticks PID: the user plus system CPU the process has used, in clock ticks (/proc/PID/stat).
cpu_ticks() {
  awk '{print $14 + $15}' "/proc/$1/stat"
}

# ticks_per_second: the clock ticks of cpu_ticks per second.
ticks_per_second() {
  getconf CLK_TCK
}

# run_measured FILE COMMAND...: runs COMMAND and writes the CPU seconds it and its children
# used (user plus system, from wait4) to FILE.
run_measured() {
  local out=$1
  shift
  python3 - "$out" "$@" <<'PY'
import os, subprocess, sys
out, command = sys.argv[1], sys.argv[2:]
process = subprocess.Popen(command)
_, status, usage = os.wait4(process.pid, 0)
with open(out, "w") as f:
    f.write(f"{usage.ru_utime + usage.ru_stime:.3f}\n")
sys.exit(os.waitstatus_to_exitcode(status))
PY
}
