# control/: config, metadata log, control thread, broker main, sluicectl.
# Library code only: files with a main() (the broker, sluicectl) are linked
# as programs by their own rules, not into the core library.
CONTROL_MAINS := $(shell grep -lE '^int[[:space:]]+main\>' control/*.c 2>/dev/null)
CORE_SRCS += $(filter-out $(CONTROL_MAINS) $(wildcard control/sluicectl*.c),$(wildcard control/*.c))
BIN_TARGETS += $(BUILD)/sluiced

# --whole-archive: the ApiKey table names handlers as weak symbols, which
# would not pull their objects out of a static archive.
$(BUILD)/sluiced: $(BUILD)/obj/control/sluiced.o $(BUILD)/libsluice_core.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $< -o $@ -Wl,--whole-archive $(BUILD)/libsluice_core.a -Wl,--no-whole-archive $(LDLIBS)

# build info for /metrics (sluice_build_info): the git commit the broker was
# built from, "-dirty" with uncommitted changes. build/gen/version.h is
# rewritten only when that changes, so metrics.o rebuilds only then (its
# temporary file is the shell's own: two makes at once, as the install and
# packaging tests run, do not take each other's).
VERSION_H := $(BUILD)/gen/version.h
.PHONY: version-h-check
version-h-check:
	@mkdir -p $(BUILD)/gen
	@v=$$(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown); t=$(VERSION_H).tmp.$$$$; \
	 { printf '#define SLUICE_GIT_COMMIT "%s"\n' "$$v"; \
	   printf '#define SLUICE_VERSION "%s"\n' "$$(cat VERSION 2>/dev/null || echo unknown)"; } > $$t; \
	 cmp -s $$t $(VERSION_H) && rm -f $$t || mv $$t $(VERSION_H)
$(VERSION_H): version-h-check
$(BUILD)/obj/control/metrics.o: $(VERSION_H)
$(BUILD)/obj/control/metrics.o: CFLAGS += -I$(BUILD)/gen

include control/sluicectl.mk

# sluiced --version prints the same version and commit
$(BUILD)/obj/control/sluiced.o: $(VERSION_H)
$(BUILD)/obj/control/sluiced.o: CFLAGS += -I$(BUILD)/gen

# make install: the broker in BINDIR, beside sluicectl and sluice-bench
# (which starts the sluiced of its own directory).
INSTALL_TARGETS += install-sluiced
.PHONY: install-sluiced
install-sluiced: $(BUILD)/sluiced
	install -d $(DESTDIR)$(BINDIR)
	install -m 755 $(BUILD)/sluiced $(DESTDIR)$(BINDIR)/sluiced
