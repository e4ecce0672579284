# control/: config, metadata log, coordinators, broker main, sluicectl.
# Library code only: files with a main() (the broker, sluicectl) are linked
# as programs by their own rules, not into the core library.
CONTROL_MAINS := $(shell grep -lE '^int[[:space:]]+main\>' control/*.c 2>/dev/null)
CORE_SRCS += $(filter-out $(CONTROL_MAINS),$(wildcard control/*.c))
