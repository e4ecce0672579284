# tests/integration/scripts.mk — the client suites `make test` runs after the
# unit tests: kcat, kafka-python (Debian's, under /usr/bin/python3), kafkajs
# and Sarama; consumer groups over raw sockets (test_groups_raw.py), with
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
# docs/kafka-protocol.md's version table against ApiVersions v0 and v3 of a
# real broker and against the message definitions (~2 s)
TEST_SCRIPTS += tests/integration/test_version_table.py
# Sarama 1.22 (Debian's, Go; build/tests/sarama_check from
# tests/integration/sarama/module.mk): admin, an idempotent keyed sync
# producer and its hash partitioners against Java's murmur2 placement, an
# async producer with every codec, a two-member group that commits, stops
# and resumes in a new process, nothing read twice beyond the uncommitted
# window (issue 25; about 20 s)
TEST_SCRIPTS += tests/integration/test_sarama.py
# transactions: raw frames with exact error codes (test_txn_raw.py), kcat and
# kafkajs transactional producers and read_committed consumers
# (test_txn_clients.py)
TEST_SCRIPTS += tests/integration/test_txn_raw.py
TEST_SCRIPTS += tests/integration/test_txn_clients.py
# Produce over raw frames: several batches for one partition in one request,
# a batch larger than the shard's tail memory
TEST_SCRIPTS += tests/integration/test_produce_raw.py
# Fetch v12-15 over raw frames: topics by id, ReplicaState, fetch sessions (KIP-227)
TEST_SCRIPTS += tests/integration/test_fetch_sessions.py
# leader epochs (raw OffsetForLeaderEpoch, Fetch v9-12, ListOffsets v4,
# Metadata v7) and a librdkafka consumer through an epoch change
TEST_SCRIPTS += tests/integration/test_leader_epochs.py
# replication on one node: a replica Fetch from a broker that is no replica
# is refused, acks=all and acks=1 answer as before, the scrape's ISR
TEST_SCRIPTS += tests/integration/test_replication.py
# Kafka's rules at the edges over raw frames (issue 17): reserved names,
# DeleteRecords offsets, CreateTopics counts, unimplemented listener
# protocols, illegal names in Metadata, Fetch max_bytes, ListGroups v4
TEST_SCRIPTS += tests/integration/test_kafka_rules.py
# SSL listeners beside PLAINTEXT ones: kcat, kafka-python, confluent-kafka
# with mutual TLS, openssl s_client refused TLS 1.0/1.1, a client of another
# CA refused, SIGHUP reloading the certificate (certificates made by the test)
TEST_SCRIPTS += tests/integration/test_tls.py
# a listener's keystore and truststore changed at run time, as Kafka's dynamic
# listener configs (IncrementalAlterConfigs on the node's broker resource): the
# new CA's clients served and the old one's refused, files that do not load
# refused naming the key, kept over a restart, the password never shown; an
# SSL inter-broker listener rotated node by node in a 3-node cluster (~25 s)
TEST_SCRIPTS += tests/integration/test_tls_dynamic.py
# SASL listeners (issue 21): PLAIN and SCRAM with librdkafka, kcat, kafka-python
# and kafkajs, the refusals before authentication, SCRAM users through the
# metadata log (a 3-node cluster)
TEST_SCRIPTS += tests/integration/test_sasl.py
# ACLs (issue 21): CreateAcls, DescribeAcls, DeleteAcls through the metadata
# log; the authorizer with SCRAM users and librdkafka; a 3-node cluster with it
# (about 16 s)
TEST_SCRIPTS += tests/integration/test_acls.py
# configuration errors: exit 2 naming the key, nothing leaked (the sanitizer build);
# a 3-node cluster of the sanitizer build stopped cleanly, nothing leaked (about 10 s)
TEST_SCRIPTS += tests/integration/test_config_exits.py
# the service manager's protocol (Type=notify units): STATUS, READY once the
# port accepts, RELOADING/READY around SIGHUP, STOPPING on SIGTERM, an
# abstract socket, an unreachable one said once; sluiced --version (~3 s)
TEST_SCRIPTS += tests/integration/test_sd_notify.py
# brokers over a SASL_SSL inter-broker listener (SCRAM, certificates checked):
# replication, a wrong password refused (out of the ISRs), plaintext on that
# port refused, transactions' inter-broker requests (about 15 s); make
# itest-interbroker adds a leader's SIGKILL and everything read back, a node
# trusting another CA refused, the broker principal's CLUSTER_ACTION (~45 s)
TEST_SCRIPTS += tests/integration/test_cluster_interbroker.py
# KIP-368 between brokers: followers' fetchers re-authenticate in place to a
# SASL_PLAINTEXT and a SASL_SSL inter-broker listener with 2 s sessions while
# acks=all writes go on, no connection lost (about 30 s)
TEST_SCRIPTS += tests/integration/test_cluster_reauth.py
# an SSL inter-broker listener's certificates rotated: SIGHUP and POST
# /v1/tls/reload reread the broker's client side too (new fetcher connections
# use the new CA, open ones go on, the removed CA refused) (about 10 s)
TEST_SCRIPTS += tests/integration/test_cluster_tls_reload.py
# the metadata quorum and the controller channel over an SSL controller
# listener (mutual TLS): metadata replicated and a leader's SIGKILL over TLS,
# plaintext and certificate-less connections to the controller port answered
# nothing (counted), a node of another CA refused both ways (about 25 s)
TEST_SCRIPTS += tests/integration/test_cluster_quorum_tls.py
# the controller port's bad connections: set-up deadline (silent, half a
# handshake, a stalled ClientHello), the TLS tunnel's error paths and a flood
# of unread FETCH answers bounded (about 60 s)
TEST_SCRIPTS += tests/integration/test_cluster_quorum_port.py
# SASL PLAIN on the controller listener: SASL_PLAINTEXT and SASL_SSL quorums,
# a wrong password never joins, an unauthenticated FETCH gets nothing, a
# broker-only node authenticates (about 60 s)
TEST_SCRIPTS += tests/integration/test_cluster_quorum_sasl.py
# sluicectl --command-config over SASL_SSL (SCRAM, PLAIN) and SSL with a client
# certificate, its refusals; the admin endpoint's HTTP Basic (admin.require.auth)
# (one broker, about 3 s)
TEST_SCRIPTS += tests/integration/test_sluicectl_security.py
# docs/security.md's ten-command guide run as the page has it (one broker,
# about 8 s)
TEST_SCRIPTS += tests/integration/test_security_guide.py
# Kafka's KRaft settings: what Sluice cannot honour is refused, a one-node
# config serves
TEST_SCRIPTS += tests/integration/test_cluster_config.py
# three sluiced processes (scripts/cluster) form one metadata quorum: the
# same brokers and topics on every node, producer id blocks apart, the
# leader killed and replaced, the killed node catching up
TEST_SCRIPTS += tests/integration/test_cluster_quorum.py
# a node that installs a metadata snapshot serves what the records it
# skipped did, without a restart
TEST_SCRIPTS += tests/integration/test_cluster_metadata.py
# metadata.version: a rolling upgrade of a 3-node cluster (one node standing in
# for an older build), UpdateFeatures refused naming it, accepted once it is
# upgraded; ApiVersions v3's features; a new cluster at the highest level
TEST_SCRIPTS += tests/integration/test_features.py
# three nodes, replication factor 3, min.insync.replicas=2: an idempotent
# acks=all producer's 200,000 keyed records through the SIGKILL and restart
# of a leader (every acknowledged record once, per-key order, identical
# copies)
TEST_SCRIPTS += tests/integration/test_cluster_failover.py
# a leader paused (SIGSTOP) past its session is replaced; the Produce
# (acks=all) waiting in its socket is refused after SIGCONT and in no copy
TEST_SCRIPTS += tests/integration/test_cluster_pause.py
# a leader SIGKILLed and back with an empty copy of its partition before its
# session ends gives up its leadership and the ISR until caught up: no
# acknowledged record lost (BROKER_RESTARTED)
TEST_SCRIPTS += tests/integration/test_cluster_restart.py
# a node restarting while its partition's leader moves (the record applied
# between its partitions' opens and its publish, forced with the test knob
# SLUICE_TEST_START_HOLD) follows the new leader: acks=all answered again
TEST_SCRIPTS += tests/integration/test_cluster_restart_roles.py
# sluicectl cluster roll: every broker restarted once through scripts/cluster
# restart while an acks=all producer writes (no acknowledged record lost);
# a failing command, and a broker left down, stop the roll there
TEST_SCRIPTS += tests/integration/test_cluster_roll.py
# a real network partition (scripts/cluster --netns; root, else skipped):
# a leader cut off from the other nodes acknowledges nothing at acks=all
# with min.insync.replicas=2 while the majority elects another; after the
# heal it follows again, every acknowledged record once, in order; with
# the ISR shrunk to the leader first (Jepsen's 2013 order) it refuses
# acks=all at min.insync.replicas=2, and at 1 acknowledges alone and loses
# it after the heal (the test catches that loss)
TEST_SCRIPTS += tests/integration/test_cluster_partition.py
# kafka-python, kcat and kafkajs produce (acks=all) through a leader's
# SIGKILL and read every record back once, in order
TEST_SCRIPTS += tests/integration/test_cluster_clients.py
# the group and transaction coordinators move with their internal
# partitions' leaders: a consumer group and a transactional copier through
# the SIGKILL of the node leading their coordinator partitions (no
# committed offset back, every record copied once, the zombie fenced)
TEST_SCRIPTS += tests/integration/test_cluster_coordinator.py
# DescribeCluster v0-1 over raw frames: the cluster Metadata describes, the
# rack, the authorized operations, the refused endpoint types
TEST_SCRIPTS += tests/integration/test_describe_cluster.py
# ElectLeaders 0-2 over raw frames on one node (nothing to elect: every
# partition led by its preferred replica), the metrics, sluicectl leader elect
TEST_SCRIPTS += tests/integration/test_elections.py
# ElectLeaders sent to a node that is not the active controller (three
# combined nodes; a controller and two broker-only nodes): forwarded to the
# active controller, raw and through sluicectl; the controller gone is a
# retriable error (REQUEST_TIMED_OUT after 30 s)
TEST_SCRIPTS += tests/integration/test_cluster_elect.py
# partition reassignments on three nodes (KIP-455 over raw frames, a move
# under an acks=all producer, a cancel, bad input, the throttle at the
# follower and at the leader, sluicectl partition reassign and broker
# decommission, the followers' log start after DeleteRecords): about 17 s
TEST_SCRIPTS += tests/integration/test_cluster_reassign.py
# two nodes with IPv6 Kafka listeners ([::1]): followers fetch over IPv6,
# acks=all answered, the copies identical: about 7 s
TEST_SCRIPTS += tests/integration/test_cluster_ipv6.py
# recovery with a real broker: clean-stop checkpoints, recovery points after
# SIGKILL, damage in a middle segment, a missing segment, a damaged metadata log
TEST_SCRIPTS += tests/integration/test_recovery_broker.py
# CreateTopics and the rings (10,000 partitions on one shard answered)
# and RLIMIT_NOFILE (refused early; a midway failure leaves nothing); the
# 10,000 partitions' test runs in a child process beside the others
TEST_SCRIPTS += tests/integration/test_fd_budget.py
# compressed batches checked inside (garbage, inner count and offset deltas,
# record lengths, the decompression bound), every codec read back by kcat
TEST_SCRIPTS += tests/integration/test_produce_compressed.py
# the native datagram protocol (dataplane/native/), datagram by datagram
TEST_SCRIPTS += tests/integration/test_native_raw.py
# the admin endpoint: /metrics parsed by prometheus_client under a producer
# and a consumer group, the JSON views, bad requests
TEST_SCRIPTS += tests/integration/test_metrics.py
# the web console: its pages in Debian's chromium (headless, puppeteer-core)
# checked against sluicectl and /metrics, screenshots kept in
# build/test-artifacts/console/; its JSON endpoints' bad requests; the live
# stream's samples and its viewer limit
TEST_SCRIPTS += tests/integration/test_console.py
# connections and request memory: the descriptor limit (accept back-off),
# large frames' memory given back, max.connections(.per.ip),
# connections.max.idle.ms, queued.max.request.bytes
TEST_SCRIPTS += tests/integration/test_conns.py

# kafkajs is installed from the committed package-lock.json on first use (and
# again whenever the lock changes), so `make test` on a fresh clone needs no
# manual npm step. The runner is started by the `test` recipe, hence the
# stamp is a prerequisite of `test-bins` (what `test` builds first).
KAFKAJS_DIR := tests/integration/kafkajs
KAFKAJS_STAMP := $(KAFKAJS_DIR)/node_modules/.stamp

$(KAFKAJS_STAMP): $(KAFKAJS_DIR)/package-lock.json $(KAFKAJS_DIR)/package.json | $(SETUP_STAMP)
	$(Q)cd $(KAFKAJS_DIR) && npm ci --no-audit --no-fund
	$(Q)touch $@

test-bins: $(KAFKAJS_STAMP)

# puppeteer-core for the console's browser test, the same way
CONSOLE_CHECK_DIR := tests/integration/console
CONSOLE_CHECK_STAMP := $(CONSOLE_CHECK_DIR)/node_modules/.stamp

$(CONSOLE_CHECK_STAMP): $(CONSOLE_CHECK_DIR)/package-lock.json $(CONSOLE_CHECK_DIR)/package.json | $(SETUP_STAMP)
	$(Q)cd $(CONSOLE_CHECK_DIR) && npm ci --no-audit --no-fund --loglevel=error
	$(Q)touch $@

test-bins: $(CONSOLE_CHECK_STAMP)
# sluicectl (build/sluicectl) against a real broker: every command, table and
# JSON output, exit codes, error messages; cross-checked with kcat -L,
# confluent-kafka and kafka-python
TEST_SCRIPTS += tests/integration/test_sluicectl.py
# topic configs with real clients: compression.type recompression (stored
# codec read from raw Fetch, records read back by librdkafka and
# kafka-python), ignored and refused Kafka keys, broker-resource
# AlterConfigs / IncrementalAlterConfigs changing the cluster-wide defaults
# at run time and across a restart
TEST_SCRIPTS += tests/integration/test_topic_configs.py
# The metadata log on the Raft quorum: every kind of change after a restart
# and a SIGKILL, producer ids across restarts, the in-place upgrade of an
# older data directory (and its redo), another node.id refused
TEST_SCRIPTS += tests/integration/test_metadata_quorum.py
# sluicectl drill (tools/sluicefault/drill.py) on three nodes: leader-loss
# and consumer-crash-after-commit hold, a drill whose promise is broken (one
# replica, unclean elections, a lost disk) exits 1 naming the lost records,
# Ctrl-C mid-fault heals and cleans up, a bad drill file and a cluster with
# foreign topics are refused: about 50 s
TEST_SCRIPTS += tests/integration/test_drill.py
# sluicectl host check (docs/host-check.md): this machine, and fake /proc and
# /sys trees (--root) where each check is seen to fire (governor, idle states,
# isolated cores, NIC queues and IRQs, hugepages, memlock, IOMMU, write cache
# and FUA against log.durability, nobarrier, tmpfs, THP, swappiness, fd
# limit, clock, the profile); no broker: about 4 s
TEST_SCRIPTS += tests/integration/test_host_check.py

.PHONY: itest-interbroker
itest-interbroker: all
	$(Q)SLUICE_INTERBROKER_FAILOVER=1 /usr/bin/python3 tests/integration/test_cluster_interbroker.py
