# tests/integration/scripts.mk — the client suites `make test` runs after the
# unit tests: kcat, kafka-python (Debian's, under /usr/bin/python3) and
# kafkajs; consumer groups over raw sockets (test_groups_raw.py), with
# kafka-python and confluent-kafka (test_groups_python.py) and with kafkajs
# (test_groups_kafkajs.py). Each script starts its own brokers
# (build/sluiced) and prints "N passed, N failed".
TEST_SCRIPTS += tests/integration/test_kcat.py
TEST_SCRIPTS += tests/integration/test_kafka_python.py
TEST_SCRIPTS += tests/integration/test_kafkajs.py
TEST_SCRIPTS += tests/integration/test_groups_raw.py
TEST_SCRIPTS += tests/integration/test_groups_python.py
TEST_SCRIPTS += tests/integration/test_groups_kafkajs.py
TEST_SCRIPTS += tests/integration/test_groups_offsets.py
# transactions: raw frames with exact error codes (test_txn_raw.py), kcat and
# kafkajs transactional producers and read_committed consumers
# (test_txn_clients.py)
TEST_SCRIPTS += tests/integration/test_txn_raw.py
TEST_SCRIPTS += tests/integration/test_txn_clients.py
# Produce over raw frames: several batches for one partition in one request,
# a batch larger than the shard's tail memory
TEST_SCRIPTS += tests/integration/test_produce_raw.py
# compressed batches checked inside (garbage, inner count and offset deltas,
# record lengths, the decompression bound), every codec read back by kcat
TEST_SCRIPTS += tests/integration/test_produce_compressed.py
# the native datagram protocol (dataplane/native/), datagram by datagram
TEST_SCRIPTS += tests/integration/test_native_raw.py
# the admin endpoint: /metrics parsed by prometheus_client under a producer
# and a consumer group, the JSON views, bad requests
TEST_SCRIPTS += tests/integration/test_metrics.py

# kafkajs is installed from the committed package-lock.json on first use (and
# again whenever the lock changes), so `make test` on a fresh clone needs no
# manual npm step. The runner is started by the `test` recipe, hence the
# stamp is a prerequisite of `test` itself.
KAFKAJS_DIR := tests/integration/kafkajs
KAFKAJS_STAMP := $(KAFKAJS_DIR)/node_modules/.stamp

$(KAFKAJS_STAMP): $(KAFKAJS_DIR)/package-lock.json $(KAFKAJS_DIR)/package.json | $(SETUP_STAMP)
	$(Q)cd $(KAFKAJS_DIR) && npm ci --no-audit --no-fund
	$(Q)touch $@

test: $(KAFKAJS_STAMP)
# sluicectl (build/sluicectl) against a real broker: every command, table and
# JSON output, exit codes, error messages; cross-checked with kcat -L,
# confluent-kafka and kafka-python
TEST_SCRIPTS += tests/integration/test_sluicectl.py
