#!/usr/bin/python3
"""kafkajs 2.2.4 (tests/integration/kafkajs, installed by `npm ci` from its
package-lock.json) against a real sluiced: kafkajs_check.js runs the admin
calls (createTopics, fetchTopicMetadata, fetchTopicOffsets, describeConfigs,
alterConfigs, createPartitions, deleteTopics) and a GZIP, acks=-1 producer of
keyed records with headers. kafkajs consumers need consumer groups, which the
broker does not serve yet, so what kafkajs produced is read back here with
kafka-python (group-less, assign) and with kcat: keys, values, headers, dense
offsets, and each key on the partition Java's murmur2 picks."""

import json
import time
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, broker, main, run, test  # noqa: E402

from kafka import KafkaConsumer, TopicPartition  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KJS_DIR = os.path.join(HERE, "kafkajs")
NODE = os.environ.get("NODE", "node")
KCAT = os.environ.get("KCAT", "kcat")
PARTITIONS = 3
N = 300


def murmur2(data):
    """Java's Utils.murmur2 (seed 0x9747b28c), as an unsigned 32-bit int."""
    m, r = 0x5BD1E995, 24
    mask = 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    whole = length & ~3
    for i in range(0, whole, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


def java_partition(key, n):
    return (murmur2(key) & 0x7FFFFFFF) % n


def kafkajs_check(b, topic, n=N):
    """Run kafkajs_check.js; returns its JSON result (the steps and the sent
    records). A step kafkajs reports as failed fails the test with the
    kafkajs error (request, error type and code) in the message."""
    p = run([NODE, os.path.join(KJS_DIR, "kafkajs_check.js"), b.bootstrap, topic, str(n)],
            check=False, cwd=KJS_DIR)
    out = p.stdout.decode("utf-8", "replace").strip().splitlines()
    assert out, "kafkajs_check.js: exit %d, no output; stderr:\n%s" % (
        p.returncode, p.stderr.decode("utf-8", "replace")[-3000:])
    res = json.loads(out[-1])
    bad = [s for s in res["steps"] if not s["ok"]]
    assert not bad and p.returncode == 0, "kafkajs steps failed (exit %d): %s\nstderr:\n%s\nbroker log:\n%s" % (
        p.returncode, json.dumps(bad, indent=1), p.stderr.decode("utf-8", "replace")[-3000:], b.log_tail())
    return res


def step(res, name):
    return next(s for s in res["steps"] if s["name"] == name)


def read_back(b, topic, ends):
    """Every record of topic via a group-less kafka-python consumer, as
    {partition: [ConsumerRecord...]} in offset order."""
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", api_version_auto_timeout_ms=30000,
                      request_timeout_ms=40000)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + HANG_GUARD
        while sum(len(v) for v in got.values()) < sum(ends.values()):
            assert time.monotonic() < deadline, "read back %s of %s (hang guard)" % (
                {p: len(v) for p, v in got.items()}, ends)
            for tp, recs in c.poll(timeout_ms=500).items():
                got[tp.partition].extend(recs)
        return got
    finally:
        c.close()


@test
def murmur2_matches_java_and_kafka_python():
    """The Python murmur2 here gives Java's values (Kafka's UtilsTest vectors)
    and agrees with kafka-python's own implementation on many keys."""
    from kafka.partitioner.default import murmur2 as kpy_murmur2
    java = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
            b"a-little-bit-longer-string": -1486304829,
            b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}
    for k, v in java.items():
        assert murmur2(k) == v & 0xFFFFFFFF, (k, murmur2(k), v)
    for i in range(2000):
        k = (b"key-%d" % i) * (i % 5) + bytes([i % 256])
        assert murmur2(k) == kpy_murmur2(k) & 0xFFFFFFFF, k


@test
def admin_calls_and_gzip_produce():
    """Every kafkajs step succeeds: createTopics (3 partitions, waited for
    leaders), fetchTopicMetadata (3 partitions, each with a leader, no
    error), GZIP send with acks -1, fetchTopicOffsets (low 0, highs sum to
    N), retention.ms described then altered and described again,
    createPartitions 1 -> 4, deleteTopics (only the deleted topic goes)."""
    with broker() as b:
        res = kafkajs_check(b, "kjs-admin")
        md = step(res, "admin.fetchTopicMetadata")["partitions"]
        assert [p["partition"] for p in md] == list(range(PARTITIONS)), md
        assert all(p["leader"] == 1 and p["replicas"] == [1] and p["isr"] == [1] for p in md), md
        offs = step(res, "admin.fetchTopicOffsets")["offsets"]
        assert sum(int(o["high"]) for o in offs) == N, offs
        assert step(res, "admin.describeConfigs")["retention_ms"] == "604800000", step(res, "admin.describeConfigs")
        assert step(res, "admin.alterConfigs")["retention_ms"] == "3600000"
        assert step(res, "admin.createPartitions")["partitions"] == 4
        # produce acks: baseOffsets are dense per partition across the sends
        acks = step(res, "producer.send")["acks"]
        per = {}
        for a in acks:
            per.setdefault(a["partition"], []).append(int(a["baseOffset"]))
        for p, bases in per.items():
            assert bases == sorted(bases) and bases[0] == 0, (p, bases)


@test
def records_read_back_with_kafka_python_and_kcat():
    """What kafkajs produced (GZIP batches) reads back with kafka-python:
    every record once, dense offsets from 0 per partition, in send order
    within a partition, keys/values/headers intact, and each key on
    (murmur2(key) & 0x7fffffff) % 3 (kafkajs DefaultPartitioner = Java's).
    kcat (librdkafka) reads the same partitions, keys and headers."""
    topic = "kjs-data"
    with broker() as b:
        res = kafkajs_check(b, topic)
        sent = res["sent"]
        assert len(sent) == N
        ends = {int(o["partition"]): int(o["high"]) for o in step(res, "admin.fetchTopicOffsets")["offsets"]}
        got = read_back(b, topic, ends)

        want = {p: [] for p in range(PARTITIONS)}
        for m in sent:
            key = m["key"].encode()
            want[java_partition(key, PARTITIONS)].append(m)
        assert {p: len(v) for p, v in want.items()} == {p: len(v) for p, v in got.items()}, (
            "records per partition: murmur2 says %s, broker has %s" % (
                {p: len(v) for p, v in want.items()}, {p: len(v) for p, v in got.items()}))
        for p in range(PARTITIONS):
            assert [r.offset for r in got[p]] == list(range(len(got[p]))), (p, [r.offset for r in got[p]][:10])
            for r, m in zip(got[p], want[p]):
                assert r.key == m["key"].encode(), (p, r.offset, r.key, m["key"])
                assert r.value == m["value"].encode(), (p, r.offset, r.value)
                hdrs = sorted((k, v) for k, v in r.headers)
                assert hdrs == sorted((k, v.encode()) for k, v in m["headers"].items()), (p, r.offset, hdrs)

        # kcat: partition, key and headers of every record
        out = run([KCAT, "-b", b.bootstrap, "-m", "30", "-q", "-C", "-t", topic, "-o", "beginning", "-e",
                   "-f", "%p|%o|%k|%h|%s\n"]).stdout.decode()
        lines = sorted(out.splitlines())
        expect = []
        for p in range(PARTITIONS):
            for o, m in enumerate(want[p]):
                h = ",".join("%s=%s" % kv for kv in m["headers"].items())
                expect.append("%d|%d|%s|%s|%s" % (p, o, m["key"], h, m["value"]))
        assert lines == sorted(expect), "kcat differs: %s" % (
            next(((a, e) for a, e in zip(lines, sorted(expect)) if a != e), (len(lines), len(expect))),)


if __name__ == "__main__":
    main("kafkajs")
