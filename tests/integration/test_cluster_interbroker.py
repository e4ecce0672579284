#!/usr/bin/python3
"""Brokers reach each other over a SASL_SSL listener (issue 21;
docs/security.md#between-brokers).

Three nodes (scripts/cluster --listener INTERNAL), each with a PLAINTEXT
listener (the cluster script's readiness checks) and INTERNAL, a SASL_SSL
listener with SCRAM-SHA-512 named by inter.broker.listener.name: the
followers' replica fetchers and the inter-broker requests authenticate to
it as User:broker (made by `sluiced --add-scram` at the first start, with
admin), checking the other broker's certificate against the CA. The
authorizer is on, with User:broker and User:admin in super.users (a
follower's Fetch needs CLUSTER_ACTION on the cluster). The clients speak
SASL_SSL as admin, but for the check of the PLAINTEXT listener.

One cluster, several checks:
- each broker registers an endpoint per listener (REGISTER_BROKER_ENDPOINTS,
  docs/metadata-log.md): Metadata on the PLAINTEXT listener lists every
  broker at its PLAINTEXT address, on the SASL_SSL one at its SASL_SSL
  address; a producer bootstrapped on PLAINTEXT (User:ANONYMOUS, allowed
  to write one topic) writes acks=all to partitions led by every node;
- node 3 starts with a wrong inter-broker password: its fetchers' SASL
  is refused (logged with the reason, counted, retried), it leaves the
  ISRs, acks=all to a topic of min.insync.replicas=3 fails; nodes 1 and
  2 replicate a topic of 3 partitions, 3 replicas, min.insync.replicas=2
  (acks=all acknowledged), their fetchers' bytes through OpenSSL
  (replication_tls_bytes_in_total), no handshake failed;
- plaintext on the INTERNAL port is no Kafka conversation (the TLS
  handshake refuses it);
- node 3 restarted with the right password catches up and rejoins every
  ISR; the copies are the same bytes;
- a transaction over partitions led by several nodes commits
  (AddPartitionsToTxn VerifyOnly and WriteTxnMarkers between brokers over
  the SASL_SSL listener: control/peer_kafka.c; without its session the
  commit times out);
- with SLUICE_INTERBROKER_FAILOVER=1 (make itest-interbroker): the leader
  of partition 0 SIGKILLed, acks=all goes on, a consumer reads every record
  once, the node restarted rejoins every ISR with the same bytes; node 2
  restarted trusting another CA: its fetchers' TLS handshakes fail
  ("certificate verify failed" logged, counted); and a cluster of its own
  without User:broker in super.users: the followers' Fetches refused
  (CLUSTER_ACTION), the ISRs down to their leaders, acks=all not answered.

About 17 s (about 47 s with SLUICE_INTERBROKER_FAILOVER=1).

On the code before (the inter-broker listener had to be PLAINTEXT) the
nodes exit 2 at start ("replication over SASL is not implemented yet").
Before the endpoints, Metadata on PLAINTEXT told of the other brokers at
their SASL_SSL address, and the PLAINTEXT producer failed.

Run: /usr/bin/python3 tests/integration/test_cluster_interbroker.py
"""

import atexit
import os
import re
import shutil
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, make_tls_certs, skip, temp_dir, test  # noqa: E402
from cluster import Cluster, log_batches, until  # noqa: E402

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka.admin import ACL, ACLOperation, ACLPermissionType, KafkaAdminClient, ResourcePattern, ResourceType  # noqa: E402

TOPIC = "ib"
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="broker" password="%s";')


def settings(certs):
    return ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=INTERNAL",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config=" + JAAS % "broker-secret",
            "ssl.keystore.location=" + os.path.join(certs, "broker.keystore.pem"),
            "ssl.truststore.location=" + os.path.join(certs, "ca.pem"),
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:broker;User:admin",
            "replica.lag.time.max.ms=2000", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500",
            "log.segment.bytes=4194304", "offsets.topic.num.partitions=3", "transaction.state.log.num.partitions=3"]


FIRST = ["--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-secret]",
         "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"]


def conf(c, certs, **kw):
    d = {"bootstrap.servers": ",".join(c.listener_addr(n) for n in (1, 2, 3)),
         "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
         "sasl.username": "admin", "sasl.password": "admin-secret",
         "ssl.ca.location": os.path.join(certs, "ca.pem")}
    d.update(kw)
    return d


def parts(c, certs, topic):
    md = AdminClient(conf(c, certs)).list_topics(topic, timeout=20)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return {p: (m.leader, sorted(m.isrs)) for p, m in t.partitions.items()}


def isrs_full(c, certs, topic, n=3):
    until("%d replicas in every ISR of %s" % (n, topic),
          lambda: (lambda m: m and all(len(v[1]) == n for v in m.values()))(parts(c, certs, topic)))


def produce(c, certs, topic, start, n, timeout_ms=30000):
    """n acks=all records numbered from start; the errors."""
    p = Producer(conf(c, certs, acks="all", **{"enable.idempotence": True, "message.timeout.ms": timeout_ms}))
    errs = []
    for i in range(start, start + n):
        p.produce(topic, key=str(i).encode(), value=b"v%d" % i,
                  on_delivery=lambda e, m: e and errs.append(str(e)))
        p.poll(0)
    p.flush(timeout_ms / 1000 + 30)
    return errs


def consume_all(c, certs, topic, nparts, want):
    cons = Consumer(conf(c, certs, **{"group.id": "ib-check", "auto.offset.reset": "earliest",
                                      "enable.auto.commit": False}))
    cons.assign([TopicPartition(topic, p, 0) for p in range(nparts)])
    got = []
    end = time.monotonic() + 60
    while len(got) < want and time.monotonic() < end:
        for m in cons.consume(1000, timeout=1):
            if not m.error() and m.value().startswith(b"v"):   # not the transaction's
                got.append(m.value())
    cons.close()
    return got


def metric(c, node, name):
    return c.metric(node, name)


def same_logs(c, topic, nparts):
    for part in range(nparts):
        until("partition %d the same bytes on every node" % part,
              lambda: (lambda logs: logs[0] and all(x == logs[0] for x in logs))(
                  [log_batches(os.path.join(c.data_dir(n), "%s-%d" % (topic, part))) for n in (1, 2, 3)]),
              timeout=30)


def set_password(c, node, pw):
    path = os.path.join(c.dir, "n%d" % node, "server.properties")
    with open(path) as f:
        props = f.read()
    props = re.sub(r'(username="broker" password=")[^"]*"', lambda m: m.group(1) + pw + '"', props)
    with open(path, "w") as f:
        f.write(props)


def txn_commit(c, certs, topic, nparts):
    p = Producer(conf(c, certs, **{"transactional.id": "ib-txn", "acks": "all"}))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, partition=i % nparts, value=b"t%d" % i)
    p.commit_transaction(30)
    cons = Consumer(conf(c, certs, **{"group.id": "ib-txn-check", "isolation.level": "read_committed",
                                      "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    cons.assign([TopicPartition(topic, q, 0) for q in range(nparts)])
    got = []
    end = time.monotonic() + 30
    while len(got) < 30 and time.monotonic() < end:
        got += [m.value() for m in cons.consume(100, timeout=1) if not m.error() and m.value().startswith(b"t")]
    cons.close()
    return got


def plaintext_refused(addr):
    """A plaintext ApiVersions on a TLS port: what comes back (a TLS alert
    or nothing), never a Kafka answer."""
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    body = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", 4) + b"test"
    s.sendall(struct.pack(">i", len(body)) + body)
    data = b""
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
    except OSError:
        pass
    s.close()
    return data


def brokers_seen(bootstrap_conf):
    md = AdminClient(bootstrap_conf).list_topics(timeout=20)
    return {n: "%s:%d" % (b.host, b.port) for n, b in md.brokers.items()}


def clients_told_their_listener(c, certs):
    """Metadata answers with each broker's endpoint for the listener the
    request came in on; a PLAINTEXT producer reaches every leader."""
    plain = {"bootstrap.servers": c.addr(1)}
    want = {n: c.addr(n) for n in (1, 2, 3)}
    until("every broker at its PLAINTEXT address", lambda: brokers_seen(plain) == want)
    assert brokers_seen(conf(c, certs)) == {n: c.listener_addr(n) for n in (1, 2, 3)}
    a = AdminClient(conf(c, certs))
    a.create_topics([NewTopic("ibp", 3, replica_assignment=[[1], [2], [3]])], operation_timeout=30)["ibp"].result(60)
    # (Debian's confluent-kafka 1.7 has no ACL calls)
    ka = KafkaAdminClient(bootstrap_servers=c.listener_addr(1), security_protocol="SASL_SSL",
                          sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="admin",
                          sasl_plain_password="admin-secret", ssl_cafile=os.path.join(certs, "ca.pem"),
                          ssl_check_hostname=False)
    r = ka.create_acls([ACL("User:ANONYMOUS", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                            ResourcePattern(ResourceType.TOPIC, "ibp"))])
    ka.close()
    assert not r["failed"], r

    def write():
        p = Producer(dict(plain, acks="all", **{"message.timeout.ms": 10000}))
        done = []
        for i in range(30):
            p.produce("ibp", partition=i % 3, value=b"p%d" % i,
                      on_delivery=lambda e, m: done.append((e, m.partition())))
        p.flush(30)
        if any(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e, _ in done):
            return False    # the ACL not on every node yet: again
        assert len(done) == 30 and all(e is None for e, _ in done), done[:3]
        return sorted({q for _, q in done}) == [0, 1, 2]
    until("a PLAINTEXT producer writes acks=all to every node", write, timeout=30)


@test
def replication_and_peers_over_sasl_ssl():
    certs = make_tls_certs(temp_dir("sluice-ib-certs-"))
    atexit.register(shutil.rmtree, certs, True)
    t0 = time.monotonic()

    def step(what):
        print("  %5.1f s  %s" % (time.monotonic() - t0, what), flush=True)
    # node 3 starts with a wrong inter-broker password
    wrong = [(3, "listener.name.internal.scram-sha-512.sasl.jaas.config=" + JAAS % "wrong-secret")]
    with Cluster(3, listener="INTERNAL", sets=settings(certs), node_sets=wrong, first_args=FIRST) as c:
        step("cluster up")
        clients_told_their_listener(c, certs)
        step("Metadata by listener; a PLAINTEXT producer writes to every node")
        a = AdminClient(conf(c, certs))
        fs = a.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"}),
                              NewTopic("ib3", 1, 3, config={"min.insync.replicas": "3"})], operation_timeout=30)
        for f in fs.values():
            f.result(60)

        # node 3 cannot authenticate: its fetchers are refused (logged,
        # counted, retried), it leaves the ISRs, acks=all at
        # min.insync.replicas=3 fails; the others replicate
        until("node 3's fetchers refused", lambda: metric(c, 3, "sluice_replication_auth_failures_total") > 0)
        until("node 3 out of the ISR of ib3", lambda: (lambda m: m and 3 not in m[0][1])(parts(c, certs, "ib3")))
        assert "SASL authentication as broker refused" in c.log(3), c.log(3)[-2000:]
        assert produce(c, certs, TOPIC, 0, 3000) == []
        errs = produce(c, certs, "ib3", 0, 5, timeout_ms=2000)
        assert len(errs) == 5, errs
        for n in (1, 2):
            assert metric(c, n, "sluice_replication_tls_bytes_in_total") > 0
            assert metric(c, n, "sluice_replication_auth_failures_total") == 0, c.log(n)[-2000:]
        step("wrong password on node 3: out of the ISRs, acks=all refused; nodes 1 and 2 replicate")

        # plaintext on the inter-broker port: no Kafka answer
        data = plaintext_refused(c.listener_addr(1))
        assert not data or data[0] == 0x15, data[:16]   # nothing, or a TLS alert record

        # the right password: node 3 catches up and rejoins
        set_password(c, 3, "broker-secret")
        c.restart(3)
        isrs_full(c, certs, TOPIC)
        isrs_full(c, certs, "ib3")
        assert produce(c, certs, "ib3", 5, 5) == []
        same_logs(c, TOPIC, 3)
        step("right password: node 3 back in the ISRs, the same bytes")

        # transactions: AddPartitionsToTxn and WriteTxnMarkers between
        # brokers over INTERNAL
        got = txn_commit(c, certs, TOPIC, 3)
        assert sorted(got) == sorted(b"t%d" % i for i in range(30)), got
        step("transaction committed")

        if os.environ.get("SLUICE_INTERBROKER_FAILOVER"):
            # the leader of partition 0 killed: acks=all goes on, all is read
            victim = parts(c, certs, TOPIC)[0][0]
            c.kill(victim)
            until("partition 0 led by another node",
                  lambda: (lambda m: m and m[0][0] not in (-1, victim))(parts(c, certs, TOPIC)))
            assert produce(c, certs, TOPIC, 3000, 3000) == []
            got = consume_all(c, certs, TOPIC, 3, 6000)
            assert sorted(got) == sorted(b"v%d" % i for i in range(6000)), len(got)
            c.restart(victim)
            isrs_full(c, certs, TOPIC)
            same_logs(c, TOPIC, 3)
            step("leader killed: failover, everything read, the node back in sync")

            # node 2 trusting another CA: its fetchers' TLS handshakes fail
            # (the reason logged, counted, retried)
            other = make_tls_certs(temp_dir("sluice-ib-other-ca-"))
            atexit.register(shutil.rmtree, other, True)
            path = os.path.join(c.dir, "n2", "server.properties")
            with open(path) as f:
                props = f.read().replace(os.path.join(certs, "ca.pem"), os.path.join(other, "ca.pem"))
            with open(path, "w") as f:
                f.write(props)
            c.restart(2)
            until("node 2's fetchers refused", lambda: metric(c, 2, "sluice_replication_auth_failures_total") > 0)
            until("the reason logged", lambda: "certificate verify failed" in c.log(2))
            step("another CA on node 2: its TLS handshakes fail, logged")
        # the test is over: SIGKILL all at once, no controlled shutdown to wait for
        for pid in [c.pid(n) for n in (1, 2, 3)]:
            if pid:
                os.kill(pid, signal.SIGKILL)
    step("closed")


@test
def the_brokers_principal_needs_cluster_action():
    """(make itest-interbroker) Without User:broker in super.users the
    followers' Fetches are refused CLUSTER_AUTHORIZATION_FAILED (the
    authorizer checks the SASL principal): the ISRs shrink to the leaders
    and acks=all at min.insync.replicas=2 is never answered."""
    if not os.environ.get("SLUICE_INTERBROKER_FAILOVER"):
        skip("make itest-interbroker runs it (a cluster of its own)")
    certs = make_tls_certs(temp_dir("sluice-ib-certs-"))
    atexit.register(shutil.rmtree, certs, True)
    sets = [s if not s.startswith("super.users=") else "super.users=User:admin" for s in settings(certs)]
    with Cluster(3, listener="INTERNAL", sets=sets, first_args=FIRST) as c:
        a = AdminClient(conf(c, certs))
        a.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[TOPIC].result(60)
        until("every ISR down to its leader", lambda: (lambda m: m and all(len(v[1]) == 1 for v in m.values()))(
            parts(c, certs, TOPIC)))
        assert len(produce(c, certs, TOPIC, 0, 5, timeout_ms=3000)) == 5
        assert all(metric(c, n, "sluice_replication_fetch_errors_total") > 0 for n in (1, 2, 3))
        assert all(metric(c, n, "sluice_replication_auth_failures_total") == 0 for n in (1, 2, 3))


if __name__ == "__main__":
    main("test_cluster_interbroker")
