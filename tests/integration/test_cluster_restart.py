#!/usr/bin/python3
"""A leader that comes back with an empty log before its session ends
loses no acknowledged record (docs/cluster.md#leader-elections; the fault
drills' finding, docs/drills.md).

Three sluiced processes on loopback, one partition with 3 replicas,
min.insync.replicas=2 and broker.session.timeout.ms=20000 (so the node is
back long before the controller would fence it). An idempotent acks=all
producer writes keyed records; the partition's leader is SIGKILLed, its
copy of the partition removed (a replaced disk) and the node restarted at
once; the producer goes on. A restarted broker (a new registration) gives
its leadership to another in-sync replica and leaves the ISR
(BROKER_RESTARTED, docs/metadata-log.md), then catches up and rejoins:
every acknowledged record is read back at the offset it was acknowledged
at, and the three copies end the same bytes. Before, the restarted node
was taken as the leader it was, with its empty log, and the followers cut
theirs to it.

The same cluster holds a second topic of 80 partitions, each led by one
other node with the restarted node its only follower: the restart takes
that node out of those 80 ISRs too, and it must rejoin every one. Its
replica fetcher asked its leader for the first 64 of them (the most a
replica Fetch names) in every request, so the others were never fetched
and never rejoined (the fault matrix's queue/disk-power-cut/3n, where one
node led everything after the power cut; docs/fault-results.md).

Run: /usr/bin/python3 tests/integration/test_cluster_restart.py [test ...]
"""

import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, test  # noqa: E402
from cluster import Cluster, create_topic, partitions, same_logs, until, wait_isrs  # noqa: E402

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "restart"
MANY = "restart-many"
NMANY = 80   # partitions the restarted node follows from one leader: more than a replica Fetch names (64)
KEYS = 50
BEFORE, AFTER = 3000, 3000


def produce(p, acked, errors, start, n):
    def dr(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.value()] = msg.offset()
    for i in range(start, start + n):
        while True:
            try:
                p.produce(TOPIC, partition=0, key=b"k%03d" % (i % KEYS), value=b"v%06d:" % i + b"x" * 60,
                          on_delivery=dr)
                break
            except BufferError:
                p.poll(0.05)
        if i % 500 == 0:
            p.poll(0)


def read_all(bootstrap):
    """{value: offset} of every record of the partition up to its high watermark."""
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart-check", "enable.auto.commit": False,
                     "enable.partition.eof": True})
    _lo, hi = cons.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
    cons.assign([TopicPartition(TOPIC, 0, 0)])
    got = {}
    deadline = time.monotonic() + 60
    while hi and not (got and max(got.values()) + 1 >= hi):
        assert time.monotonic() < deadline, "reading back: %d records of %d" % (len(got), hi)
        for m in cons.consume(1000, 1.0):
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            got[m.value()] = m.offset()
    cons.close()
    return got


@test
def a_leader_back_with_an_empty_log_before_its_session_ends_loses_no_acknowledged_record():
    sets = ["min.insync.replicas=2", "default.replication.factor=3", "broker.session.timeout.ms=20000"]
    with Cluster(3, sets=sets) as c:
        create_topic(c.bootstrap, TOPIC, 1, 3)
        wait_isrs(c.bootstrap, TOPIC, 3)
        acked, errors = {}, []
        p = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000})
        produce(p, acked, errors, 0, BEFORE)
        assert p.flush(60) == 0 and not errors, errors[:3]
        victim = partitions(c.bootstrap, TOPIC)[0][0]
        other = 1 if victim != 1 else 2
        a = AdminClient({"bootstrap.servers": c.bootstrap})
        a.create_topics([NewTopic(MANY, NMANY, replica_assignment=[[other, victim]] * NMANY)],
                        operation_timeout=30)[MANY].result(60)
        wait_isrs(c.bootstrap, MANY, 2)
        c.kill(victim)
        shutil.rmtree(os.path.join(c.data_dir(victim), "%s-0" % TOPIC))   # a replaced disk
        t0 = time.monotonic()
        c.restart(victim)
        print("  node %d (the leader) SIGKILLed after %d acknowledged records, its copy removed, back %.1f s "
              "later (broker.session.timeout.ms=20000)" % (victim, len(acked), time.monotonic() - t0))
        produce(p, acked, errors, BEFORE, AFTER)
        left = p.flush(90)
        assert left == 0, "%d records unanswered" % left
        p = None   # (closed: no reconnecting while the cluster stops)
        leader = partitions(c.bootstrap, TOPIC)[0][0]
        print("  %d acknowledged, %d failed; partition 0 led by node %d" % (len(acked), len(errors), leader))
        until("node %d back in the ISR of all %d partitions it follows from node %d" % (victim, NMANY, other),
              lambda: (lambda m: m and all(v[0] == other and v[2] == sorted([other, victim]) for v in m.values()))(
                  partitions(c.bootstrap, MANY)))
        wait_isrs(c.bootstrap, TOPIC, 3)
        got = read_all(c.bootstrap)
        lost = [v for v in acked if v not in got]
        assert not lost, "%d acknowledged records lost, e.g. %r" % (len(lost), sorted(lost)[:3])
        moved = [(v, acked[v], got[v]) for v in acked if acked[v] != got[v]]
        assert not moved, "acknowledged at one offset, read at another: %r" % moved[:3]
        same_logs(c, TOPIC, 1, (1, 2, 3))


if __name__ == "__main__":
    main("test_cluster_restart")
