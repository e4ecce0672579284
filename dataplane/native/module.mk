# dataplane/native/: the native datagram protocol. The format and the
# broker's engine go into the core library; the client library
# (native_client*.c with the format and the codecs, storage/compress.c,
# compiled in) is its own pair,
# build/libsluice_native.a and build/libsluice_native.so, never linked into
# the broker. `make install` installs it with its header and a pkg-config
# file (PREFIX=/usr/local, DESTDIR honoured).
NATIVE_CLIENT_SRCS := $(wildcard dataplane/native/native_client*.c)
CORE_SRCS += $(filter-out $(NATIVE_CLIENT_SRCS),$(wildcard dataplane/native/*.c))

# Position-independent objects of their own (one set for both libraries),
# symbols hidden but the exported sluice_* API (libsluice_native.map). The
# DPDK transport (native_client_dpdk.c) runs the port layer and the stack of
# dataplane/ (dpdk_port.c, netstack.c): the library has its own copies, and
# those three objects get DPDK's flags (DPDK_CFLAGS, dataplane/module.mk).
NATIVE_LIB_DPDK_SRCS := dataplane/native/native_client_dpdk.c dataplane/dpdk_port.c dataplane/netstack.c
NATIVE_LIB_SRCS := $(NATIVE_CLIENT_SRCS) dataplane/native/native_format.c storage/compress.c \
	dataplane/dpdk_port.c dataplane/netstack.c
NATIVE_LIB_OBJS := $(NATIVE_LIB_SRCS:%.c=$(BUILD)/obj/native-lib/%.o)
$(NATIVE_LIB_DPDK_SRCS:%.c=$(BUILD)/obj/native-lib/%.o): CFLAGS += $(DPDK_CFLAGS)
NATIVE_LIB_A    := $(BUILD)/libsluice_native.a
NATIVE_SONAME   := libsluice_native.so.1
NATIVE_LIB_SO   := $(BUILD)/libsluice_native.so
NATIVE_MAP      := dataplane/native/libsluice_native.map
BIN_TARGETS += $(NATIVE_LIB_A) $(NATIVE_LIB_SO)

$(BUILD)/obj/native-lib/%.o: %.c | $(SETUP_STAMP) $(BUILD)/config.mk
	$(Q)mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $< (libsluice_native)")
	$(Q)$(CC) $(CFLAGS) -fPIC -c $< -o $@

$(NATIVE_LIB_A): $(NATIVE_LIB_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# The shared library links isa-l (CRC-32C, gzip), the codecs and DPDK
# (whose drivers the EAL loads as plugins), nothing of Sluice's; the same
# list is the pkg-config file's Libs.private for static linking.
NATIVE_LIB_DEPS = $(shell pkg-config --libs libisal liblz4 libzstd snappy libdpdk)
$(BUILD)/$(NATIVE_SONAME): $(NATIVE_LIB_OBJS) $(NATIVE_MAP)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,$(NATIVE_SONAME) -Wl,--version-script=$(NATIVE_MAP) -Wl,--no-undefined \
		$(LDFLAGS_SAN) $(NATIVE_LIB_OBJS) -o $@ $(NATIVE_LIB_DEPS)

$(NATIVE_LIB_SO): $(BUILD)/$(NATIVE_SONAME)
	$(Q)ln -sf $(NATIVE_SONAME) $@

PREFIX     ?= /usr/local
INCLUDEDIR ?= $(PREFIX)/include
LIBDIR     ?= $(PREFIX)/lib
INSTALL_TARGETS += install-native

.PHONY: install-native
install-native: $(NATIVE_LIB_A) $(NATIVE_LIB_SO)
	install -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 dataplane/native/sluice_native.h $(DESTDIR)$(INCLUDEDIR)/sluice_native.h
	install -m 644 $(NATIVE_LIB_A) $(DESTDIR)$(LIBDIR)/libsluice_native.a
	install -m 755 $(BUILD)/$(NATIVE_SONAME) $(DESTDIR)$(LIBDIR)/$(NATIVE_SONAME)
	ln -sf $(NATIVE_SONAME) $(DESTDIR)$(LIBDIR)/libsluice_native.so
	printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$(INCLUDEDIR)' 'libdir=$(LIBDIR)' '' \
		'Name: sluice_native' 'Description: client of the Sluice broker'"'"'s native datagram protocol' \
		'Version: 1' 'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lsluice_native' \
		'Libs.private: $(NATIVE_LIB_DEPS)' > $(DESTDIR)$(LIBDIR)/pkgconfig/sluice_native.pc

# tests/unit/test_native_client.c drives the client library against an
# in-memory model of the broker built from the core's pieces.
$(BUILD)/tests/test_native_client: $(NATIVE_LIB_A)
$(BUILD)/tests/test_native_client: LDLIBS += $(NATIVE_LIB_A) $(NATIVE_LIB_DEPS)

# tests/integration/test_native.c: the library against a real sluiced.
$(BUILD)/itests/test_native: $(NATIVE_LIB_A)
$(BUILD)/itests/test_native: LDLIBS += $(NATIVE_LIB_A) $(NATIVE_LIB_DEPS)
