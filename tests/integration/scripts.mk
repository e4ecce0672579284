# tests/integration/scripts.mk — the client suites `make test` runs after the
# unit tests: kcat, kafka-python (Debian's, under /usr/bin/python3) and
# kafkajs. Each script starts its own brokers (build/sluiced) and prints
# "N passed, N failed".
TEST_SCRIPTS += tests/integration/test_kcat.py
TEST_SCRIPTS += tests/integration/test_kafka_python.py
