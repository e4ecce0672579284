# storage/: the log. Adds its sources to the core library (controls.c: the
# control broker's only, tests/fault/controls.mk).
CORE_SRCS += $(filter-out $(wildcard storage/*_dump.c) storage/controls.c,$(wildcard storage/*.c))
