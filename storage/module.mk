# storage/: the log. Adds its sources to the core library.
CORE_SRCS += $(filter-out $(wildcard storage/*_dump.c),$(wildcard storage/*.c))
