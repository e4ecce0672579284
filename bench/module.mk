# bench/: build/sluice-bench, one subcommand per bench_*.c file, dispatched
# by the table in bench/bench_main.c.
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_OBJS := $(BENCH_SRCS:%.c=$(BUILD)/obj/%.o)
BIN_TARGETS += $(BUILD)/sluice-bench

# CORE_LIB is defined after the module.mk files are read, so spell it out.
$(BUILD)/sluice-bench: $(BENCH_OBJS) $(BUILD)/libsluice_core.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $^ -o $@ $(LDLIBS)
