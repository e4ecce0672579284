# dataplane/: shard runtime, transports, Kafka codec and handlers.
# dataplane/kafka/module.mk (codec) is included when present.
-include dataplane/kafka/module.mk
include dataplane/native/module.mk
CORE_SRCS += $(wildcard dataplane/*.c)
