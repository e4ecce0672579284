# tests/integration/dpdk.mk — dataplane/dpdk_port and dataplane/netstack on
# a real EAL: net_tap to the kernel's network stack, net_memif between two
# processes. A plain program, not Criterion (the EAL starts once per
# process); needs root, prints SKIPPED with the reason where the EAL cannot
# start. `make test` runs it through tests/integration/run-dpdk.sh.
$(BUILD)/itests/test_dpdk_net: tests/integration/test_dpdk_net.c $(BUILD)/libsluice_core.a | $(SETUP_STAMP)
	$(Q)mkdir -p $(@D)
	@$(if $(Q),echo "  ITEST-CC $<")
	$(Q)$(CC) $(CFLAGS) $(DPDK_CFLAGS) $< -o $@ $(LDFLAGS_SAN) $(BUILD)/libsluice_core.a $(LDLIBS)

.PHONY: itest-dpdk
test: $(BUILD)/itests/test_dpdk_net

# run only this suite
itest-dpdk: $(BUILD)/itests/test_dpdk_net
	$(Q)tests/integration/run-dpdk.sh

# ~5 s
TEST_SCRIPTS += tests/integration/run-dpdk.sh
