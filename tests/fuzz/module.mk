# tests/fuzz/: libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined)
# over the Kafka codec, a SASL listener's requests before authentication, an
# SSL listener's TLS before and during the handshake and the native
# protocol's datagrams. `make fuzz` runs each for FUZZ_SECONDS and grows its
# corpus in tests/fuzz/corpus/<target>; `make test` runs tests/fuzz/smoke
# (10 s per target after a replay of its corpus, corpus read-only; one target
# per core at a time). Crashes land in build/fuzz/artifacts.
FUZZ_SECONDS ?= 300
FUZZ_TARGETS := fuzz_kafka_request fuzz_kafka_message fuzz_native_datagram fuzz_sasl_preauth fuzz_tls_entry
FUZZ_BINS := $(FUZZ_TARGETS:%=build/fuzz/%)
FUZZ_CFLAGS := -std=gnu11 -g -O1 -Wall -Wextra -Werror -D_GNU_SOURCE -I. \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CODEC_SRCS := $(wildcard dataplane/kafka/*.c)
# the codec is compiled once (fuzzer-no-link: the coverage instrumentation
# without libFuzzer's main) and linked into each Kafka target
FUZZ_CODEC_OBJS := $(FUZZ_CODEC_SRCS:%.c=build/fuzz/obj/%.o)

.PHONY: fuzz fuzz-bins
fuzz-bins: $(FUZZ_BINS)

$(FUZZ_CODEC_OBJS): build/fuzz/obj/%.o: %.c $(wildcard dataplane/kafka/*.h)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ-CC $<")
	$(Q)clang $(subst fuzzer,fuzzer-no-link,$(FUZZ_CFLAGS)) -c $< -o $@

build/fuzz/%: tests/fuzz/%.c $(FUZZ_CODEC_OBJS) $(wildcard dataplane/kafka/*.h)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ-CC $<")
	$(Q)clang $(FUZZ_CFLAGS) $< $(FUZZ_CODEC_OBJS) -o $@

# the native protocol's datagrams (dataplane/native/native_format.c; isa-l's CRC)
build/fuzz/fuzz_native_datagram: tests/fuzz/fuzz_native_datagram.c dataplane/native/native_format.c \
		dataplane/native/native_format.h
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ-CC $<")
	$(Q)clang $(FUZZ_CFLAGS) $< dataplane/native/native_format.c -lisal -o $@

# a SASL listener's requests before authentication (dataplane/sasl.c on
# OpenSSL's libcrypto, with SCRAM's primitives in dataplane/scram.c, the
# JAAS reader its PLAIN users come from in dataplane/jaas.c, and the codec)
build/fuzz/fuzz_sasl_preauth: tests/fuzz/fuzz_sasl_preauth.c dataplane/sasl.c dataplane/sasl.h \
		dataplane/scram.c dataplane/scram.h dataplane/jaas.c dataplane/jaas.h $(FUZZ_CODEC_OBJS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ-CC $<")
	$(Q)clang $(FUZZ_CFLAGS) $< dataplane/sasl.c dataplane/scram.c dataplane/jaas.c $(FUZZ_CODEC_OBJS) -lcrypto \
		-o $@

# the server side of an SSL listener's connection before and during the
# handshake (dataplane/tls.c on OpenSSL's libssl)
build/fuzz/fuzz_tls_entry: tests/fuzz/fuzz_tls_entry.c dataplane/tls.c dataplane/tls.h
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ-CC $<")
	$(Q)clang $(FUZZ_CFLAGS) $< dataplane/tls.c -lssl -lcrypto -o $@

fuzz: $(FUZZ_BINS)
	$(Q)mkdir -p build/fuzz/artifacts
	$(Q)set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p tests/fuzz/corpus/$$t; \
	  echo "== fuzz $$t for $(FUZZ_SECONDS) s"; \
	  build/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=1024 \
	    -malloc_limit_mb=64 -print_final_stats=1 -artifact_prefix=build/fuzz/artifacts/$$t- \
	    tests/fuzz/corpus/$$t; \
	done

TEST_SCRIPTS += tests/fuzz/smoke
