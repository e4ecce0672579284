#!/usr/bin/python3
"""kafka-python 2.0.2 (Debian's python3-kafka) against a real sluiced:
producer and group-less consumer (assign), partitions_for, beginning/end
offsets, offsets_for_times, a long poll woken by a produce, gzip batches, and
the admin client (create_topics / delete_topics, listed by consumer.topics())."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, broker, main, test  # noqa: E402

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError  # noqa: E402

COMMON = dict(api_version_auto_timeout_ms=30000, request_timeout_ms=40000)


def producer(b, **kw):
    return KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", **dict(COMMON, **kw))


def consumer(b, **kw):
    return KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", consumer_timeout_ms=1000, **dict(COMMON, **kw))


def admin(b):
    return KafkaAdminClient(bootstrap_servers=b.bootstrap, **COMMON)


def poll_until(c, want):
    """Poll until `want` records arrived (a condition, under the hang guard);
    returns them in arrival order."""
    got = []
    deadline = time.monotonic() + HANG_GUARD
    while len(got) < want:
        assert time.monotonic() < deadline, "only %d of %d records (hang guard)" % (len(got), want)
        for recs in c.poll(timeout_ms=500).values():
            got.extend(recs)
    return got


@test
def produce_and_consume_with_assign():
    """60 keyed records with headers over 3 partitions; RecordMetadata offsets
    are dense per partition; a group-less consumer (assign) reads each
    partition back in order with keys, values, headers and timestamps."""
    with broker(settings={"num.partitions": 3}) as b:
        p = producer(b)
        sent = {}
        base = 1_650_000_000_000
        futs = []
        for i in range(60):
            part = i % 3
            futs.append((i, part, p.send("kp", key=b"k%d" % i, value=b"value-%d-" % i + bytes(range(256)),
                                         partition=part, headers=[("h", b"%d" % i), ("empty", b"")],
                                         timestamp_ms=base + i)))
        p.flush()
        for i, part, f in futs:
            md = f.get(timeout=HANG_GUARD)
            assert (md.topic, md.partition) == ("kp", part), md
            sent.setdefault(part, []).append((md.offset, i))
        p.close()
        for part, lst in sent.items():
            assert [o for o, _ in lst] == list(range(20)), (part, lst)

        c = consumer(b)
        assert c.partitions_for_topic("kp") == {0, 1, 2}
        tps = [TopicPartition("kp", n) for n in range(3)]
        c.assign(tps)
        c.seek_to_beginning()
        recs = poll_until(c, 60)
        assert len(recs) == 60, len(recs)
        for part in range(3):
            mine = [r for r in recs if r.partition == part]
            assert [r.offset for r in mine] == list(range(20)), part
            for r, (off, i) in zip(mine, sent[part]):
                assert r.key == b"k%d" % i and r.value == b"value-%d-" % i + bytes(range(256)), r
                assert r.headers == [("h", b"%d" % i), ("empty", b"")], r.headers
                assert r.timestamp == base + i and r.timestamp_type == 0, r
        # nothing more: the consumer is at the end of every partition
        assert c.poll(timeout_ms=300) == {}
        assert c.end_offsets(tps) == {tp: 20 for tp in tps}
        assert c.beginning_offsets(tps) == {tp: 0 for tp in tps}
        c.close()


@test
def partitions_for_on_producer_and_consumer():
    """partitions_for/partitions_for_topic: auto-created topics get
    num.partitions, a topic created by the admin client its own count."""
    with broker(settings={"num.partitions": 2}) as b:
        p = producer(b)
        assert p.partitions_for("auto") == {0, 1}
        a = admin(b)
        a.create_topics([NewTopic("five", num_partitions=5, replication_factor=1)])
        assert p.partitions_for("five") == set(range(5))
        c = consumer(b)
        assert c.partitions_for_topic("five") == set(range(5))
        assert c.partitions_for_topic("auto") == {0, 1}
        for cl in (p, c, a):
            cl.close()


@test
def offsets_for_times_and_end_offsets():
    """offsets_for_times gives the first offset whose timestamp is >= the
    target (with that record's timestamp), None past the newest; end offsets
    follow appends."""
    base = 1_600_000_000_000
    with broker() as b:
        p = producer(b)
        stamps = [base + 10 * i for i in range(30)]
        for i, ts in enumerate(stamps):
            p.send("times", value=b"%d" % i, partition=0, timestamp_ms=ts)
            if i % 7 == 0:
                p.flush()  # several batches, several records per batch
        p.flush()
        tp = TopicPartition("times", 0)
        c = consumer(b)
        assert c.end_offsets([tp]) == {tp: 30}
        assert c.beginning_offsets([tp]) == {tp: 0}
        for i, ts in enumerate(stamps):
            for target, want in ((ts, i), (ts - 5, i)):
                r = c.offsets_for_times({tp: target})[tp]
                assert r is not None and (r.offset, r.timestamp) == (want, stamps[want]), (target, r)
        r = c.offsets_for_times({tp: base - 1})[tp]
        assert (r.offset, r.timestamp) == (0, base), r
        assert c.offsets_for_times({tp: stamps[-1] + 1})[tp] is None
        p.send("times", value=b"more", partition=0, timestamp_ms=stamps[-1] + 100).get(timeout=HANG_GUARD)
        assert c.end_offsets([tp]) == {tp: 31}
        r = c.offsets_for_times({tp: stamps[-1] + 1})[tp]
        assert (r.offset, r.timestamp) == (30, stamps[-1] + 100), r
        p.close()
        c.close()


@test
def long_poll_wakes_on_produce():
    """A consumer waiting at the end of the log receives a record produced
    afterwards (Fetch long poll woken by the append), and a gzip batch of
    many records comes back whole."""
    with broker() as b:
        tp = TopicPartition("wake", 0)
        p = producer(b)
        p.partitions_for("wake")  # create it
        c = consumer(b, fetch_max_wait_ms=60000, request_timeout_ms=70000)
        c.assign([tp])
        c.seek_to_end()
        assert c.position(tp) == 0
        assert c.poll(timeout_ms=200) == {}
        p.send("wake", value=b"ping", partition=0).get(timeout=HANG_GUARD)
        recs = poll_until(c, 1)
        assert [(r.offset, r.value) for r in recs] == [(0, b"ping")]
        pz = producer(b, compression_type="gzip", linger_ms=50, batch_size=1 << 20)
        vals = [b"compressible %05d " % i * 20 for i in range(500)]
        for v in vals:
            pz.send("wake", value=v, partition=0)
        pz.flush()
        recs = poll_until(c, 500)
        assert [r.value for r in recs] == vals
        assert [r.offset for r in recs] == list(range(1, 501))
        for cl in (p, pz, c):
            cl.close()


@test
def admin_create_list_delete():
    """create_topics → listed by consumer.topics() with its partitions;
    creating it again → TopicAlreadyExistsError; delete_topics → gone from
    consumer.topics(); deleting it again → UnknownTopicOrPartitionError;
    re-created it starts empty at offset 0."""
    with broker() as b:
        a = admin(b)
        c = consumer(b)
        a.create_topics([NewTopic("adm-a", num_partitions=3, replication_factor=1),
                         NewTopic("adm-b", num_partitions=1, replication_factor=1)])
        assert {"adm-a", "adm-b"} <= c.topics(), c.topics()
        assert c.partitions_for_topic("adm-a") == {0, 1, 2}
        try:
            a.create_topics([NewTopic("adm-a", num_partitions=3, replication_factor=1)])
            raise AssertionError("second create_topics of adm-a succeeded")
        except TopicAlreadyExistsError:
            pass

        p = producer(b)
        for i in range(10):
            p.send("adm-a", value=b"x%d" % i, partition=1)
        p.flush()
        p.close()
        tp = TopicPartition("adm-a", 1)
        assert c.end_offsets([tp]) == {tp: 10}

        a.delete_topics(["adm-a"])
        topics = c.topics()
        assert "adm-a" not in topics and "adm-b" in topics, topics
        try:
            a.delete_topics(["adm-a"])
            raise AssertionError("second delete_topics of adm-a succeeded")
        except UnknownTopicOrPartitionError:
            pass
        a.create_topics([NewTopic("adm-a", num_partitions=2, replication_factor=1)])
        assert c.partitions_for_topic("adm-a") == {0, 1}
        tp = TopicPartition("adm-a", 1)
        assert c.end_offsets([tp]) == {tp: 0}
        assert c.beginning_offsets([tp]) == {tp: 0}
        a.close()
        c.close()


@test
def topics_survive_restart():
    """Topics from the admin client and their records are there after a
    SIGKILL and restart. (This test found the recovery bug that could hand
    a partition another thread's descriptor with 2 shards; see
    tests/unit/test_recovery.c leftover_prepared_segment_never_replaces_data.)"""
    with broker() as b:
        a = admin(b)
        a.create_topics([NewTopic("durable", num_partitions=4, replication_factor=1)])
        a.close()
        p = producer(b)
        for part in range(4):
            for i in range(part + 1):
                p.send("durable", value=b"%d-%d" % (part, i), partition=part)
        p.flush()
        p.close()
        b.restart(hard=True)
        c = consumer(b)
        assert "durable" in c.topics()
        tps = [TopicPartition("durable", n) for n in range(4)]
        ends = c.end_offsets(tps)
        assert ends == {tp: tp.partition + 1 for tp in tps}, ends
        c.assign(tps)
        recs = poll_until(c, 10)
        assert sorted(r.value for r in recs) == sorted(b"%d-%d" % (n, i) for n in range(4) for i in range(n + 1))
        c.close()


def metric(b, name):
    import urllib.request
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % b.admin, timeout=15).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


@test
def memory_durability_writes_what_it_holds():
    """log.durability=memory lets a partial last block wait 10 ms for more
    records before its write (storage/plog.h PLOG_MEMORY_HOLD_NS): the
    records survive a clean stop, and a held block is written once its time
    is up with nothing else happening, so a SIGKILL after that loses
    nothing. (A hold that never ends fails the wait for the writes; the
    close writing what is held: test_plog.c memory_durability_holds_the_partial_block.)"""
    with broker(admin=True, settings={"log.durability": "memory"}) as b:
        a = admin(b)
        a.create_topics([NewTopic("held", num_partitions=4, replication_factor=1)])
        a.close()
        tps = [TopicPartition("held", n) for n in range(4)]

        def send(tag):
            p = producer(b)
            for part in range(4):
                for i in range(part + 1):
                    p.send("held", value=b"%s-%d-%d" % (tag, part, i), partition=part)
            p.flush()
            p.close()

        def read_back(tags):
            c = consumer(b)
            want = sorted(b"%s-%d-%d" % (t, n, i) for t in tags for n in range(4) for i in range(n + 1))
            ends = c.end_offsets(tps)
            assert ends == {tp: len(tags) * (tp.partition + 1) for tp in tps}, ends
            c.assign(tps)
            c.seek_to_beginning()
            recs = poll_until(c, len(want))
            assert sorted(r.value for r in recs) == want
            c.close()

        send(b"a")
        b.restart()                      # SIGTERM: the held blocks written at the stop
        read_back([b"a"])
        before = metric(b, "sluice_disk_writes_total")
        send(b"b")
        deadline = time.time() + HANG_GUARD
        while metric(b, "sluice_disk_writes_total") < before + 4:   # one a partition, once due
            assert time.time() < deadline, "the held blocks were never written"
            time.sleep(0.05)
        b.restart(hard=True)             # SIGKILL after they were written
        read_back([b"a", b"b"])


if __name__ == "__main__":
    main("kafka-python")
