#!/usr/bin/env bash
# Installs what PushHub needs and the machine lacks; installs nothing that is already there.
#
#   scripts/install-deps.sh build   librdkafka-dev and libsqlite3-dev (with pkg-config) to build
#   scripts/install-deps.sh test    + PostgreSQL, docker-compose (to check docker-compose.yml), Chromium (the load report's page) and the Python JSON Schema validator the tests use
#   scripts/install-deps.sh bench   + kcat (beside our Kafka client), wrk (HTTP load) and h2load (HTTP/2 load)
set -euo pipefail

purpose=${1:-build}
apt_packages=()

have_deb() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

command -v pkg-config >/dev/null 2>&1 || apt_packages+=(pkg-config)
if ! pkg-config --exists rdkafka 2>/dev/null; then apt_packages+=(librdkafka-dev); fi
command -v pkg-config >/dev/null 2>&1 && pkg-config --exists sqlite3 2>/dev/null || have_deb libsqlite3-dev || apt_packages+=(libsqlite3-dev)
case "$purpose" in
  test)
    # The store's conformance suite runs against a throwaway PostgreSQL server too.
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || apt_packages+=(postgresql)
    # docker-compose.yml is checked by Compose (the plugin when present, else Debian's docker-compose).
    docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1 || apt_packages+=(docker-compose)
    # deploy/kubernetes is rendered with kubectl's kustomize.
    command -v kubectl >/dev/null 2>&1 || apt_packages+=(kubernetes-client)
    # docs/producing.md's examples are run as written: kcat, and Python's confluent-kafka.
    have_deb kcat || apt_packages+=(kcat)
    # The load report's page and the web console are checked in a real browser: Debian's
    # headless Chromium, driven through chromedriver.
    command -v chromium >/dev/null 2>&1 || apt_packages+=(chromium)
    have_deb chromium-driver || apt_packages+=(chromium-driver)
    # The alert rules are checked and unit-tested with promtool (Debian's prometheus).
    command -v promtool >/dev/null 2>&1 || apt_packages+=(prometheus)
    ;;
  bench)
    have_deb kcat || apt_packages+=(kcat)
    have_deb wrk || apt_packages+=(wrk)
    have_deb nghttp2-client || apt_packages+=(nghttp2-client)
    have_deb linux-perf || apt_packages+=(linux-perf)
    ;;
esac

if ((${#apt_packages[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "Installing ${apt_packages[*]} from Debian's packages"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

if [ "$purpose" = test ] && ! command -v schemathesis >/dev/null 2>&1; then
  # make test runs Schemathesis against pushhub dev from docs/openapi.yaml.
  echo "Installing schemathesis from PyPI"
  python3 -m pip install --quiet "schemathesis==4.32.5"
fi

if [ "$purpose" = test ] || [ "$purpose" = bench ]; then
  # The wire-schema tests validate documents with Python's jsonschema (date-time needs rfc3339-validator).
  if ! python3 -c 'import jsonschema, referencing, rfc3339_validator, kubernetes_validate, yaml, confluent_kafka' 2>/dev/null; then
    echo "Installing jsonschema, rfc3339-validator, kubernetes-validate and confluent-kafka from PyPI"
    python3 -m pip install --quiet jsonschema rfc3339-validator kubernetes-validate pyyaml confluent-kafka
  fi
fi
