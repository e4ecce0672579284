#!/usr/bin/python3
"""The broker's client TLS context (replication and inter-broker requests
over an SSL inter-broker listener) is reread on SIGHUP and POST
/v1/tls/reload, as the listeners' are (issue 21; docs/security.md#between-brokers).

Three nodes (scripts/cluster --listener INTERNAL), INTERNAL an SSL listener
named by inter.broker.listener.name, with its own keystore, truststore and
ssl.client.auth=required through Kafka's per-listener keys
(listener.name.internal.ssl.*), each node its own files. All start with
certificates of the CA "old". The internal topics have one replica, so a
node follows another only for the topics made here, and a replica fetcher
(one per leader followed) is a new connection when its first partition
comes.

- "pre" (leader 1, follower 3) replicates over a connection made with the
  old certificates (on the code before, a session over SSL without SASL
  failed as "out of step" once its handshake was over: node 3 left the
  ISR and acks=all at min.insync.replicas=2 failed);
- nodes 1 and 2 get certificates of the CA "new" and trust only it; node 1
  reloads by POST /v1/tls/reload, node 2 by SIGHUP (both count one client
  reload: sluice_tls_client_reloads_total);
- "pre" goes on: the open connection keeps its session (acks=all at
  min.insync.replicas=2);
- "new" (leader 2, follower 1): node 1's new fetcher connection presents
  its new certificate and checks node 2's against the new CA: node 1 joins
  the ISR, acks=all is acknowledged;
- "old" (leader 3, follower 1): node 3 still presents the old CA's
  certificate, which node 1 no longer trusts: its handshake fails
  ("certificate verify failed" logged, sluice_replication_auth_failures_total
  counted) and the ISR shrinks to node 3 alone.

On the code before (the client context made at start and never reloaded)
node 1's fetcher to node 2 kept the old certificates ("certificate verify
failed" in node 1's log) and acks=all to "new" failed.

About 20 s. Run: /usr/bin/python3 tests/integration/test_cluster_tls_reload.py
"""

import atexit
import os
import re
import shutil
import signal
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, make_ca, make_cert, temp_dir, test  # noqa: E402
from cluster import Cluster, until  # noqa: E402

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def node_files(d, node, ca):
    """Node's keystore and truststore become those of ca (atomic renames)."""
    nd = os.path.join(d, "n%d" % node)
    os.makedirs(nd, exist_ok=True)
    for src, dst in (("%s-broker.keystore.pem" % ca, "keystore.pem"), ("%s.pem" % ca, "trust.pem")):
        shutil.copy(os.path.join(d, src), os.path.join(nd, dst + ".tmp"))
        os.rename(os.path.join(nd, dst + ".tmp"), os.path.join(nd, dst))


def parts(c, topic):
    md = AdminClient({"bootstrap.servers": c.bootstrap}).list_topics(topic, timeout=20)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return {p: (m.leader, sorted(m.isrs)) for p, m in t.partitions.items()}


def produce(c, topic, n, timeout_ms=20000):
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "message.timeout.ms": timeout_ms})
    errs = []
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, on_delivery=lambda e, m: e and errs.append(str(e)))
    p.flush(timeout_ms / 1000 + 30)
    return errs


def admin_addr(c, node):
    props = open(os.path.join(c.dir, "n%d" % node, "server.properties")).read()
    return re.search(r"admin.listen=(\S+)", props).group(1)


@test
def the_inter_broker_client_context_reloads():
    d = temp_dir("sluice-ibtls-certs-")
    atexit.register(shutil.rmtree, d, True)
    for ca in ("old", "new"):
        make_ca(d, ca)
        make_cert(d, ca, ca + "-broker", "/CN=broker-" + ca, "DNS:localhost,IP:127.0.0.1")
    for n in (1, 2, 3):
        node_files(d, n, "old")
    sets = ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=INTERNAL",
            "listener.name.internal.ssl.client.auth=required",
            "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
            "replica.lag.time.max.ms=2000", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500"]
    node_sets = []
    for n in (1, 2, 3):
        node_sets += [(n, "listener.name.internal.ssl.keystore.location=" + os.path.join(d, "n%d" % n, "keystore.pem")),
                      (n, "listener.name.INTERNAL.ssl.truststore.location=" + os.path.join(d, "n%d" % n, "trust.pem"))]
    with Cluster(3, listener="INTERNAL", sets=sets, node_sets=node_sets) as c:
        a = AdminClient({"bootstrap.servers": c.bootstrap})
        a.create_topics([NewTopic("pre", 1, replica_assignment=[[1, 3]], config={"min.insync.replicas": "2"})],
                        operation_timeout=30)["pre"].result(60)
        until("pre: node 3 in the ISR", lambda: parts(c, "pre") == {0: (1, [1, 3])})
        assert produce(c, "pre", 100) == []

        # rotate nodes 1 and 2 to the new CA; node 3 keeps the old
        for n in (1, 2):
            node_files(d, n, "new")
        r = urllib.request.urlopen(urllib.request.Request("http://%s/v1/tls/reload" % admin_addr(c, 1),
                                                          method="POST"), timeout=30)
        assert r.status == 200, r.read()
        os.kill(c.pid(2), signal.SIGHUP)
        until("node 2 reloaded", lambda: "SIGHUP: TLS certificates reloaded" in c.log(2))
        for n in (1, 2):
            assert c.metric(n, "sluice_tls_client_reloads_total") == 1
            assert c.metric(n, "sluice_tls_reloads_total") == 1
        assert c.metric(3, "sluice_tls_client_reloads_total") == 0

        # the open connection (node 3 to node 1, old certificates) goes on
        assert produce(c, "pre", 100) == []
        assert parts(c, "pre") == {0: (1, [1, 3])}

        # a new connection from node 1 to node 2: the new certificates both ways
        failures = c.metric(1, "sluice_replication_auth_failures_total")
        a.create_topics([NewTopic("new", 1, replica_assignment=[[2, 1]], config={"min.insync.replicas": "2"})],
                        operation_timeout=30)["new"].result(60)
        # (a new partition's ISR starts with every replica: acks=all at
        # min.insync.replicas=2 is what shows node 1 fetching)
        assert produce(c, "new", 100) == []
        assert parts(c, "new") == {0: (2, [1, 2])}
        assert c.metric(1, "sluice_replication_auth_failures_total") == failures, c.log(1)[-2000:]

        # a new connection from node 1 to node 3: the old CA is no longer trusted
        a.create_topics([NewTopic("old", 1, replica_assignment=[[3, 1]])], operation_timeout=30)["old"].result(60)
        until("node 1's fetcher to node 3 refused",
              lambda: c.metric(1, "sluice_replication_auth_failures_total") > failures)
        until("the reason logged", lambda: "certificate verify failed" in c.log(1))
        until("old: node 1 out of the ISR", lambda: parts(c, "old") == {0: (3, [3])})
        for pid in [c.pid(n) for n in (1, 2, 3)]:
            if pid:
                os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    main("test_cluster_tls_reload")
