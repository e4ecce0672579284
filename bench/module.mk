# bench/: build/sluice-bench, one subcommand per bench_*.c file (rebalance
# and commit share their options, in bench_groups.c), dispatched by the
# table in bench/bench_main.c; and the probes scripts/hwprobe runs, one
# program per bench/hwprobe_*.c (build/hwprobe-disk, -net, -memif).
BENCH_SRCS := $(filter-out bench/hwprobe_%.c,$(wildcard bench/*.c))
BENCH_OBJS := $(BENCH_SRCS:%.c=$(BUILD)/obj/%.o)
BIN_TARGETS += $(BUILD)/sluice-bench

# CORE_LIB is defined after the module.mk files are included, and a rule's
# prerequisites expand when it is read: name the library directly.
$(BUILD)/sluice-bench: $(BENCH_OBJS) $(BUILD)/libsluice_core.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $^ -o $@ $(LDLIBS)

# make install: sluice-bench in BINDIR (control/sluicectl.mk), beside the
# sluiced it starts for its runs.
INSTALL_TARGETS += install-bench
.PHONY: install-bench
install-bench: $(BUILD)/sluice-bench
	install -d $(DESTDIR)$(BINDIR)
	install -m 755 $(BUILD)/sluice-bench $(DESTDIR)$(BINDIR)/sluice-bench

# bench_kafka.c (and kafka_broker.c, kafka_client.c, kafka_run.c, which
# the other benchmarks share through kafka.h) drives the broker through
# librdkafka.
$(BUILD)/sluice-bench: LDLIBS += $(shell pkg-config --libs rdkafka)

# bench_native.c drives the broker with the native client library (linked
# after the core: its objects come from libsluice_native.a, which carries its
# own copies of the format and the codecs).
$(BUILD)/sluice-bench: $(BUILD)/libsluice_native.a
$(BUILD)/sluice-bench: LDLIBS += $(shell pkg-config --libs libisal liblz4 libzstd snappy)

# the peers (bench/peer.h): Redis Streams through hiredis, NATS JetStream
# through libnats
$(BUILD)/sluice-bench: LDLIBS += $(shell pkg-config --libs hiredis libnats)

# the capacity planner's model (bench/capacity.c: sluicectl capacity plan, and
# the suite's check of it) reads results.json with jansson
$(BUILD)/sluice-bench: LDLIBS += $(shell pkg-config --libs jansson)
$(BUILD)/tests/test_capacity: LDLIBS += $(shell pkg-config --libs jansson)

# Scripts beside the program, run by hand (docs/benchmarks.md says how):
# bench/metadata_latency.py: a metadata change's latency, raw frames, one node
# bench/txn_latency.py: a transaction's latency through confluent-kafka
# bench/replication.py: acks=all on RF 3 against acks=1 on RF 1, 3-node cluster
# bench/failover.py: a producer's wait when partition 0's leader is killed or stopped
# bench/stop_restart.py: a clean stop and the start after it, many partitions, two builds alternated

# sluice-bench produce (and the others through librdkafka, security --quick
# among them) runs against its own broker and prints its rows.
TEST_SCRIPTS += tests/bench_kafka_smoke.sh
# scripts/profile (make profile) on a small produce run: perf's samples
# summed per side, the broker's top functions.
TEST_SCRIPTS += tests/profile_smoke.sh

# Where the CPU goes in a benchmark run (perf record; docs/benchmarks.md
# "Profiles"): make profile [ARGS='consume --records 5M'].
.PHONY: profile
profile: all
	$(Q)scripts/profile $(ARGS)
# sluice-bench scrape (the admin endpoint's cost), small, end to end.
TEST_SCRIPTS += tests/bench_scrape_smoke.sh
# sluice-bench peer redis starts its own redis-server, small, end to end.
TEST_SCRIPTS += tests/bench_peer_redis_smoke.sh
# sluice-bench peer nats against its own nats-server, small; no server left.
TEST_SCRIPTS += tests/bench_peer_nats_smoke.sh
# sluice-bench suite --quick on tiny sizes: report.md, results.json, plots,
# --emulate with the Kafka 2014 profile, bad input
TEST_SCRIPTS += tests/bench_suite_smoke.sh

# scripts/hwprobe's probes: each a program of its own (the memif probe starts
# an EAL in each of two processes, which sluice-bench must not do).
HWPROBE_BINS := $(BUILD)/hwprobe-disk $(BUILD)/hwprobe-net $(BUILD)/hwprobe-memif
BIN_TARGETS += $(HWPROBE_BINS)

$(BUILD)/hwprobe-disk: $(BUILD)/obj/bench/hwprobe_disk.o
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $^ -o $@ $(shell pkg-config --libs liburing)

$(BUILD)/hwprobe-net: $(BUILD)/obj/bench/hwprobe_net.o
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $^ -o $@ -pthread

# the memif probe opens its ports with dataplane/dpdk_port (core library)
$(BUILD)/obj/bench/hwprobe_memif.o: CFLAGS += $(DPDK_CFLAGS)
$(BUILD)/hwprobe-memif: $(BUILD)/obj/bench/hwprobe_memif.o $(BUILD)/libsluice_core.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $^ -o $@ $(LDLIBS)

# build/emulate-check (tests/emulate_check.c): bench/emulate.c for real —
# namespace, shaped veth pair, disk cgroup — without sluice-bench; run by
# tests/bench_emulate_smoke.sh (root).
BIN_TARGETS += $(BUILD)/emulate-check
$(BUILD)/emulate-check: $(BUILD)/obj/tests/emulate_check.o $(BUILD)/obj/bench/emulate.o \
			$(BUILD)/obj/control/hw_profile.o
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $^ -o $@ -pthread -lm
TEST_SCRIPTS += tests/bench_emulate_smoke.sh

# make hwprobe: measure this machine into hw-profiles/local.conf
# (ARGS='--quick', '--dir DIR', '--out FILE')
.PHONY: hwprobe
hwprobe: $(HWPROBE_BINS)
	scripts/hwprobe $(ARGS)

# a --quick probe writes a profile whose every key is a number (~15 s)
TEST_SCRIPTS += tests/hwprobe_smoke.sh

# bench_native.c starts the EAL for its memif client ports (dataplane/dpdk_port.h)
$(BUILD)/obj/bench/bench_native.o: CFLAGS += $(DPDK_CFLAGS)

# make bench-suite: the benchmark suite against this machine's profile
# (measured first by scripts/hwprobe when hw-profiles/local.conf is absent);
# ARGS='--quick', '--emulate hw-profiles/kafka-2014.conf', scenario names...
.PHONY: bench-suite
bench-suite: $(BUILD)/sluice-bench $(BUILD)/sluiced $(HWPROBE_BINS)
	@[ -f hw-profiles/local.conf ] || case " $(ARGS) " in *" --profile "*|*" --emulate "*) ;; *) scripts/hwprobe ;; esac
	$(BUILD)/sluice-bench suite $(ARGS)
