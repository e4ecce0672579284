# tests/: unit tests (Criterion, one suite per module) and scripts that
# `make test` runs after them, in order.
UNIT_TESTS += $(wildcard tests/unit/test_*.c)
-include tests/fuzz/module.mk
-include tests/integration/module.mk
-include tests/fault/module.mk
include tests/fault/controls.mk

# test_compress cross-checks gzip against zlib, an implementation independent
# of isa-l; only that suite links it.
$(BUILD)/tests/test_compress: LDLIBS += $(shell pkg-config --libs zlib)

# sluice-bench storage --quick runs end to end and prints its result rows.
TEST_SCRIPTS += tests/bench_storage_smoke.sh
# make install of the native client library, and programs built against it.
TEST_SCRIPTS += tests/native_install_smoke.sh
# every relative link of README.md and docs/*.md points at a file (and heading)
TEST_SCRIPTS += tests/docs_links.sh
# the fault suite's checker on synthetic histories, one per anomaly class and
# the tricky clean ones (no broker, under a second)
TEST_SCRIPTS += tests/fault/test_checker.py
# the workloads' read loop writes every record its client delivered, also a
# batch a zombie's wake cut short (a one-node cluster, a few seconds)
TEST_SCRIPTS += tests/fault/test_read_loop.py

# a consumer's close() hung holding Python's lock ends the fault workload with
# its histories whole instead of failing the scenario (a one-node cluster,
# the queue workload's process: about 14 s)
TEST_SCRIPTS += tests/fault/test_close_hang.py
