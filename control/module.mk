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

include control/sluicectl.mk
