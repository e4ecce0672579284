# Sluice — one non-recursive Makefile. Each folder's module.mk adds sources
# to the lists below; nothing else.
#
#   make            build everything (build/)
#   make run        build and start a one-node broker with embedded defaults
#   make test       build and run every test suite (unit tests in a sanitizer build)
#   make bench      build the benchmarks (build/sluice-bench)
#   make docs       rewrite the generated parts of docs/ (the configuration table)
#   make SAN=address,undefined   sanitizer build (saved in build/config.mk)
#   make V=1        print full commands
#   make install    install what module.mk files list (PREFIX=/usr/local,
#                   DESTDIR honoured): the native client library, sluiced,
#                   sluicectl, the drill runner it execs (share/sluice/tools)
#                   and sluice-bench
#   make deb        the Debian packages in build/deb/ (packaging/module.mk,
#                   docs/install.md)

BUILD   ?= build
-include $(BUILD)/config.mk
SAN     ?=
OPT     ?= -O2

CC      := gcc
# raft: libraft 0.15, the metadata quorum's consensus (control/quorum.c);
# its raft.pc names no Requires, so libuv (its loop) is listed beside it,
# and liblz4 (its snapshot compression) is already here. openssl: libssl 3,
# TLS on the SSL listeners (dataplane/tls.c).
PKGS    := liburing libisal liblz4 libzstd snappy libmicrohttpd gnutls raft libuv openssl
SETUP_STAMP := build/.setup-stamp

ifeq ($(V),1)
Q :=
else
Q := @
endif

# pkg-config is evaluated lazily (=) so that `make` on a fresh machine can run
# scripts/setup (the stamp) before pkg-config is first asked anything.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CFLAGS_BASE := -std=gnu11 $(OPT) -g -Wall -Wextra -Werror -D_GNU_SOURCE \
	-fno-strict-aliasing -MMD -MP -I. -pthread
ifneq ($(SAN),)
CFLAGS_BASE += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS_SAN := -fsanitize=$(SAN)
endif
CFLAGS  = $(CFLAGS_BASE) $(PKG_CFLAGS)
LDLIBS  = $(PKG_LIBS) -lstdc++ -lm -pthread

# Lists filled by module.mk files.
CORE_SRCS  :=
BIN_TARGETS :=
UNIT_TESTS :=
TEST_SCRIPTS :=
INSTALL_TARGETS :=

include storage/module.mk
include dataplane/module.mk
include control/module.mk
# the console's files are core sources: before the modules that list CORE_SRCS
include ui/module.mk
include bench/module.mk
include tests/module.mk
include docs/module.mk
include packaging/module.mk

CORE_OBJS := $(CORE_SRCS:%.c=$(BUILD)/obj/%.o)
CORE_LIB  := $(BUILD)/libsluice_core.a
UNIT_BINS := $(UNIT_TESTS:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: cluster-faults all run cluster test test-san test-bins test-run unit-test sim san-unit-bins san-sluiced unit-bins bench check-style check-layers codegen clean setup distclean install
.DEFAULT_GOAL := all

all: $(CORE_LIB) $(BIN_TARGETS)

$(SETUP_STAMP): scripts/setup
	$(Q)scripts/setup
	$(Q)mkdir -p $(@D) && touch $@

setup: $(SETUP_STAMP)

# Remember SAN/OPT per build directory so a later bare `make` keeps them.
$(BUILD)/config.mk: | $(SETUP_STAMP)
	$(Q)mkdir -p $(@D)
	$(Q)printf 'SAN ?= %s\nOPT ?= %s\n' '$(SAN)' '$(OPT)' > $@

$(BUILD)/obj/%.o: %.c | $(SETUP_STAMP) $(BUILD)/config.mk
	$(Q)mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(CORE_LIB): $(CORE_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/tests/%: tests/unit/%.c $(CORE_LIB) | $(SETUP_STAMP)
	$(Q)mkdir -p $(@D)
	@$(if $(Q),echo "  TEST-CC $<")
	$(Q)$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS_SAN) -Wl,--whole-archive $(CORE_LIB) -Wl,--no-whole-archive $(LDLIBS) $(shell pkg-config --libs criterion)

# Unit tests run in a sanitizer build of their own (build/san).
SAN_BUILD := build/san
san-unit-bins: $(SETUP_STAMP)
	$(Q)$(MAKE) --no-print-directory BUILD=$(SAN_BUILD) SAN=address,undefined OPT=-O1 unit-bins

# sluiced in the sanitizer build too (its core library is the unit tests',
# so this adds one object and a link): tests/integration/test_config_exits.py
# runs each configuration error through it (exit 2, no leak report).
san-sluiced: san-unit-bins
	$(Q)$(MAKE) --no-print-directory BUILD=$(SAN_BUILD) SAN=address,undefined OPT=-O1 $(SAN_BUILD)/sluiced

# scripts/run-unit-tests runs UNIT_JOBS suites at a time (default 4: most
# of their time is fsyncs and children's deaths, not CPU), starting them in
# the order given: the longest first (UNIT_FIRST; test_recovery, test_plog,
# test_spsc, test_replica_fetcher and test_metalog_sim took 77, 55, 26, 23
# and 22 s one after another), so that none is left running alone at the
# end. UNIT_ALONE: suites that run with no other beside them (test_spsc's
# threads spin on a ring: beside three other suites it ran past its
# timeout).
UNIT_ALONE := test_spsc
UNIT_FIRST := test_spsc test_recovery test_plog test_replica_fetcher test_metalog_sim test_ctl test_metalog
UNIT_NAMES := $(UNIT_TESTS:tests/unit/%.c=%)
# The metadata quorum's simulation (tests/unit/test_metalog_sim.c) runs
# SIM_SEEDS seeds on 3 and on 5 servers in make test (60: 27 s alone, where
# its 200 took 65 s and, beside three other suites, 175 s, the unit phase's
# tail); `make sim` is the campaign (SEEDS=2000 from FIRST=1 by default).
SIM_SEEDS ?= 60
unit-test: san-unit-bins
	$(Q)SLUICE_SIM_SEEDS=$(SIM_SEEDS) UNIT_ALONE="$(UNIT_ALONE)" scripts/run-unit-tests $(SAN_BUILD)/tests $(foreach n,$(UNIT_FIRST),$(filter $(n),$(UNIT_NAMES))) \
		$(filter-out $(UNIT_FIRST),$(UNIT_NAMES))

unit-bins: $(UNIT_BINS)

sim: san-unit-bins
	SLUICE_SIM_SEEDS=$(or $(SEEDS),2000) SLUICE_SIM_FIRST=$(or $(FIRST),1) \
		$(SAN_BUILD)/tests/test_metalog_sim --jobs $(TEST_JOBS) --short-filename --filter 'metalog_sim/*'

# make test first builds everything it runs (test-bins: this build, the
# sanitizer build, the fuzz targets, the integration programs; module.mk
# files add theirs) as parallel jobs, TEST_JOBS of them (default: one per
# core) unless -j was given; then it runs the checks and the suites one
# after another.
TEST_JOBS ?= $(shell nproc)
test: $(SETUP_STAMP)
	$(Q)$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(TEST_JOBS)) test-bins
	$(Q)$(MAKE) --no-print-directory test-run

test-bins: all san-unit-bins san-sluiced fuzz-bins

# The scripts run TEST_LANES at a time (default 4; scripts/run-test-scripts
# says how), except those in TEST_ALONE, which run with no other script
# beside them: what measures (the bench smokes, the probe), what keeps both
# cores busy itself (the fuzz smoke, run-c.sh's suites), what uses DPDK,
# loop devices or cgroups, and what takes thousands of descriptors and
# partitions (test_fd_budget.py, test_conns.py and test_kafka_rules.py share
# the lanes since 2026-12-04: each broker has its own descriptor limit and
# 24 GiB hold their partitions). `make test TEST_LANES=1` runs every script alone, its output
# as it comes. The network-namespace scripts (test_cluster_partition.py,
# tests/fault/test_netcluster.py and smoke.sh) share the lanes: each
# cluster takes a subnet 10.213.K.0/24 and names of its own under a lock
# and holds them for its life, its cuts are rules inside its own
# namespaces, and the sweep removes only what a dead owner left; the three
# side by side took 85 s, each as long as alone (158 s one after another).
TEST_LANES ?= 4
TEST_ALONE := tests/bench_kafka_smoke.sh tests/bench_scrape_smoke.sh tests/bench_peer_redis_smoke.sh \
	tests/bench_peer_nats_smoke.sh tests/bench_suite_smoke.sh tests/bench_emulate_smoke.sh \
	tests/hwprobe_smoke.sh tests/bench_storage_smoke.sh tests/profile_smoke.sh \
	tests/fuzz/smoke tests/integration/run-c.sh \
	tests/integration/run-dpdk.sh tests/integration/test_dpdk_replication.py \
	tests/fault/test_disk_failures.py
test-run: check-style check-layers unit-test
	$(Q)TEST_LANES=$(TEST_LANES) TEST_ALONE="$(TEST_ALONE)" scripts/run-test-scripts $(TEST_SCRIPTS)

# The single-node integration suites against sluiced in the sanitizer build
# (ASan; UBSan halting on its first error, so that undefined behaviour fails
# the test instead of being written to a log that goes with the test's
# directory): how compaction's crash on an empty key map was found. Not in
# make test (about 4 minutes in 2 lanes): a campaign of its own.
TEST_SAN_SCRIPTS := $(addprefix tests/integration/,test_produce_raw.py test_kafka_python.py test_groups_raw.py \
	test_groups_python.py test_fetch_sessions.py test_produce_compressed.py test_recovery_broker.py \
	test_kafka_rules.py test_metrics.py test_leader_epochs.py test_features.py test_acls.py test_sasl.py \
	test_native_raw.py)
test-san: all san-sluiced
	$(Q)SLUICED=$(SAN_BUILD)/sluiced UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 TEST_LANES=2 \
		scripts/run-test-scripts $(TEST_SAN_SCRIPTS)

# One node with embedded defaults: data in ./data, listener 127.0.0.1:9092.
# Extra flags: make run ARGS='--set log.durability=sync'
run: all
	$(BUILD)/sluiced $(ARGS)

# N nodes (default 3) forming one cluster on free loopback ports (every
# node a broker and a voter); prints the bootstrap servers. Stop it with
# scripts/cluster stop. Extra flags: make cluster N=5 ARGS='--shards 2'
cluster: all
	scripts/cluster start $(or $(N),3) $(ARGS)

# The cluster's fault tests (a paused leader, a network partition), each
# run ROUNDS times (default 5): races that show once in many runs
cluster-faults: all
	$(Q)for i in $$(seq 1 $(or $(ROUNDS),5)); do echo "== round $$i"; \
	  /usr/bin/python3 tests/integration/test_cluster_pause.py && \
	  /usr/bin/python3 tests/integration/test_cluster_partition.py || exit 1; done

bench: all

install: all $(INSTALL_TARGETS)

check-style:
	$(Q)scripts/check-style

# Layers call down (storage/ < dataplane/ < control/), no loop of files
# within one: read from the objects with nm; the self-test shows it can fail.
check-layers: all
	$(Q)scripts/check-layers --self-test
	$(Q)scripts/check-layers $(BUILD)

clean:
	rm -rf build

# (-type f: the packages' staged trees under build/deb hold directories
# named *.d, sysusers.d and tmpfiles.d)
-include $(shell find $(BUILD) -name '*.d' -type f 2>/dev/null)
