# control/sluicectl.mk — build/sluicectl, the operator's CLI (control/sluicectl*.c).
# Its sources are a program of their own, not part of the broker's core
# library; it links the core library only for the Kafka codec, the batch
# builder and iterator, and the compression codecs (no --whole-archive: the
# broker's handlers stay out).
SLUICECTL_SRCS := $(wildcard control/sluicectl*.c)
SLUICECTL_OBJS := $(SLUICECTL_SRCS:%.c=$(BUILD)/obj/%.o)
BIN_TARGETS += $(BUILD)/sluicectl

# `sluicectl capacity plan` (and `host check --results`) runs the benchmark suite's model (bench/capacity.c,
# over the hardware profiles of control/hw_profile.c), which reads a suite run's
# results.json with jansson.
SLUICECTL_BENCH_OBJS := $(BUILD)/obj/bench/capacity.o

$(BUILD)/sluicectl: $(SLUICECTL_OBJS) $(SLUICECTL_BENCH_OBJS) $(BUILD)/libsluice_core.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $(SLUICECTL_OBJS) $(SLUICECTL_BENCH_OBJS) -o $@ $(BUILD)/libsluice_core.a $(LDLIBS)
$(BUILD)/sluicectl: LDLIBS += $(shell pkg-config --libs jansson)

# make install: sluicectl in BINDIR and the drill runner it execs
# (tools/sluicefault/*.py, `sluicectl drill`) in PREFIX/share/sluice/tools,
# where sluicectl looks for it beside ../share of its own directory.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
TOOLSDIR = $(PREFIX)/share/sluice/tools
INSTALL_TARGETS += install-sluicectl

.PHONY: install-sluicectl
install-sluicectl: $(BUILD)/sluicectl
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(TOOLSDIR)/sluicefault
	install -m 755 $(BUILD)/sluicectl $(DESTDIR)$(BINDIR)/sluicectl
	install -m 644 $(wildcard tools/sluicefault/*.py) $(DESTDIR)$(TOOLSDIR)/sluicefault/
