#!/usr/bin/python3
"""kcat (librdkafka 2.0.2) against a real sluiced: produce and consume back
byte for byte, delimiters and keys, metadata (-L), offsets by time (-Q),
data across a restart and a SIGKILL, a consumer group (-G) that commits,
stops and resumes without reading anything twice."""

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, main, run, test  # noqa: E402

KCAT = os.environ.get("KCAT", "kcat")


def kcat(b, *args, input=None, check=True):
    return run([KCAT, "-b", b.bootstrap, "-m", "30", "-q"] + list(args), input=input, check=check)


def binary_lines(n, seed, longest=300):
    """n messages of random bytes (every value but b'\\n'), each ending in
    b'\\n'; some long ones so that batches hold few records."""
    rnd = random.Random(seed)
    alphabet = bytes(b for b in range(256) if b != 0x0A)
    out = []
    for i in range(n):
        size = rnd.choice([1, 2, 7, 64, longest, rnd.randint(1, longest)])
        if i % 97 == 0:
            size = 50000
        out.append(bytes(rnd.choice(alphabet) for _ in range(size)) + b"\n")
    return out


def consume_all(b, topic, partition, fmt="%s\n", extra=()):
    return kcat(b, "-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e",
                "-f", fmt, *extra).stdout


@test
def binary_file_round_trip():
    """A file of binary lines (NUL, CR, 0xFF, ...; some 50 KB) produced by
    kcat -P comes back from kcat -C -e byte-identical, in order."""
    lines = binary_lines(1500, seed=1)
    data = b"".join(lines)
    with broker() as b:
        kcat(b, "-P", "-t", "bin", "-p", "0", input=data)
        got = consume_all(b, "bin", 0)
        assert got == data, "consumed %d bytes, produced %d; first difference at byte %d" % (
            len(got), len(data), next((i for i, (x, y) in enumerate(zip(got, data)) if x != y),
                                      min(len(got), len(data))))
        # offsets are dense from 0: the last record is at offset n-1
        offs = consume_all(b, "bin", 0, fmt="%o\n").split()
        assert [int(o) for o in offs] == list(range(len(lines))), offs[:5]


@test
def partitions_keep_their_own_records():
    """Three partitions, each produced with -p N, each read back alone."""
    with broker(settings={"num.partitions": 3}) as b:
        per = {p: binary_lines(200, seed=10 + p, longest=100) for p in range(3)}
        for p in range(3):
            kcat(b, "-P", "-t", "three", "-p", str(p), input=b"".join(per[p]))
        for p in range(3):
            assert consume_all(b, "three", p) == b"".join(per[p]), "partition %d differs" % p
        # -C on the whole topic: every record exactly once
        got = kcat(b, "-C", "-t", "three", "-o", "beginning", "-e", "-f", "%p %s\n").stdout
        want = sorted(b"%d " % p + l for p in range(3) for l in per[p])
        assert sorted(l + b"\n" for l in got.split(b"\n")[:-1]) == want


@test
def delimiters_and_keys():
    """-D with a multi-byte delimiter lets messages contain newlines; -K
    splits keys off; both come back the same on the consumer side."""
    msgs = [b"one\nline two", b"\x00\x01\x02", b"three\r\n", b"x" * 10000, b"last"]
    with broker() as b:
        kcat(b, "-P", "-t", "delim", "-p", "0", "-D", "<|>", input=b"<|>".join(msgs))
        got = consume_all(b, "delim", 0, fmt="%s<|>")
        assert got.split(b"<|>")[:-1] == msgs, got[:200]
        # output delimiter with -D on the consumer (no -f)
        got = kcat(b, "-C", "-t", "delim", "-p", "0", "-o", "beginning", "-e", "-D", "#END#\n").stdout
        assert got == b"".join(m + b"#END#\n" for m in msgs), got[:200]

        kv = [(b"k1", b"v1"), (b"key two", b"value\ttwo"), (b"k3", b"v:with:colons")]
        kcat(b, "-P", "-t", "keys", "-p", "0", "-K", ":",
             input=b"".join(k + b":" + v + b"\n" for k, v in kv))
        got = consume_all(b, "keys", 0, fmt="%k|%S|%s\n")
        want = b"".join(b"%s|%d|%s\n" % (k, len(v), v) for k, v in kv)
        assert got == want, got


@test
def metadata_lists_topic_partitions_and_leader():
    """kcat -L -J: the broker (node.id 7, our port), the controller, the
    topic with its 4 partitions, each led by node 7 with replicas/isrs [7]."""
    with broker(settings={"node.id": 7, "num.partitions": 4}) as b:
        kcat(b, "-P", "-t", "meta", "-p", "3", input=b"hello\n")
        md = json.loads(kcat(b, "-L", "-J", "-t", "meta").stdout)
        assert [(x["id"], x["name"]) for x in md["brokers"]] == [(7, b.bootstrap)], md["brokers"]
        assert md["controllerid"] == 7, md
        topics = [t for t in md["topics"] if t["topic"] == "meta"]
        assert len(topics) == 1 and not topics[0].get("error"), md["topics"]
        parts = sorted(topics[0]["partitions"], key=lambda p: p["partition"])
        assert [p["partition"] for p in parts] == [0, 1, 2, 3], parts
        for p in parts:
            assert p["leader"] == 7, p
            assert [r["id"] for r in p["replicas"]] == [7], p
            assert [r["id"] for r in p["isrs"]] == [7], p
        # the plain listing too
        text = kcat(b, "-L", "-t", "meta").stdout.decode()
        assert 'topic "meta" with 4 partitions:' in text, text
        assert "partition 2, leader 7, replicas: 7, isrs: 7" in text, text


def produce_with_timestamps(b, topic, stamps, one_batch):
    """kafka-python (kcat cannot set timestamps): record i has value b'v<i>'
    and timestamp stamps[i]; each in its own request unless one_batch."""
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=0 if not one_batch else 100,
                      batch_size=1 << 20, api_version_auto_timeout_ms=30000)
    try:
        futs = []
        for i, ts in enumerate(stamps):
            futs.append(p.send(topic, value=b"v%d" % i, partition=0, timestamp_ms=ts))
            if not one_batch:
                p.flush()
        p.flush()
        offs = [f.get(timeout=30).offset for f in futs]
    finally:
        p.close()
    return offs


def query(b, topic, ts):
    out = kcat(b, "-Q", "-t", "%s:0:%d" % (topic, ts)).stdout.decode()
    # "<topic> [0] offset <n>"
    words = out.split()
    assert words[:3] == [topic, "[0]", "offset"], out
    return int(words[3])


@test
def offsets_by_timestamp():
    """kcat -Q -t topic:0:ts answers the first offset whose timestamp is >= ts,
    -1 past the newest; -2/-1 give the log start and end. Records in separate
    batches and records inside one batch."""
    base = 1_700_000_000_000
    with broker() as b:
        for topic, one_batch in (("ts-separate", False), ("ts-onebatch", True)):
            stamps = [base + 1000 * i for i in range(10)]
            offs = produce_with_timestamps(b, topic, stamps, one_batch)
            assert offs == list(range(10)), offs
            got = consume_all(b, topic, 0, fmt="%o %T\n").split()
            assert [int(x) for x in got[1::2]] == stamps, (topic, got)
            for i, ts in enumerate(stamps):
                assert query(b, topic, ts) == i, (topic, "exact", i)
                assert query(b, topic, ts - 1) == i, (topic, "just before", i)
                if i + 1 < len(stamps):
                    assert query(b, topic, ts + 1) == i + 1, (topic, "just after", i)
            assert query(b, topic, base - 10**6) == 0, topic
            assert query(b, topic, stamps[-1] + 1) == -1, topic
            assert query(b, topic, -2) == 0, topic
            assert query(b, topic, -1) == 10, topic


@test
def data_survives_restart_and_sigkill():
    """What kcat -P had acknowledged is there after a clean restart and after
    a SIGKILL restart, and the next record gets the next offset."""
    first = binary_lines(300, seed=3, longest=200)
    second = binary_lines(300, seed=4, longest=200)
    with broker() as b:
        kcat(b, "-P", "-t", "keep", "-p", "0", input=b"".join(first))
        b.restart()
        assert consume_all(b, "keep", 0) == b"".join(first)
        kcat(b, "-P", "-t", "keep", "-p", "0", input=b"".join(second))
        b.restart(hard=True)
        assert consume_all(b, "keep", 0) == b"".join(first + second)
        kcat(b, "-P", "-t", "keep", "-p", "0", input=b"after\n")
        offs = consume_all(b, "keep", 0, fmt="%o %s\n").splitlines()
        assert offs[-1] == b"%d after" % (len(first) + len(second)), offs[-1]


def kcat_group(b, group, topic, *args):
    """kcat -G (librdkafka's KafkaConsumer, auto commit on: the offsets it
    delivered are committed by rd_kafka_consumer_close when it exits); one
    "partition offset key" line per record read."""
    out = kcat(b, "-G", group, "-X", "auto.offset.reset=earliest", "-f", "%p %o %k\n", *args, topic).stdout
    return [tuple(line.split()) for line in out.decode().splitlines()]


@test
def group_commits_stops_and_resumes():
    """Issue 25's check for every client: kcat -G -c 12 reads 12 of the 30
    records of a 2-partition topic and exits (its close commits what it
    delivered, which kafka-python's admin reads back: 12 in all); 10 more
    records are produced; kcat -G -e in the same group resumes at the
    committed offsets: every record read once, 0 read twice."""
    from kafka import KafkaAdminClient
    topic, group = "kgr", "kgr-group"
    with broker(settings={"num.partitions": 2, "group.initial.rebalance.delay.ms": 0}) as b:
        for p in (0, 1):
            kcat(b, "-P", "-t", topic, "-p", str(p), "-K", ":",
                 input=b"".join(b"one-%d-%d:v\n" % (p, i) for i in range(15)))
        first = kcat_group(b, group, topic, "-c", "12")
        assert len(first) == 12, first
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=40000)
        committed = {tp.partition: om.offset for tp, om in adm.list_consumer_group_offsets(group).items()}
        read = {}
        for p, o, _ in first:
            read[int(p)] = max(read.get(int(p), -1), int(o))
        assert committed == {p: o + 1 for p, o in read.items()}, (committed, first)
        for p in (0, 1):
            kcat(b, "-P", "-t", topic, "-p", str(p), "-K", ":",
                 input=b"".join(b"two-%d-%d:v\n" % (p, i) for i in range(5)))
        second = kcat_group(b, group, topic, "-e")
        twice = set(first) & set(second)
        assert not twice, "%d records read twice after the group resumed: %s (committed %s)" % (
            len(twice), sorted(twice), committed)
        assert sorted(first + second) == sorted(
            (str(p), str(o), "%s-%d-%d" % ("one" if o < 15 else "two", p, o if o < 15 else o - 15))
            for p in (0, 1) for o in range(20)), (first, second)
        assert {tp.partition: om.offset for tp, om in adm.list_consumer_group_offsets(group).items()} == \
            {0: 20, 1: 20}
        adm.close()


@test
def idle_topics_do_not_starve_new_ones():
    """Regression (sluice-bench produce, 2026-11-29): with records large
    enough that each partition's last tail chunk is a quarter of the shard's
    tail budget, a few topics written and left idle held all of it and every
    later produce failed, for good (librdkafka retried it until
    message.timeout.ms: no delivery report at all). Idle partitions' tail
    memory is evictable now: twelve topics on a 4 MiB budget all take their
    writes, a new one still does, an old one takes more, and everything
    reads back byte for byte (the evicted part from disk)."""
    def records(topic, n, size=600000):
        return [(b"%s-%d:" % (topic.encode(), i)).ljust(size, b"x") + b"\n" for i in range(n)]

    # a delivery failure is reported well inside the hang guard
    fast = ("-X", "message.timeout.ms=20000")
    with broker(settings={"shard.tail.memory.bytes": 4 << 20, "num.partitions": 1}) as b:
        sent = {}
        for t in ["idle%d" % i for i in range(12)] + ["fresh"]:
            sent[t] = records(t, 4 if t != "fresh" else 1)
            p = kcat(b, "-P", "-t", t, "-p", "0", *fast, input=b"".join(sent[t]), check=False)
            assert p.returncode == 0 and b"Delivery failed" not in p.stderr, \
                "topic %s: exit %d: %s" % (t, p.returncode, p.stderr.decode("utf-8", "replace")[-500:])
        more = records("idle0", 2)
        kcat(b, "-P", "-t", "idle0", "-p", "0", *fast, input=b"".join(more))
        sent["idle0"] += more
        for t, want in sent.items():
            got = consume_all(b, t, 0)
            assert got == b"".join(want), "topic %s: %d bytes back of %d" % (t, len(got), len(b"".join(want)))


if __name__ == "__main__":
    main("kcat")
