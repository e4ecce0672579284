# The control broker (storage/controls.h): BUILD/control/sluiced, the
# broker with the files that hold a SLUICE_CONTROL_OFF hook compiled again
# with -DSLUICE_CONTROLS, every other object shared with BUILD/sluiced.
# `make control-broker`; `make test` builds it (tests/fault/test_controls.py).
CONTROL_SRCS := dataplane/part.c dataplane/part_proxy.c dataplane/handlers_fetch.c dataplane/producer.c dataplane/replica_fetcher.c \
	control/group_offsets.c control/group_replay.c control/txn.c storage/batch.c storage/plog_read.c
CONTROL_OBJS := $(CONTROL_SRCS:%.c=$(BUILD)/control/obj/%.o) $(BUILD)/control/obj/storage/controls.o
CONTROL_LIB := $(BUILD)/control/libsluice_core.a

$(BUILD)/control/obj/%.o: %.c | $(SETUP_STAMP) $(BUILD)/config.mk
	$(Q)mkdir -p $(@D)
	@$(if $(Q),echo "  CC-CTL  $<")
	$(Q)$(CC) $(CFLAGS) -DSLUICE_CONTROLS -c $< -o $@

$(CONTROL_LIB): $(filter-out $(CONTROL_SRCS:%.c=$(BUILD)/obj/%.o),$(CORE_SRCS:%.c=$(BUILD)/obj/%.o)) $(CONTROL_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/control/sluiced: $(BUILD)/obj/control/sluiced.o $(CONTROL_LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS_SAN) $< -o $@ -Wl,--whole-archive $(CONTROL_LIB) -Wl,--no-whole-archive $(LDLIBS)

.PHONY: control-broker
control-broker: $(BUILD)/control/sluiced
test-bins: control-broker
TEST_SCRIPTS += tests/fault/controls_quick.sh

# every control, the cluster ones included (about a minute)
.PHONY: fault-controls
fault-controls: all control-broker $(BUILD)/itests/faultproxy
	/usr/bin/python3 tests/fault/test_controls.py
