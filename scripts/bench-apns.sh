#!/usr/bin/env bash
# The APNs worker against pushhub sim, beside h2load against the same endpoint (see bench-pns.sh).
exec "$(dirname "$0")/bench-pns.sh" apns
