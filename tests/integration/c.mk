# tests/integration/c.mk: librdkafka suites under Criterion, a real sluiced
# started by each test (tests/integration/harness.c). Built in the normal
# build (not the sanitizer one: the broker under test is $(BUILD)/sluiced);
# `make test` builds them and runs tests/integration/run-c.sh.
ITEST_C_SUITES := test_rdkafka test_badinput test_groups test_groups_fencing test_idempotence test_txn test_native
ITEST_C_BINS := $(ITEST_C_SUITES:%=$(BUILD)/itests/%)
ITEST_C_CFLAGS = $(CFLAGS) -DSLUICED_PATH='"$(BUILD)/sluiced"' \
	-DFAULTPROXY_PATH='"$(BUILD)/itests/faultproxy"'

.PHONY: itest-c-bins itest-c
itest-c-bins: $(ITEST_C_BINS) $(BUILD)/sluiced $(BUILD)/itests/faultproxy

# the fault-injecting proxy between a client and the broker (its own
# program: no Criterion, no librdkafka)
$(BUILD)/itests/faultproxy: tests/integration/faultproxy.c | $(SETUP_STAMP)
	$(Q)mkdir -p $(@D)
	@$(if $(Q),echo "  ITEST-CC $<")
	$(Q)$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS_SAN)

# (CORE_LIB is defined after the module.mk files are read, and a rule's
# prerequisites expand when it is read: the library is named directly, or a
# parallel make links these before the library exists)
$(BUILD)/itests/%: tests/integration/%.c tests/integration/harness.c tests/integration/harness.h \
		$(BUILD)/libsluice_core.a | $(SETUP_STAMP)
	$(Q)mkdir -p $(@D)
	@$(if $(Q),echo "  ITEST-CC $<")
	$(Q)$(CC) $(ITEST_C_CFLAGS) $< tests/integration/harness.c -o $@ $(LDFLAGS_SAN) \
		$(CORE_LIB) $(LDLIBS) $(shell pkg-config --libs rdkafka criterion)

test-bins: itest-c-bins

# run only the C integration suites
itest-c: itest-c-bins
	$(Q)tests/integration/run-c.sh

# two suites at a time, each running two tests at a time, each test with
# its own broker (RUNC_JOBS=1: one suite at a time): 94 s against 191 s one
# suite at a time, back to back under a load average of 13-16.
TEST_SCRIPTS += tests/integration/run-c.sh
