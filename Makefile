# Entry points. Everything real lives in CMake; this file wires the
# configurations together and installs what a fresh Debian machine lacks.
#
#   make demo     deps, release build, then a fleet trace on loopback: two
#                 hosts (service, probes, app, relay each) recorded through
#                 mutual TLS into demo.pftrace (deploy/demo/demo.sh)
#   make collector-demo  the same hosts under tracegate-collector: an app's
#                 trigger snapshots both into the store, listed, the web
#                 page's URL printed and kept up until Enter from a
#                 terminal (deploy/demo/collector-demo.sh)
#   make test     deps, ASan+UBSan build, every test (ctest), TSan run of the
#                 threaded tests, a Release build (what packagers make),
#                 a build without OpenSSL (mbedtls alone) through the TLS
#                 and relay end-to-end tests, libFuzzer smoke run of every
#                 fuzz target (its corpus, then FUZZ_SMOKE_RUNS new inputs,
#                 default 50000, or FUZZ_SMOKE_SECONDS, default 5, for the
#                 slowest); warnings are errors in these builds only
#                 (TG_WERROR)
#   make test-long  the real-time scenarios make test leaves out (label
#                 "long": partitions of 2 and 10 minutes through a real
#                 relay), on the ASan build; about 15 minutes
#   make fuzz     run each fuzz target for FUZZ_SECONDS (default 60)
#                 (make fuzz-build: the libFuzzer build alone)
#   make fuzz-merge-tp  packets built from Perfetto's schema, merged beside
#                 a good host, imported into Perfetto's trace processor,
#                 for FUZZ_MERGE_TP_SECONDS (default 600); a new finding is
#                 cut down, saved to build/fuzz-merge-tp and fails the run
#                 (tests/fuzz/merge_tp.py, docs/merge.md); without
#                 Perfetto's binaries (PERFETTO_BIN) it says so and exits 0
#   make build    a plain optimised build in build/release
#   make bench    build and run the benchmarks (release build)
#   make conformance  Perfetto's own tools against tracegate: its integration
#                 tests against tracegated, its Linux example configs
#                 recorded by both, a clone and a collector snapshot; needs
#                 Perfetto's binaries (PERFETTO_BIN, default
#                 ../shared/perfetto/bin; without them it says why and
#                 exits 0) and root; at most 20 minutes; a few rows with
#                 CONFORMANCE_ARGS="--only REGEX" (tests/conformance/,
#                 docs/conformance.md)
#   make install  the release build, installed under PREFIX (default
#                 /usr/local), into DESTDIR when given (staging, packaging)
#   make deb      Debian packages (debian/, dpkg-buildpackage) into
#                 build/deb, built from a copy of the tree, then lintian
#                 on them (fails on any warning); the packages' tests are
#                 make test's (DEB_BUILD_OPTIONS=nocheck unless given).
#                 Installs only packaging's needs: debhelper, lintian and
#                 debian/control's Build-Depends (deploy/deps.sh deb)
#   make deb-test make deb, then install the packages on this machine,
#                 run the installed daemons as their units say (kernel
#                 tracing by the probes, two instances of the template
#                 units), purge them all and check nothing is left
#                 (tests/deb; root; restores the machine)

JOBS ?= $(shell nproc)
# Tests run at twice the cores: most of an end-to-end test's time is spent
# waiting on its daemons and their timers, not on a core, and tests assert
# what holds at any speed. 406 s at 2 on this machine kind, 273 s at 4
# while other builds ran beside it (docs/operations.md, "CI's time").
TEST_JOBS ?= $(shell echo $$(( $(JOBS) * 2 )))
# Each stage of make test says how long it took ("make: STAGE took N s"),
# so that CI's log shows where its time goes (docs/operations.md).
STAGE_DIR := build/.stages
stage_begin = @mkdir -p $(STAGE_DIR) && date +%s > $(STAGE_DIR)/$(1)
stage_end = @echo "make: $(1) took $$(( $$(date +%s) - $$(cat $(STAGE_DIR)/$(1)) )) s"
FUZZ_SECONDS ?= 60
# The smoke's work per target after its corpus (which takes milliseconds):
# FUZZ_SMOKE_RUNS inputs in all, or FUZZ_SMOKE_SECONDS for the targets too
# slow to reach that count (14 of 60 here). A check that each target runs
# and holds its ground, in make test's time, the same work on any machine
# for most targets: 60 targets 2 at a time took 99 s and 183 CPU-seconds
# at 50,000 runs, against about 150 s and 300 at 5 s each (docs/operations.md,
# "CI's time"). The search for new findings is make fuzz's (60 s each, by
# hand) and the merge search's minute in CI.
FUZZ_SMOKE_RUNS ?= 50000
FUZZ_SMOKE_SECONDS ?= 5
FUZZ_MERGE_TP_SECONDS ?= 600
FUZZ_MERGE_TP_ARGS ?=
CMAKE_GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
# The development trees (sanitizers, fuzzing) link with gold: a third less
# time than bfd over their thousand links (CMakeLists.txt, TG_LINKER). The
# release check and the packages keep the compiler's default, as users'.
DEV_LINKER ?= -DTG_LINKER=gold

ASAN_DIR := build/asan
TSAN_DIR := build/tsan
FUZZ_DIR := build/fuzz
REL_DIR := build/release
# The demos' tree (no tests, no benches) and what they run.
DEMO_DIR := build/demo
DEMO_TARGETS := tracegated tracegate-probes tracegate-emit tracegate-relay \
  tracegate
PKG_DIR := build/release-check
MBED_DIR := build/mbedtls-only
PREFIX ?= /usr/local
PERFETTO_BIN ?= $(wildcard $(CURDIR)/../shared/perfetto/bin)
CONFORMANCE_OUT ?= build/conformance
CONFORMANCE_ARGS ?=
DESTDIR ?=
# The fuzz targets are the fuzz build's own list (build/fuzz/fuzz_targets.txt,
# written by tests/fuzz/CMakeLists.txt), run JOBS at a time by
# tests/fuzz/run_fuzzers.sh.

.PHONY: all deps deps-build build demo collector-demo install test test-asan test-tsan test-release \
        test-mbedtls-only test-long fuzz fuzz-build fuzz-smoke fuzz-merge-tp bench \
        conformance clean

all: build

deps:
	@sh deploy/deps.sh

build: deps
	cmake -S . -B $(REL_DIR) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(REL_DIR) -j $(JOBS)

# The demos install only what building and running them needs (deps.sh
# build) and build only their programs, in a tree of their own without
# tests or benches: a newcomer's first command waits for nothing else.
demo: deps-build
	cmake -S . -B $(DEMO_DIR) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTG_TESTS=OFF -DTG_BENCH=OFF
	cmake --build $(DEMO_DIR) -j $(JOBS) --target $(DEMO_TARGETS)
	@sh deploy/demo/demo.sh $(DEMO_DIR) demo.pftrace

collector-demo: deps-build
	cmake -S . -B $(DEMO_DIR) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTG_TESTS=OFF -DTG_BENCH=OFF
	cmake --build $(DEMO_DIR) -j $(JOBS) --target $(DEMO_TARGETS) \
	  tracegate-collector
	@sh deploy/demo/collector-demo.sh $(DEMO_DIR)

deps-build:
	@sh deploy/deps.sh build

# The prefix is fixed at configure time: the pkg-config file and the systemd
# units' ExecStart= paths are written for it. Layout: deploy/CMakeLists.txt;
# what to do after installing: docs/operations.md.
install: deps
	cmake -S . -B $(REL_DIR) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX)
	cmake --build $(REL_DIR) -j $(JOBS)
	DESTDIR="$(DESTDIR)" cmake --install $(REL_DIR)

# TEST_RELEASE= leaves the Release build type's check out of make test:
# .ci/run does so because its packages' build (make deb DEB_WERROR=1)
# is that build type with warnings as errors, so CI builds it once.
TEST_RELEASE ?= test-release
# TEST_FUZZ= leaves the fuzz smoke out: .ci/run runs it beside the
# packages' test, which mostly waits (CPU-bound with no timing of its
# own, it fills the cores that test leaves idle).
TEST_FUZZ ?= fuzz-smoke
test: deps test-asan test-tsan $(TEST_RELEASE) test-mbedtls-only $(TEST_FUZZ)
	@echo "make test: all suites passed"

# As root, where tracefs can always be mounted, the kernel tracing tests
# must run: a skip would hide a broken linux.ftrace (tests/agent).
FTRACE_ENV := $(shell [ "$$(id -u)" = 0 ] && echo TG_REQUIRE_FTRACE=1)

# Every test but the real-time long ones (label "long": make test-long).
# With Perfetto's binaries beside the tree, the tests that import what they
# wrote into Perfetto's trace processor do so (they skip it, saying so,
# without them).
test-asan: asan-build
	$(call stage_begin,test-asan)
	$(FTRACE_ENV) PERFETTO_BIN="$(PERFETTO_BIN)" \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_DIR) --output-on-failure -j $(TEST_JOBS) -LE '^(long|deb)$$'
	$(call stage_end,test-asan)

test-long: deps asan-build
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_DIR) --output-on-failure -j $(JOBS) -L long

.PHONY: asan-build
asan-build:
	$(call stage_begin,asan-build)
	cmake -S . -B $(ASAN_DIR) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
	  -DTG_SANITIZE=ON -DTG_BENCH=ON -DTG_WERROR=ON $(DEV_LINKER)
	cmake --build $(ASAN_DIR) -j $(JOBS)
	$(call stage_end,asan-build)

# ThreadSanitizer: the tests labelled "tsan" (multi-threaded writers/readers).
# Only those tests are built (the target tests_tsan), with what they run.
test-tsan:
	$(call stage_begin,test-tsan)
	cmake -S . -B $(TSAN_DIR) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
	  -DTG_TSAN=ON -DTG_BENCH=OFF -DTG_WERROR=ON $(DEV_LINKER)
	cmake --build $(TSAN_DIR) -j $(JOBS) --target tests_tsan
	$(FTRACE_ENV) TSAN_OPTIONS=halt_on_error=1 \
	  ctest --test-dir $(TSAN_DIR) --output-on-failure -j $(JOBS) -L tsan
	$(call stage_end,test-tsan)

# The build type packagers and most users choose (-O3): its optimiser sees
# what -O0 does not (overlapping copies, -Wrestrict), so it must build
# clean. Warnings are errors here because this is our compiler; a user's
# own Release build never has -Werror.
test-release:
	$(call stage_begin,test-release)
	cmake -S . -B $(PKG_DIR) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release \
	  -DTG_WERROR=ON -DTG_TESTS=OFF -DTG_BENCH=OFF
	cmake --build $(PKG_DIR) -j $(JOBS)
	$(call stage_end,test-release)

# The TLS layer on mbedtls alone (-DTG_TLS_LIBCRYPTO=OFF), as small hosts
# build it: the TLS tests and everything that crosses a relay (label
# mbedtls, tests/CMakeLists.txt), built alone (target tests_mbedtls).
test-mbedtls-only:
	$(call stage_begin,test-mbedtls-only)
	cmake -S . -B $(MBED_DIR) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
	  -DTG_SANITIZE=ON -DTG_TLS_LIBCRYPTO=OFF -DTG_BENCH=OFF -DTG_WERROR=ON \
	  $(DEV_LINKER)
	cmake --build $(MBED_DIR) -j $(JOBS) --target tests_mbedtls
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(MBED_DIR) --output-on-failure -j $(TEST_JOBS) -L mbedtls
	$(call stage_end,test-mbedtls-only)

# Each target on a scratch copy of its corpus, JOBS at a time.
fuzz-smoke: fuzz-build
	$(call stage_begin,fuzz-smoke)
	sh tests/fuzz/run_fuzzers.sh $(FUZZ_DIR) $(FUZZ_SMOKE_SECONDS) $(JOBS) \
	  $(FUZZ_SMOKE_RUNS)
	$(call stage_end,fuzz-smoke)

fuzz: fuzz-build
	sh tests/fuzz/run_fuzzers.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(JOBS)

# On the ASan build (the harness alone is built): the merge under the
# sanitizers, trace processor as Perfetto ships it. Findings already in
# tests/fuzz/corpus/fuzz_merge (their signature) are counted, not failed.
fuzz-merge-tp:
	@if [ -z "$(PERFETTO_BIN)" ] || [ ! -x "$(PERFETTO_BIN)/trace_processor_shell" ]; then \
	  echo "fuzz-merge-tp: skipped: no Perfetto binaries (PERFETTO_BIN)"; exit 0; fi; \
	cmake -S . -B $(ASAN_DIR) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
	  -DTG_SANITIZE=ON -DTG_BENCH=ON -DTG_WERROR=ON $(DEV_LINKER) >/dev/null && \
	cmake --build $(ASAN_DIR) -j $(JOBS) --target merge_tp_harness && \
	python3 tests/fuzz/merge_tp.py --harness $(ASAN_DIR)/tests/fuzz/merge_tp_harness \
	  --perfetto-bin "$(PERFETTO_BIN)" --seconds $(FUZZ_MERGE_TP_SECONDS) \
	  --out build/fuzz-merge-tp $(FUZZ_MERGE_TP_ARGS)

# The libFuzzer build (clang) of the fuzz targets alone.
fuzz-build: deps
	$(call stage_begin,fuzz-build)
	CC=clang cmake -S . -B $(FUZZ_DIR) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
	  -DTG_FUZZ=ON -DTG_TESTS=OFF -DTG_BENCH=OFF -DTG_WERROR=ON $(DEV_LINKER)
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz_all
	$(call stage_end,fuzz-build)

bench: build
	@sh deploy/deps.sh bench
	@for b in $(REL_DIR)/tests/bench/bench_*; do \
	  [ -x "$$b" ] && { echo "== $$b"; "$$b"; } || true; done

# On the Release build test-release makes (so that after make test it is
# already built), or on CONFORMANCE_BUILD, another Release tree (CI gives
# the packages' build tree). The preflight exits 0 when the job can run,
# 1 (having said why) when it cannot run here (no Perfetto binaries, not
# root): the target then succeeds; 2 when the binaries are there but
# broken.
CONFORMANCE_BUILD ?= $(PKG_DIR)
conformance:
	@if [ -n "$(PERFETTO_BIN)" ]; then sh deploy/deps.sh conformance; fi
	@rc=0; PERFETTO_BIN="$(PERFETTO_BIN)" python3 tests/conformance/run.py \
	  --preflight || rc=$$?; \
	[ $$rc = 1 ] && exit 0; [ $$rc = 0 ] || exit 1; \
	if [ "$(CONFORMANCE_BUILD)" = "$(PKG_DIR)" ]; then \
	  cmake -S . -B $(PKG_DIR) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release \
	    -DTG_WERROR=ON -DTG_TESTS=OFF -DTG_BENCH=OFF && \
	  cmake --build $(PKG_DIR) -j $(JOBS) || exit 1; \
	fi; \
	PERFETTO_BIN="$(PERFETTO_BIN)" python3 tests/conformance/run.py \
	  --build $(CONFORMANCE_BUILD) --out $(CONFORMANCE_OUT) $(CONFORMANCE_ARGS)

clean:
	rm -rf build

# Debian packages. dpkg-buildpackage writes into the parent of the tree it
# builds, so it builds a copy under DEB_DIR: the packages, .changes and
# .buildinfo land in DEB_DIR, and the worktree stays clean.
DEB_DIR := build/deb
DEB_BUILD_OPTIONS ?= nocheck
# DEB_WERROR=1: the packages' compiler warnings are errors (dpkg-buildflags'
# DEB_CFLAGS_APPEND), for CI, whose Release build type this build is; the
# packages users build never get it.
DEB_WERROR ?=
DEB_CFLAGS_APPEND_W := $(if $(DEB_WERROR),-Werror)
.PHONY: deb deb-test
deb:
	@DEB_BUILD_OPTIONS="$(DEB_BUILD_OPTIONS)" sh deploy/deps.sh deb
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_DIR)/tracegate
	tar -c --exclude=./build --exclude=./.git --exclude='./obj-*' . | \
	  tar -x -C $(DEB_DIR)/tracegate
	cd $(DEB_DIR)/tracegate && DEB_BUILD_OPTIONS="$(DEB_BUILD_OPTIONS)" \
	  DEB_CFLAGS_APPEND="$(DEB_CFLAGS_APPEND_W)" \
	  dpkg-buildpackage -us -uc -b -j$(JOBS)
	# lintian's own temporary files (Perl's MLDBM databases of each ELF
	# file) outlive it: in DEB_DIR, which the next build removes, not in /tmp.
	mkdir -p $(DEB_DIR)/lintian-tmp
	TMPDIR="$(abspath $(DEB_DIR))/lintian-tmp" \
	  lintian --fail-on error,warning --display-level '>=warning' \
	  $(DEB_DIR)/*.changes

# The package test (label deb) is not in make test: it installs packages
# on the machine. Its build directory is only configured (with the tests'
# dependencies: it is a test): the test is a script over DEB_DIR's
# packages, which counts sched rows with trace_processor too when
# PERFETTO_BIN is there.
deb-test: deb
	@sh deploy/deps.sh
	cmake -S . -B build/deb-test $(CMAKE_GEN) -DTG_BENCH=OFF -DTG_MAN=OFF
	PERFETTO_BIN="$(PERFETTO_BIN)" \
	  ctest --test-dir build/deb-test --output-on-failure -L deb
