#!/usr/bin/python3
"""Sarama 1.22.1 (Debian's golang-github-shopify-sarama-dev, built with
Debian's golang-go in GOPATH mode into build/tests/sarama_check; Version =
V2_1_0_0) against a real sluiced (issue 25). tests/integration/sarama/
sarama_check.go does the Sarama side; this script checks what it reports
and reads back what it wrote with other clients (kafka-python, kcat, raw
Fetch).

- admin: CreateTopic, ListTopics, DescribeTopics, DeleteTopic,
  ListConsumerGroups, DescribeConsumerGroups, ListConsumerGroupOffsets of
  offsets kafka-python committed.
- producers: an idempotent SyncProducer (acks=all) of keyed records with
  each of Sarama's hash partitioners: NewHashPartitioner (FNV-1a, Sarama's
  default) and NewReferenceHashPartitioner place keys as Sarama documents
  them, which is not where Java puts them; Sarama 1.22 has no murmur2
  partitioner, and NewCustomPartitioner(WithAbsFirst(),
  WithCustomHashFunction(murmur2)) is the one that places every key where
  Java's does (NewCustomHashPartitioner with the same hash does not: its
  absolute value differs). An AsyncProducer (acks=all) with gzip, snappy,
  lz4 and zstd: the stored batches carry the codec, Sarama's consumer and
  kcat read every record back.
- a consumer group of two members, one leaving and joining again, commits
  (OffsetCommit v1, every 100 ms and at each session's end), checked by
  reading them back (Sarama's admin and kafka-python's) and by restarting
  the group in a new process: it resumes at the committed offsets, and the
  records read twice are exactly the uncommitted window. Sarama reports
  commit failures only on its Errors() channel; the test fails naming them.
"""

import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, broker, main, run, test  # noqa: E402
import kraw  # noqa: E402

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

SARAMA_CHECK = os.environ.get("SARAMA_CHECK", os.path.join(REPO, "build", "tests", "sarama_check"))
KCAT = os.environ.get("KCAT", "kcat")
SETTINGS = {"group.initial.rebalance.delay.ms": 0}
COMMON = dict(api_version_auto_timeout_ms=30000, request_timeout_ms=40000)


def sarama(b, *args):
    p = run([SARAMA_CHECK] + list(args), check=False)
    out = p.stdout.decode("utf-8", "replace").strip().splitlines()
    err = p.stderr.decode("utf-8", "replace")[-4000:]
    assert out, "sarama_check %s: exit %d, no output; stderr:\n%s" % (args[0], p.returncode, err)
    res = json.loads(out[-1])
    assert res["ok"] and p.returncode == 0, "sarama_check %s failed (exit %d): %s\nSarama's errors: %s\n" \
        "stderr:\n%s\nbroker log:\n%s" % (" ".join(args), p.returncode, res.get("error"), res.get("errors"),
                                          err, b.log_tail())
    return res


# ---- placement: Java's murmur2 and Sarama's FNV-1a ---------------------------

def murmur2(data):
    """Java's Utils.murmur2 (seed 0x9747b28c), unsigned."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    n = len(data)
    h = (0x9747B28C ^ n) & mask
    whole = n & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = n & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    return h ^ (h >> 15)


# Java's own values (kafka-protocol/README.md, test_rdkafka.c murmur2_matches_java)
for _k, _h in ((b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
               (b"a-little-bit-longer-string", -1486304829)):
    assert murmur2(_k) == _h & 0xFFFFFFFF, _k


def fnv1a(data):
    h = 0x811C9DC5
    for c in data:
        h = ((h ^ c) * 0x01000193) & 0xFFFFFFFF
    return h


def int32(h):
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key, n):
    return (murmur2(key) & 0x7FFFFFFF) % n


def sarama_abs(h, n):
    """Sarama's hashPartitioner without WithAbsFirst: int32(h) % n (Go's
    remainder takes the dividend's sign), then its absolute value."""
    return abs(int32(h)) % n


PLACEMENT = {
    "murmur2": java_partition,
    "murmur2-noabs": lambda k, n: sarama_abs(murmur2(k), n),
    "fnv": lambda k, n: sarama_abs(fnv1a(k), n),
    "reference": lambda k, n: (fnv1a(k) & 0x7FFFFFFF) % n,
}


def read_back(b, topic, n):
    """Every record of topic through kafka-python (no group): {(partition,
    offset): (key, value)}."""
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000,
                      **COMMON)
    parts = sorted(c.partitions_for_topic(topic))
    c.assign([TopicPartition(topic, p) for p in parts])
    got = {}
    for m in c:
        got[(m.partition, m.offset)] = (m.key.decode(), m.value.decode())
        if len(got) >= n:
            break
    c.close()
    return got


@test
def admin_topics_groups_and_offsets():
    """Sarama's ClusterAdmin: two topics created, listed with their
    partition counts, described (3 partitions, led by the broker, in sync),
    one deleted and gone from the list; ListConsumerGroups shows the group
    kafka-python committed for (no protocol type: nobody joined it),
    DescribeConsumerGroups has it Empty, and
    ListConsumerGroupOffsets reads back its offsets."""
    topic, other, group = "sa-admin", "sa-other", "sa-admin-group"
    with broker(settings=SETTINGS) as b:
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap, **COMMON)
        adm.create_topics([NewTopic(other, num_partitions=2, replication_factor=1)])
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=group, enable_auto_commit=False, **COMMON)
        c.commit({TopicPartition(other, 0): OffsetAndMetadata(7, ""), TopicPartition(other, 1): OffsetAndMetadata(3, "")})
        c.close()
        res = sarama(b, "admin", b.bootstrap, topic, group)
        assert res["listed"].get(topic) == 3 and res["listed"].get(topic + "-gone") == 3, res["listed"]
        assert res["listed"].get(other) == 2, res["listed"]
        desc = sorted(res["described"], key=lambda t: t["name"])
        assert [t["name"] for t in desc] == [topic, topic + "-gone"], desc
        for t in desc:
            assert t["err"] == 0 and [p["id"] for p in t["partitions"]] == [0, 1, 2], t
            for p in t["partitions"]:
                assert p["err"] == 0 and p["replicas"] == [p["leader"]] and p["isr"] == [p["leader"]], p
        assert topic + "-gone" not in res["listedAfterDelete"] and topic in res["listedAfterDelete"], \
            res["listedAfterDelete"]
        # a group only committed to (no member ever joined) has no protocol
        # type, in Kafka too
        assert res["groups"].get(group) == "", res["groups"]
        assert [(g["groupId"], g["err"], g["state"], g["members"]) for g in res["describedGroups"]] == [
            (group, 0, "Empty", 0)], res["describedGroups"]
        assert res["offsets"] == {other: {"0": 7, "1": 3}}, res["offsets"]
        adm.close()


@test
def keyed_sync_producer_partitioners():
    """An idempotent SyncProducer (acks=all) sends 300 keyed records with
    each of Sarama's hash partitioners to a 3-partition topic; each topic
    is read back whole with kafka-python (keys, values, dense offsets from
    0 on every partition). Placement: NewCustomPartitioner(WithAbsFirst(),
    WithCustomHashFunction(murmur2)) puts every key where Java does;
    NewHashPartitioner and NewReferenceHashPartitioner put them where FNV-1a
    says (Sarama's documentation), about two thirds of them elsewhere than
    Java; NewCustomHashPartitioner(murmur2) misplaces the keys whose hash
    is negative as an int32."""
    n, parts = 300, 3
    with broker(settings=SETTINGS) as b:
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap, **COMMON)
        adm.create_topics([NewTopic("sa-" + name, num_partitions=parts, replication_factor=1) for name in PLACEMENT])
        not_java = {}
        for name, place in PLACEMENT.items():
            topic = "sa-" + name
            res = sarama(b, "produce", b.bootstrap, topic, str(n), "sync", "none", name)
            sent = {r["i"]: (r["partition"], r["offset"]) for r in res["sent"]}
            assert sorted(sent) == list(range(n)), res["sent"][:5]
            got = read_back(b, topic, n)
            assert len(got) == n, (name, len(got))
            for p in range(parts):
                offs = sorted(o for q, o in got if q == p)
                assert offs == list(range(len(offs))), (name, p, offs[:10])
            for i, (p, o) in sent.items():
                key = b"key-%d" % i
                assert got[(p, o)] == (key.decode(), "value-%d" % i), (name, i, p, o, got.get((p, o)))
                assert p == place(key, parts), "%s: key-%d on partition %d, expected %d" % (
                    name, i, p, place(key, parts))
            not_java[name] = sum(1 for i, (p, _) in sent.items() if p != java_partition(b"key-%d" % i, parts))
        assert not_java["murmur2"] == 0, not_java
        for name in ("fnv", "reference", "murmur2-noabs"):
            assert not_java[name] > n // 10, not_java
        print("    keys placed elsewhere than Java's murmur2 (of %d): %s" % (n, not_java))
        adm.close()


def stored_codecs(b, topic, partitions):
    """The codec (attributes & 7) of every batch stored, over raw Fetch v4."""
    codecs = set()
    with kraw.Conn(b.bootstrap) as c:
        # replica -1, max wait 0, min bytes 1, max bytes, read_uncommitted;
        # each partition from offset 0
        w = kraw.W().i32(-1).i32(0).i32(1).i32(8 << 20).i8(0)
        w.i32(1).str(topic).i32(partitions)
        for p in range(partitions):
            w.i32(p).i64(0).i32(8 << 20)
        r = c.request(1, 4, w)
        r.i32()
        for _t, ps in r.array(lambda r: (r.str(), r.array(
                lambda r: (r.i32(), r.i16(), r.i64(), r.i64(), r.array(lambda r: (r.i64(), r.i64())), r.bytes())))):
            for _p, err, _hw, _lso, _ab, blob in ps:
                assert err == 0, err
                o = 0
                while o + 23 <= len(blob or b""):
                    blen = struct.unpack_from(">i", blob, o + 8)[0]
                    codecs.add(struct.unpack_from(">h", blob, o + 21)[0] & 7)
                    o += 12 + blen
    return codecs


@test
def async_producer_codecs():
    """An AsyncProducer (acks=all, manual partitions) sends 200 records with
    gzip, snappy, lz4 and zstd (Version >= V2_1_0_0): the batches are stored
    with that codec (raw Fetch), and Sarama's own consumer and kcat read
    every key and value back."""
    n, parts = 200, 3
    with broker(settings=SETTINGS) as b:
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap, **COMMON)
        codecs = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
        adm.create_topics([NewTopic("sa-" + c, num_partitions=parts, replication_factor=1) for c in codecs])
        for codec, attr in codecs.items():
            topic = "sa-" + codec
            res = sarama(b, "produce", b.bootstrap, topic, str(n), "async", codec, "manual")
            sent = {(r["partition"], r["offset"]): r["i"] for r in res["sent"]}
            assert len(sent) == n and all(p == i % parts for (p, _), i in sent.items()), res["sent"][:5]
            assert stored_codecs(b, topic, parts) == {attr}, (codec, stored_codecs(b, topic, parts))
            got = sarama(b, "read", b.bootstrap, topic, str(n))["records"]
            assert {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in got} == {
                po: ("key-%d" % i, "value-%d" % i) for po, i in sent.items()}, codec
            out = run([KCAT, "-b", b.bootstrap, "-m", "30", "-q", "-C", "-t", topic, "-o", "beginning", "-e",
                       "-f", "%p %o %k %s\n"]).stdout.decode()
            lines = set(out.splitlines())
            assert lines == {"%d %d key-%d value-%d" % (p, o, i, i) for (p, o), i in sent.items()}, codec
        adm.close()


def by_partition(recs):
    out = {}
    for r in recs:
        out.setdefault(r["partition"], []).append(r["offset"])
    return {p: sorted(o) for p, o in out.items()}


@test
def group_commits_restarts_and_resumes():
    """Issue 25: a Sarama group whose commits the broker refused re-read
    everything after a restart. Two members on 4 partitions: A alone, B
    joins (2 + 2), B leaves, B joins again, B leaves; 50 records per
    partition produced along the way are each read once (the commit at a
    session's end hands each partition over at its position), A reads 5
    more per partition without marking them, and closes. Sarama's
    ListConsumerGroupOffsets and kafka-python's read back 50 on every
    partition. A new process produces 10 more per partition and its
    member C resumes: it reads offsets 50..64 of every partition, so the
    records read twice are exactly the 20 of the window, nothing more;
    then 65 is committed everywhere."""
    topic, group, parts = "sa-group", "sa-group-g", 4
    with broker(settings=SETTINGS) as b:
        res = sarama(b, "churn", b.bootstrap, topic, group)
        recs = res["records"]
        seen, twice = set(), []
        for r in recs:
            po = (r["partition"], r["offset"])
            if po in seen:
                twice.append(po)
            seen.add(po)
        assert not twice and not res["errors"], \
            "%d records read twice while members came and went, committed offsets read back %s " \
            "(Sarama's errors: %s); steps %s" % (len(twice), res.get("committed"), res["errors"][:5], res["steps"])
        assert by_partition(recs) == {p: list(range(55)) for p in range(parts)}, by_partition(recs)
        window = {(r["partition"], r["offset"]) for r in recs if not r["marked"]}
        assert window == {(p, o) for p in range(parts) for o in range(50, 55)}, sorted(window)
        names = [s["step"] for s in res["steps"]]
        assert names == ["A alone", "B joined", "B left", "B2 joined", "B2 left"], res["steps"]
        assert {r["member"] for r in recs} == {"A", "B", "B2"}, {r["member"] for r in recs}
        want = {topic: {str(p): 50 for p in range(parts)}}
        assert res["committed"] == want, "Sarama's ListConsumerGroupOffsets after the group stopped: %s, " \
            "expected %s" % (res["committed"], want)
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap, **COMMON)
        assert adm.list_consumer_group_offsets(group) == {
            TopicPartition(topic, p): OffsetAndMetadata(50, "") for p in range(parts)}

        res2 = sarama(b, "resume", b.bootstrap, topic, group, str(parts * 15))
        assert res2["committedBefore"] == want, res2["committedBefore"]
        again = [(r["partition"], r["offset"]) for r in res2["records"] if (r["partition"], r["offset"]) in seen]
        assert len(again) == len(window) and set(again) == window, \
            "after the restart %d records were read twice, expected the %d of the uncommitted window; " \
            "C read %s; Sarama's errors: %s" % (len(again), len(window), by_partition(res2["records"]),
                                                res2["errors"][:5])
        assert by_partition(res2["records"]) == {p: list(range(50, 65)) for p in range(parts)}, \
            by_partition(res2["records"])
        assert not res2["errors"], res2["errors"]
        assert res2["committed"] == {topic: {str(p): 65 for p in range(parts)}}, res2["committed"]
        assert adm.list_consumer_group_offsets(group) == {
            TopicPartition(topic, p): OffsetAndMetadata(65, "") for p in range(parts)}
        adm.close()


if __name__ == "__main__":
    main("sarama")
