# tests/integration/: a real broker process driven by real Kafka clients.
# c.mk: librdkafka suites under Criterion; scripts.mk: kcat, kafka-python,
# kafkajs, Sarama; sarama/module.mk builds Sarama's Go program. Each adds to
# TEST_SCRIPTS what `make test` runs.
-include tests/integration/c.mk
-include tests/integration/scripts.mk
-include tests/integration/sarama/module.mk
-include tests/integration/dpdk.mk
