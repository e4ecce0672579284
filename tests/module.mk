# tests/: unit tests (Criterion, one suite per module) and scripts that
# `make test` runs after them, in order.
UNIT_TESTS += $(wildcard tests/unit/test_*.c)
-include tests/fuzz/module.mk
-include tests/integration/module.mk
