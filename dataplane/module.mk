# dataplane/: shard runtime, transports, Kafka codec and handlers.
# dataplane/kafka/module.mk (codec) is included when present.
-include dataplane/kafka/module.mk
include dataplane/native/module.mk
CORE_SRCS += $(wildcard dataplane/*.c)

# DPDK (dpdk_port.c, netstack.c): pkg-config's flags (-include rte_config.h,
# -march) only for the objects that include DPDK's headers; its libraries
# for every program, since the broker and the unit tests link the whole core
# library. Lazy (=) like PKG_CFLAGS, so a fresh machine runs scripts/setup
# before pkg-config is asked.
DPDK_CFLAGS = $(shell pkg-config --cflags libdpdk 2>/dev/null)
DPDK_LIBS = $(shell pkg-config --libs libdpdk 2>/dev/null)
$(BUILD)/obj/dataplane/dpdk_port.o $(BUILD)/obj/dataplane/netstack.o \
	$(BUILD)/obj/dataplane/native/native_broker.o: CFLAGS += $(DPDK_CFLAGS)
$(BUILD)/tests/test_netstack $(BUILD)/tests/test_dpdk_port: private CFLAGS += $(DPDK_CFLAGS)
LDLIBS += $(DPDK_LIBS)
