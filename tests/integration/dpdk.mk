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
test-bins: $(BUILD)/itests/test_dpdk_net

# run only this suite
itest-dpdk: $(BUILD)/itests/test_dpdk_net
	$(Q)tests/integration/run-dpdk.sh test_dpdk_net

# both DPDK suites (this one and test_native_dpdk below): ~15 s
TEST_SCRIPTS += tests/integration/run-dpdk.sh

# tests/integration/test_native_dpdk.c: the native client library's DPDK
# transport (libsluice_native.a) against a real sluiced over net_tap. A
# plain program too (one EAL per process: a child per scenario); root, else
# SKIPPED. `make test` runs it through tests/integration/run-dpdk.sh.
$(BUILD)/itests/test_native_dpdk: tests/integration/test_native_dpdk.c $(NATIVE_LIB_A) | $(SETUP_STAMP)
	$(Q)mkdir -p $(@D)
	@$(if $(Q),echo "  ITEST-CC $<")
	$(Q)$(CC) $(CFLAGS) $(DPDK_CFLAGS) -DSLUICED_PATH='"$(BUILD)/sluiced"' $< -o $@ $(LDFLAGS_SAN) \
		$(NATIVE_LIB_A) $(NATIVE_LIB_DEPS) $(shell pkg-config --libs rdkafka) -pthread

.PHONY: itest-native-dpdk
test-bins: $(BUILD)/itests/test_native_dpdk

# run only this suite
itest-native-dpdk: $(BUILD)/itests/test_native_dpdk $(BUILD)/sluiced
	$(Q)tests/integration/run-dpdk.sh test_native_dpdk

# tests/integration/test_dpdk_replication.py: two sluiced nodes, each on
# DPDK (net_memif, --no-huge --no-pci), replication factor 2: an acks=all
# producer's records reach the followers through the shards' replication
# queue pairs (native REPLICA_FETCH), counted only by that path, identical
# copies, nodes of two shards (~8 s; root, and it fails rather than skips
# without DPDK).
# make itest-dpdk-replication adds test_dpdk_replication_failover.py: three
# nodes on net_tap bridged, a leader's SIGKILL, the survivors following its
# successor natively, the killed node catching up (~30 s: not in make test)
TEST_SCRIPTS += tests/integration/test_dpdk_replication.py

.PHONY: itest-dpdk-replication
itest-dpdk-replication: all
	$(Q)/usr/bin/python3 tests/integration/test_dpdk_replication.py
	$(Q)/usr/bin/python3 tests/integration/test_dpdk_replication_failover.py
