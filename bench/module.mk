# bench/: build/sluice-bench, one subcommand per bench_*.c file, dispatched
# by the table in bench/bench_main.c.
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_OBJS := $(BENCH_SRCS:%.c=$(BUILD)/obj/%.o)
BIN_TARGETS += $(BUILD)/sluice-bench

# CORE_LIB is defined after the module.mk files are included, and a rule's
# prerequisites expand when it is read: name the library directly.
$(BUILD)/sluice-bench: $(BENCH_OBJS) $(BUILD)/libsluice_core.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $^ -o $@ $(LDLIBS)

# bench_kafka.c drives the broker through librdkafka.
$(BUILD)/sluice-bench: LDLIBS += $(shell pkg-config --libs rdkafka)

# bench_native.c drives the broker with the native client library (linked
# after the core: its objects come from libsluice_native.a, which carries its
# own copies of the format and the codecs).
$(BUILD)/sluice-bench: $(BUILD)/libsluice_native.a
$(BUILD)/sluice-bench: LDLIBS += $(shell pkg-config --libs libisal liblz4 libzstd snappy)

# sluice-bench produce runs against its own broker and prints its rows.
TEST_SCRIPTS += tests/bench_kafka_smoke.sh
