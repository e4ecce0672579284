#!/usr/bin/python3
"""How nodes follow the metadata log beyond record by record, against real
sluiced processes (scripts/cluster) and real Kafka clients.

A broker-only node paused (SIGSTOP) while more records are written than
the voters keep for it catches up by a snapshot once it runs again, and
serves at once, without a restart, what the records it skipped did: a
topic created meanwhile opens on it (it leads one partition and follows
the other: kafka-python produces to both with acks=all and reads them
back, and its copy of the other is the leader's), a topic deleted
meanwhile is retired and its directories removed. The voters keep 8
records here (SLUICE_TEST_METADATA_KEEP, a test knob: docs/cluster.md)
instead of 4,096."""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, test  # noqa: E402
from cluster import Cluster, create_topic, partitions, same_logs, until  # noqa: E402


def led(bootstrap, topic, nparts):
    m = partitions(bootstrap, topic)
    return m if m and len(m) == nparts and all(v[0] >= 0 for v in m.values()) else None


@test
def a_paused_broker_catches_up_by_a_snapshot_and_serves_the_topics_it_skipped():
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient

    # the session outlasts the pause: node 3 stays unfenced, so the topic
    # made while it is paused is placed on it too
    with Cluster(1, brokers=2, sets=["broker.session.timeout.ms=60000"],
                 env={"SLUICE_TEST_METADATA_KEEP": "8"}) as c:
        b2 = c.addr(2)
        create_topic(b2, "gone", 2, 2)
        until("gone led", lambda: led(b2, "gone", 2))
        gone = [os.path.join(c.data_dir(3), "gone-%d" % p) for p in range(2)]
        until("node 3 hosts gone", lambda: all(os.path.isdir(d) for d in gone))
        assert c.metric(3, "sluice_controller_metadata_snapshots_installed_total") == 0

        os.kill(c.pid(3), signal.SIGSTOP)
        try:
            # asked of node 2 only: node 3 answers nothing while paused
            admin = KafkaAdminClient(bootstrap_servers=b2, request_timeout_ms=30000)
            try:
                admin.delete_topics(["gone"])
            finally:
                admin.close()
            create_topic(b2, "fresh", 2, 2)
            for i in range(6):   # more records than the 8 the voter keeps
                create_topic(b2, "filler%d" % i, 1, 1)
            fresh = until("fresh led", lambda: led(b2, "fresh", 2))
        finally:
            os.kill(c.pid(3), signal.SIGCONT)

        until("node 3 installed a snapshot",
              lambda: c.metric(3, "sluice_controller_metadata_snapshots_installed_total") >= 1)
        assert sorted(v[0] for v in fresh.values()) == [2, 3], ("one partition led by each broker", fresh)
        assert all(v[1] == [2, 3] for v in fresh.values()), fresh
        # the deleted topic leaves node 3 as a DeleteTopics there would
        until("gone's directories removed on node 3", lambda: not any(os.path.exists(d) for d in gone))
        # the new topic is served on node 3 at once: it leads one
        # partition, follows the other (acks=all needs its copy)
        prod = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all", request_timeout_ms=20000,
                             max_block_ms=30000)
        for i in range(10):
            for p in range(2):
                prod.send("fresh", b"f%d-%d" % (p, i), partition=p).get(timeout=30)
        prod.close()
        cons = KafkaConsumer(bootstrap_servers=c.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=20000)
        cons.assign([TopicPartition("fresh", 0), TopicPartition("fresh", 1)])
        got = []
        for m in cons:
            got.append(m.value)
            if len(got) == 20:
                break
        cons.close()
        assert sorted(got) == sorted(b"f%d-%d" % (p, i) for p in range(2) for i in range(10)), got
        same_logs(c, "fresh", 2, (2, 3))
        assert "installed a metadata snapshot" in c.log(3), c.log(3)[-2000:]
        for pid in (c.pid(2), c.pid(3)):
            os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    main("cluster_metadata")
