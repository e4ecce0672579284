#!/usr/bin/python3
"""Followers re-authenticate to their leaders in place (KIP-368 between
brokers; docs/replication.md#security-between-brokers, docs/security.md).

Three nodes (scripts/cluster --listener INTERNAL), each with a PLAINTEXT
listener (the clients' and the cluster script's) and INTERNAL, the
inter-broker listener, with SASL and a session lifetime of 2 s there only
(listener.name.internal.connections.max.reauth.ms=2000, the listener-wide
key): every follower's fetcher connection to a leader must authenticate
again every ~1.7-1.9 s, on the same connection, between its fetches. A
topic of 3 partitions, 3 replicas, min.insync.replicas=3 (acks=all needs
every follower in step) is written acks=all while each node counts at
least 4 re-authentications (about 8 s of sessions); then:
- every record was acknowledged, none failed;
- no fetcher connection was lost (sluice_replication_reconnects_total 0
  on every node), no handshake failed, no re-authentication failed;
- no leader closed a connection for its expired session
  (sluice_sasl_expired_closed_total 0), and the leaders counted the
  re-authentications (sluice_sasl_reauthentications_total);
- every ISR still full;
- then transactions over the three leaders commit while the control
  threads' inter-broker connections (WriteTxnMarkers, AddPartitionsToTxn
  VerifyOnly) re-authenticate at least 3 times in all, none failing, no
  session expiring.

Two cases: SASL_PLAINTEXT with SCRAM-SHA-256, SASL_SSL with SCRAM-SHA-512
(the re-authentication through the TLS session's records). About 14 s
each.

On the code before (the fetchers ignored SessionLifetimeMs) the leaders
close each fetcher connection at its first Fetch after 2 s: the
reconnects and expired-closed counters grow and no re-authentication is
counted (the first assertion fails, checked); with the fetchers' and
without the inter-broker client's re-authentication the leaders close
its connections for their expired sessions (fails, checked).

Run: /usr/bin/python3 tests/integration/test_cluster_reauth.py [case]
"""

import atexit
import gc
import os
import shutil
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, make_tls_certs, temp_dir, test  # noqa: E402
from cluster import Cluster, until  # noqa: E402

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "ra"
LIFETIME_MS = 2000
ROUNDS = 4      # re-authentications each node counts while producing
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="broker" password="broker-secret";')


def settings(protocol, mech, certs=None):
    m = mech.lower()
    s = ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:%s,CONTROLLER:PLAINTEXT" % protocol,
         "inter.broker.listener.name=INTERNAL",
         "sasl.enabled.mechanisms=" + mech,
         "sasl.mechanism.inter.broker.protocol=" + mech,
         "listener.name.internal.%s.sasl.jaas.config=%s" % (m, JAAS),
         "listener.name.internal.connections.max.reauth.ms=%d" % LIFETIME_MS,
         "replica.lag.time.max.ms=2000", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500",
         "offsets.topic.num.partitions=3", "transaction.state.log.num.partitions=3"]
    if certs:
        s += ["ssl.keystore.location=" + os.path.join(certs, "broker.keystore.pem"),
              "ssl.truststore.location=" + os.path.join(certs, "ca.pem")]
    return s


def first_args(mech):
    return ["--add-scram", "%s=[name=broker,password=broker-secret]" % mech]


def parts(c):
    md = AdminClient({"bootstrap.servers": c.bootstrap}).list_topics(TOPIC, timeout=20)
    t = md.topics.get(TOPIC)
    if t is None or t.error is not None or not t.partitions:
        return None
    return {p: (m.leader, sorted(m.isrs)) for p, m in t.partitions.items()}


def isrs_full(c):
    until("3 replicas in every ISR of " + TOPIC,
          lambda: (lambda m: m and all(len(v[1]) == 3 for v in m.values()))(parts(c)))


def total(c, node, name):
    """A family's value summed over its lines on node (labels after the name)."""
    import urllib.request
    import re
    props = open(os.path.join(c.dir, "n%d" % node, "server.properties")).read()
    admin = re.search(r"admin.listen=(\S+)", props).group(1)
    body = urllib.request.urlopen("http://%s/metrics" % admin, timeout=30).read().decode()
    v = 0.0
    for line in body.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            v += float(line.rsplit(" ", 1)[1])
    return v


def reauths(c, node, result):
    return total(c, node, 'sluice_replication_reauthentications_total{shard="0",result="%s"}' % result)


def run_case(protocol, mech, certs=None):
    with Cluster(3, listener="INTERNAL", sets=settings(protocol, mech, certs), first_args=first_args(mech)) as c:
        a = AdminClient({"bootstrap.servers": c.bootstrap})
        a.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "3"})],
                        operation_timeout=30)[TOPIC].result(60)
        isrs_full(c)
        before = {n: reauths(c, n, "ok") for n in (1, 2, 3)}
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                      "message.timeout.ms": 60000, "linger.ms": 5})
        errs, acked = [], [0]

        def delivered(e, m):
            if e:
                errs.append(str(e))
            else:
                acked[0] += 1
        sent = [0]

        def write_and_count():
            # a round of acks=all records, then: has every node
            # re-authenticated ROUNDS times since the start?
            for _ in range(200):
                p.produce(TOPIC, key=str(sent[0]).encode(), value=b"v%d" % sent[0], on_delivery=delivered)
                sent[0] += 1
                p.poll(0)
            p.flush(60)
            assert not errs, errs[:3]
            # (a connection lost ends the wait: the checks below say what)
            return all(reauths(c, n, "ok") - before[n] >= ROUNDS for n in (1, 2, 3)) or any(
                total(c, n, "sluice_replication_reconnects_total") for n in (1, 2, 3))
        until("%d re-authentications on every node while writing acks=all" % ROUNDS, write_and_count, timeout=90,
              every=0.2)
        p.flush(60)
        assert errs == [] and acked[0] == sent[0], (errs[:3], acked[0], sent[0])

        # transactions over the three leaders: the control threads'
        # inter-broker requests (WriteTxnMarkers, AddPartitionsToTxn
        # VerifyOnly) on INTERNAL re-authenticate too
        tp = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "ra-txn", "acks": "all"})
        tp.init_transactions(60)
        committed = [0]

        def peers_reauth():
            return sum(total(c, n, 'sluice_interbroker_reauthentications_total{result="ok"}') for n in (1, 2, 3))

        def txns():
            for _ in range(5):
                tp.begin_transaction()
                for q in range(3):
                    tp.produce(TOPIC, partition=q, value=b"t%d" % committed[0])
                tp.commit_transaction(60)
                committed[0] += 1
            return peers_reauth() >= 3 or any(
                total(c, n, "sluice_sasl_expired_closed_total") for n in (1, 2, 3))
        until("3 re-authentications of inter-broker requests' connections while transactions commit", txns,
              timeout=90, every=0.05)
        for n in (1, 2, 3):
            log = c.log(n)[-3000:]
            assert total(c, n, "sluice_replication_reconnects_total") == 0, (n, "fetchers reconnected", log)
            assert total(c, n, "sluice_replication_auth_failures_total") == 0, (n, log)
            assert reauths(c, n, "failed") == 0, (n, log)
            assert total(c, n, "sluice_sasl_expired_closed_total") == 0, (n, "a session expired", log)
            assert total(c, n, "sluice_sasl_reauthentications_total") > 0, n
            assert total(c, n, 'sluice_interbroker_reauthentications_total{result="failed"}') == 0, (n, log)
        isrs_full(c)
        print("  %d records acks=all, %d transactions; re-authentications ok: fetchers %s, inter-broker "
              "requests %d" % (sent[0], committed[0], {n: int(reauths(c, n, "ok")) for n in (1, 2, 3)},
                               peers_reauth()), flush=True)
        p = a = tp = None  # the clients gone before the nodes (no reconnect noise; not del: closures name them)
        gc.collect()
        for pid in [c.pid(n) for n in (1, 2, 3)]:
            if pid:
                os.kill(pid, signal.SIGKILL)


@test
def fetchers_reauthenticate_over_sasl_plaintext():
    run_case("SASL_PLAINTEXT", "SCRAM-SHA-256")


@test
def fetchers_reauthenticate_over_sasl_ssl():
    certs = make_tls_certs(temp_dir("sluice-reauth-certs-"))
    atexit.register(shutil.rmtree, certs, True)
    run_case("SASL_SSL", "SCRAM-SHA-512", certs)


if __name__ == "__main__":
    main("test_cluster_reauth")
