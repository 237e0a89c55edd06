#!/usr/bin/env bash
# Runs a command beside a throwaway PostgreSQL server on loopback (its own data directory and
# port, fsync off), with PUSHHUB_TEST_POSTGRES_URL naming its database; stops and removes the
# server afterwards, whatever the command's outcome. PUSHHUB_POSTGRES_OPTIONS adds server
# settings (`-c name=value …`), as the benchmarks do.
set -euo pipefail

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "with-postgres: PostgreSQL is not installed (scripts/install-deps.sh test installs it)" >&2
  exit 1
fi

dir=$(mktemp -d /tmp/pushhub-postgres.XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_postgres=()
if [ "$(id -u)" -eq 0 ]; then
  # initdb refuses to run as root; Debian's package created the postgres user.
  chown postgres "$dir"
  as_postgres=(runuser -u postgres --)
fi

stop() {
  "${as_postgres[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT

"${as_postgres[@]}" "$bindir/initdb" -D "$dir/data" -U pushhub --auth=trust -E UTF8 >"$dir/initdb.log"
"${as_postgres[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 ${PUSHHUB_POSTGRES_OPTIONS:-}" start >/dev/null
"${as_postgres[@]}" "$bindir/createdb" -h 127.0.0.1 -p "$port" -U pushhub pushhub_test

export PUSHHUB_TEST_POSTGRES_URL="postgres://pushhub@127.0.0.1:$port/pushhub_test"
echo "with-postgres: PostgreSQL on 127.0.0.1:$port for this run"
"$@"
