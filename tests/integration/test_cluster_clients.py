#!/usr/bin/python3
"""kcat, kafka-python and kafkajs produce and consume through a leader
change (docs/replication.md).

Three nodes, min.insync.replicas=2, broker.session.timeout.ms=4000. For
each client, a topic of one partition with replication factor 3: the
client produces half its records (acks=all), the partition's leader is
killed (SIGKILL), the client produces the other half (its retries find the
successor the controller elected), and every acknowledged record is read
back, in order, once; then the killed node is restarted and rejoins the
ISR before the next client. kafka-python and kcat read back with
themselves; kafkajs's records are read back with kcat.

Run: /usr/bin/python3 tests/integration/test_cluster_clients.py [test ...]
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, test  # noqa: E402
from cluster import Cluster, create_topic, partitions, until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KJS_DIR = os.path.join(HERE, "kafkajs")
NODE = os.environ.get("NODE", "node")
HALF = 500


def in_sync(c, topic):
    ps = partitions(c.bootstrap, topic)
    return ps and ps[0][0] > 0 and len(ps[0][2]) == 3


def new_topic(c, topic):
    create_topic(c.bootstrap, topic, 1, 3)
    until("%s: 3 in sync" % topic, lambda: in_sync(c, topic))
    return partitions(c.bootstrap, topic)[0][0]


def kill_leader(c, topic, leader):
    c.kill(leader)
    survivors = ",".join("127.0.0.1:%d" % c.port(n) for n in (1, 2, 3) if n != leader)
    until("%s: a leader other than %d" % (topic, leader),
          lambda: partitions(survivors, topic)[0][0] not in (-1, leader))
    return survivors


def bring_back(c, topic, leader):
    c.restart(leader)
    until("%s: node %d back in the ISR" % (topic, leader), lambda: in_sync(c, topic), timeout=90)


def kcat_read(bootstrap, topic, n):
    p = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e",
                        "-q", "-f", "%s\\n"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return p.stdout.decode().splitlines()


def want(prefix):
    return ["%s-%d" % (prefix, i) for i in range(2 * HALF)]


@test
def kafka_python_kcat_and_kafkajs_produce_and_consume_through_a_leader_change():
    sets = ["min.insync.replicas=2", "default.replication.factor=3", "broker.session.timeout.ms=4000"]
    with Cluster(3, sets=sets) as c:
        # kafka-python
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        leader = new_topic(c, "kpy")
        prod = KafkaProducer(bootstrap_servers=c.bootstrap.split(","), acks="all", retries=20,
                             retry_backoff_ms=300, request_timeout_ms=30000, max_in_flight_requests_per_connection=1)
        for i in range(HALF):
            prod.send("kpy", value=b"kpy-%d" % i, partition=0).get(timeout=60)
        survivors = kill_leader(c, "kpy", leader)
        for i in range(HALF, 2 * HALF):
            prod.send("kpy", value=b"kpy-%d" % i, partition=0).get(timeout=90)
        prod.close()
        # read up to the partition's end (every acknowledged record, and
        # whatever else is there), not until 10 s pass without a record
        # (consumer_timeout_ms stays the guard against a stalled read)
        cons = KafkaConsumer(bootstrap_servers=survivors.split(","), enable_auto_commit=False,
                             consumer_timeout_ms=10000, auto_offset_reset="earliest")
        tp = TopicPartition("kpy", 0)
        cons.assign([tp])
        end = cons.end_offsets([tp])[tp]
        got = []
        for m in cons:
            got.append(m.value.decode())
            if m.offset + 1 >= end:
                break
        cons.close()
        assert got == want("kpy"), "kafka-python read %d of %d (first wrong: %r)" % (
            len(got), 2 * HALF, next((g for g, w in zip(got, want("kpy")) if g != w), None))
        bring_back(c, "kpy", leader)

        # kcat
        leader = new_topic(c, "kcat")
        for half in (0, 1):
            if half:
                kill_leader(c, "kcat", leader)
            lines = "".join("kcat-%d\n" % i for i in range(half * HALF, (half + 1) * HALF))
            p = subprocess.run(["kcat", "-P", "-b", c.bootstrap, "-t", "kcat", "-p", "0", "-X", "acks=all",
                                "-X", "message.timeout.ms=90000"], input=lines.encode(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=150)
            assert p.returncode == 0, "kcat -P: exit %d: %s" % (p.returncode, p.stderr.decode()[-2000:])
        got = kcat_read(c.bootstrap, "kcat", 2 * HALF)
        assert got == want("kcat"), "kcat read %d of %d" % (len(got), 2 * HALF)
        bring_back(c, "kcat", leader)

        # kafkajs
        leader = new_topic(c, "kjs")
        for half in (0, 1):
            if half:
                kill_leader(c, "kjs", leader)
            p = subprocess.run([NODE, os.path.join(KJS_DIR, "produce_n.js"), c.bootstrap, "kjs", "kjs-%d" % half,
                                str(HALF)], cwd=KJS_DIR, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=150)
            assert p.returncode == 0, "produce_n.js: exit %d: %s" % (p.returncode, p.stderr.decode()[-2000:])
            assert json.loads(p.stdout)["acked"] == HALF
        got = kcat_read(c.bootstrap, "kjs", 2 * HALF)
        assert got == ["kjs-0-%d" % i for i in range(HALF)] + ["kjs-1-%d" % i for i in range(HALF)], \
            "kafkajs's records: read %d of %d" % (len(got), 2 * HALF)


if __name__ == "__main__":
    main("test_cluster_clients")
