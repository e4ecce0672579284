# control/sluicectl.mk — build/sluicectl, the operator's CLI (control/sluicectl*.c).
# Its sources are a program of their own, not part of the broker's core
# library; it links the core library only for the Kafka codec, the batch
# builder and iterator, and the compression codecs (no --whole-archive: the
# broker's handlers stay out).
SLUICECTL_SRCS := $(wildcard control/sluicectl*.c)
SLUICECTL_OBJS := $(SLUICECTL_SRCS:%.c=$(BUILD)/obj/%.o)
BIN_TARGETS += $(BUILD)/sluicectl

$(BUILD)/sluicectl: $(SLUICECTL_OBJS) $(BUILD)/libsluice_core.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $(SLUICECTL_OBJS) -o $@ $(BUILD)/libsluice_core.a $(LDLIBS)
