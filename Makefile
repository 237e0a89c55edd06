# PushHub. `make dev` runs it on this machine; `make test` runs every test.
SWIFT ?= swift
# CI and scripts can point the build somewhere else, e.g. SCRATCH=.build-ci.
SCRATCH ?= .build
SWIFTFLAGS := --scratch-path $(SCRATCH)

.PHONY: all build release dev test format fuzz bench-kafka bench-ingress bench-store bench-store-postgres bench-import bench-import-postgres bench-dispatch bench-apns bench-pns bench-load console-screenshots clean

all: build

build:
	scripts/install-deps.sh build
	$(SWIFT) build $(SWIFTFLAGS)

release:
	scripts/install-deps.sh build
	$(SWIFT) build $(SWIFTFLAGS) -c release --product pushhub

# `make dev`: the whole stack in one process on the embedded defaults (pushhub dev).
dev: build
	$(SCRATCH)/debug/pushhub dev

# Tests at once at most. Unbounded, every suite started in the first minute on two cores, and
# the timing-sensitive ones failed in turn; eight take the same 2.5 minutes without that.
TEST_WIDTH ?= 8

test:
	scripts/install-deps.sh test
	$(SWIFT) format lint --strict --recursive Sources Tests Package.swift
	SWIFT=$(SWIFT) python3 scripts/check-dependencies.py
	python3 scripts/check-observability.py
	$(SWIFT) build $(SWIFTFLAGS) --build-tests
	SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH) PUSHHUB_REQUIRE_POSTGRES=1 scripts/with-postgres.sh scripts/swift-test.sh $(SWIFT) test $(SWIFTFLAGS) --skip-build
	FUZZ_SECONDS=$(CI_FUZZ_SECONDS) FUZZ_SEED=1 scripts/fuzz.sh
	python3 scripts/schemathesis-dev.py --pushhub $(SCRATCH)/debug/pushhub --examples 10 --max-time 60

# The console's screenshots under docs/console/, taken by its browser test (make test takes
# them too, in a temporary directory).
console-screenshots:
	scripts/install-deps.sh test
	$(SWIFT) build $(SWIFTFLAGS) --build-tests
	PUSHHUB_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(SWIFT) test $(SWIFTFLAGS) --skip-build --filter ConsoleBrowserTests

# Formats the code as .swift-format says (make test checks it).
format:
	$(SWIFT) format --in-place --recursive Sources Tests Package.swift

# Every libFuzzer target for FUZZ_SECONDS each (make test runs them for CI_FUZZ_SECONDS).
FUZZ_SECONDS ?= 60
CI_FUZZ_SECONDS ?= 30
# Then the HTTP/2 client's fuzzed answers (HTTP2AnswerFuzzTests), about as long: a hundred
# cases a second in the debug build, from a case picked at random (make test runs 1 to 1,000),
# which the report names.
fuzz:
	scripts/install-deps.sh build
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh
	$(SWIFT) build $(SWIFTFLAGS) --build-tests
	PUSHHUB_FUZZ_CASES=$$(( $(FUZZ_SECONDS) * 100 )) PUSHHUB_FUZZ_FIRST_CASE=$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ') PUSHHUB_FUZZ_REPORT=1 $(SWIFT) test $(SWIFTFLAGS) --skip-build --filter HTTP2AnswerFuzzTests

# Our producer and consumer beside kcat on the embedded cluster; figures go to docs/benchmarks.md.
bench-kafka: release
	scripts/install-deps.sh bench
	$(SCRATCH)/release/pushhub bench kafka --markdown-file docs/benchmarks.md

# Installation upserts through HTTP on SQLite, driven by wrk.
bench-ingress:
	scripts/install-deps.sh bench
	$(SWIFT) build $(SWIFTFLAGS) -c release --product pushhub
	$(SWIFT) build $(SWIFTFLAGS) -c release --product pushhub-ingress
	SCRATCH=$(SCRATCH) scripts/bench-ingress.sh

# Tag-expression paging over a million registrations.
bench-store: release
	$(SCRATCH)/release/pushhub bench store --installations 1000000 --markdown-file docs/benchmarks.md

# The same on PostgreSQL at ten million registrations (BENCH_STORE_REGISTRATIONS), on a
# throwaway server (scripts/with-postgres.sh) with 1 GiB of shared buffers.
BENCH_STORE_REGISTRATIONS ?= 10000000
bench-store-postgres: release
	scripts/install-deps.sh test
	PUSHHUB_POSTGRES_OPTIONS="-c shared_buffers=1GB -c max_wal_size=8GB -c checkpoint_timeout=30min" scripts/with-postgres.sh sh -c \
	  '$(SCRATCH)/release/pushhub bench store --registrations $(BENCH_STORE_REGISTRATIONS) --database "$$PUSHHUB_TEST_POSTGRES_URL" --section store-postgres-benchmark --markdown-file docs/benchmarks.md'

# Import and export jobs of 500,000 registrations through the ingress's job runner, into
# SQLite and into a throwaway PostgreSQL server: rate and CPU per registration.
BENCH_IMPORT_REGISTRATIONS ?= 500000
bench-import: release
	$(SCRATCH)/release/pushhub bench import --registrations $(BENCH_IMPORT_REGISTRATIONS) --markdown-file docs/benchmarks.md

bench-import-postgres: release
	scripts/install-deps.sh test
	scripts/with-postgres.sh sh -c \
	  '$(SCRATCH)/release/pushhub bench import --registrations $(BENCH_IMPORT_REGISTRATIONS) --database "$$PUSHHUB_TEST_POSTGRES_URL" --section import-postgres-benchmark --markdown-file docs/benchmarks.md'

# A broadcast to a million registrations through the dispatcher: time and memory.
bench-dispatch: release
	$(SCRATCH)/release/pushhub bench dispatch --markdown-file docs/benchmarks.md

# The APNs worker against pushhub sim, beside h2load at the same endpoint.
bench-apns:
	scripts/install-deps.sh bench
	$(SWIFT) build $(SWIFTFLAGS) -c release --product pushhub
	$(SWIFT) build $(SWIFTFLAGS) -c release --product pushhub-apns-worker
	SCRATCH=$(SCRATCH) scripts/bench-apns.sh

# The FCM, WNS, Web Push, Huawei, ADM, Xiaomi and Baidu workers against pushhub sim, each
# beside h2load at the same endpoint (BENCH_PNS_PLATFORMS picks some).
BENCH_PNS_PLATFORMS ?= fcm wns webpush hms adm xiaomi baidu
bench-pns:
	scripts/install-deps.sh bench
	$(SWIFT) build $(SWIFTFLAGS) -c release --product pushhub
	for platform in $(BENCH_PNS_PLATFORMS); do $(SWIFT) build $(SWIFTFLAGS) -c release --product pushhub-$$platform-worker || exit 1; done
	for platform in $(BENCH_PNS_PLATFORMS); do SCRATCH=$(SCRATCH) scripts/bench-pns.sh $$platform || exit 1; done

# The whole pipeline under pushhub load: a million-device broadcast, 2,000 sends/s to users,
# one APNs worker against two, a profile and every process's peak RSS.
bench-load:
	scripts/install-deps.sh bench
	$(SWIFT) build $(SWIFTFLAGS) -c release
	SCRATCH=$(SCRATCH) scripts/bench-load.sh

clean:
	rm -rf $(SCRATCH)
