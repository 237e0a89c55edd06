#!/usr/bin/env bash
# Runs the Swift test suite (the command given, e.g. `swift test --skip-build`) and keeps its
# output in a log. When a test fails, the failing tests and their issues are printed again at
# the end, where a CI log's tail shows them: among two thousand lines of concurrent tests, the
# one that failed is otherwise out of sight.
set -uo pipefail
log=$(mktemp /tmp/pushhub-swift-test.XXXXXX)
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo
  echo "swift-test: the suite failed (exit $status); what failed, from its output:"
  # Swift Testing marks a failed test and each issue it recorded with ✘; XCTest says "error:".
  grep -n -A 6 -E '✘|error: |Fatal error|Crash' "$log" | cut -c1-400 | head -n 150
  echo "swift-test: the whole output is in $log"
else
  rm -f "$log"
fi
exit "$status"
