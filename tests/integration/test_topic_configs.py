#!/usr/bin/python3
"""Topic configs as Kafka users set them, against real brokers and real
clients (confluent-kafka's AdminClient, Producer and Consumer; kafka-python's
consumer; raw frames from ktxn.py for IncrementalAlterConfigs and for the
stored batches' codec bits).

- compression.type with Kafka's meaning: 'producer' keeps the producer's
  codec; any other value makes the broker store every batch in that codec
  (uncompressed included), whatever the producer sent; the records read
  back are the same, an idempotent producer's id and sequence stay.
- message.format.version is accepted and ignored with a warning in the
  broker's log, as Kafka 3.x does.
- A topic config key Sluice does not implement is refused with
  INVALID_CONFIG and "Sluice does not support KEY yet"; an unknown key with
  INVALID_CONFIG naming it.
- Cluster-wide defaults change at run time with AlterConfigs /
  IncrementalAlterConfigs on the broker resource (name "" or the node id):
  topics without an override follow, and the change survives a restart; a
  key that cannot change at run time is refused (INVALID_REQUEST, "Cannot
  update these configs dynamically")."""

import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, main, test  # noqa: E402
from kraw import W  # noqa: E402
from ktxn import READ_UNCOMMITTED, TConn  # noqa: E402

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

INVALID_CONFIG = 40
INVALID_REQUEST = 42
CODEC = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
INCREMENTAL_ALTER_CONFIGS = 44
FETCH = 1
RES_TOPIC, RES_BROKER = 2, 4
OP_SET, OP_DELETE = 0, 1


def admin(b):
    return AdminClient({"bootstrap.servers": b.bootstrap})


def create(b, name, configs=None, partitions=1):
    """CreateTopics through the AdminClient; returns None or the
    KafkaError."""
    a = admin(b)
    fs = a.create_topics([NewTopic(name, partitions, 1, config=configs or {})], request_timeout=30)
    try:
        fs[name].result(30)
        return None
    except Exception as e:  # confluent_kafka.KafkaException
        return e.args[0]


def describe(b, rtype, name):
    """DescribeConfigs: {key: ConfigEntry}."""
    res = ConfigResource(rtype, name)
    a = admin(b)
    return a.describe_configs([res], request_timeout=30)[res].result(30)


def incremental(b, rtype, name, ops):
    """IncrementalAlterConfigs v0 over raw frames: ops = [(key, op, value)];
    returns (error code, message)."""
    return incremental_many(b, [(rtype, name, ops)])[0]


def incremental_many(b, resources):
    """One IncrementalAlterConfigs v0 request for several resources
    [(type, name, ops)], in that order: [(error code, message)] of each."""
    with TConn(b.bootstrap) as c:
        w = W().array(resources, lambda w, r: w.i8(r[0]).str(r[1]).array(
            r[2], lambda w, o: w.str(o[0]).i8(o[1]).str(o[2]))).i8(0)
        r = c.request(INCREMENTAL_ALTER_CONFIGS, 0, w)
        r.i32()
        res = r.array(lambda r: (r.i16(), r.str(), r.i8(), r.str()))
        r.done()
        return [(x[0], x[1]) for x in res]


def produce(b, topic, values, codec, idempotent=False):
    p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": codec, "linger.ms": 5,
                  "enable.idempotence": idempotent})
    errs = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda e, m: e and errs.append(e))
    assert p.flush(60) == 0
    assert not errs, errs


def stored_batches(b, topic):
    """(codec, producer id, base sequence, record count) of every batch of
    partition 0, from raw Fetch v11 record sets (batch headers only)."""
    out, off = [], 0
    with TConn(b.bootstrap) as c:
        while True:
            w = W().i32(-1).i32(0).i32(1).i32(8 << 20).i8(READ_UNCOMMITTED).i32(0).i32(-1)
            w.array([topic], lambda w, t: w.str(t).array([0], lambda w, p: w.i32(p).i32(-1).i64(off)
                                                          .i64(-1).i32(8 << 20)))
            w.array([], None).str("")
            r = c.request(FETCH, 11, w)
            r.i32()
            assert r.i16() == 0
            r.i32()
            blobs = []

            def pdata(r):
                r.i32()
                assert r.i16() == 0
                r.i64(), r.i64(), r.i64()
                r.array(lambda r: (r.i64(), r.i64()))
                r.i32()
                blobs.append(r.bytes() or b"")
            r.array(lambda r: (r.str(), r.array(pdata)))
            blob, o, got = blobs[0], 0, False
            while o + 61 <= len(blob):
                base, blen = struct.unpack_from(">qi", blob, o)
                if o + 12 + blen > len(blob):
                    break
                attrs, lod, _b, _m, pid, _e, seq, n = struct.unpack_from(">hiqqqhii", blob, o + 21)
                out.append((attrs & 7, pid, seq, n))
                off, o, got = base + lod + 1, o + 12 + blen, True
            if not got:
                return out


def consume_confluent(b, topic, n):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-" + topic, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        assert not m.error(), m.error()
        got.append(m.value())
    c.close()
    return got


def consume_kafka_python(b, topic, n):
    from kafka import KafkaConsumer
    c = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                      consumer_timeout_ms=10000, enable_auto_commit=False, group_id=None)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) >= n:
            break
    c.close()
    return got


def vals(tag, n):
    return [("%s-%05d-" % (tag, i)).encode() * 20 for i in range(n)]


@test
def zstd_topic_recompresses_what_producers_send():
    """compression.type=zstd: gzip, uncompressed and lz4 batches (one
    producer idempotent) are all stored as zstd and read back the same by
    librdkafka."""
    with broker() as b:
        assert create(b, "z", {"compression.type": "zstd"}) is None
        a, g, l_ = vals("plain", 300), vals("gzip", 300), vals("lz4", 300)
        produce(b, "z", a, "none")
        produce(b, "z", g, "gzip", idempotent=True)
        produce(b, "z", l_, "lz4")
        batches = stored_batches(b, "z")
        assert sum(x[3] for x in batches) == 900, batches
        assert {x[0] for x in batches} == {CODEC["zstd"]}, batches
        # the idempotent producer's batches keep their id and sequences
        idem = [x for x in batches if x[1] >= 0]
        assert idem and idem[0][2] == 0, batches
        assert consume_confluent(b, "z", 900) == a + g + l_
        cfg = describe(b, ConfigResource.Type.TOPIC, "z")
        assert cfg["compression.type"].value == "zstd", cfg["compression.type"]


@test
def gzip_topic_read_by_kafka_python():
    """compression.type=gzip: uncompressed and snappy batches are stored
    as gzip; kafka-python (which has no zstd here) reads them."""
    with broker() as b:
        assert create(b, "g", {"compression.type": "gzip"}) is None
        a, s = vals("a", 200), vals("s", 200)
        produce(b, "g", a, "none")
        produce(b, "g", s, "snappy")
        batches = stored_batches(b, "g")
        assert {x[0] for x in batches} == {CODEC["gzip"]}, batches
        assert consume_kafka_python(b, "g", 400) == a + s


@test
def uncompressed_topic_stores_plain_batches():
    with broker() as b:
        assert create(b, "u", {"compression.type": "uncompressed"}) is None
        v = vals("u", 300)
        produce(b, "u", v, "zstd")
        produce(b, "u", v, "gzip")
        batches = stored_batches(b, "u")
        assert {x[0] for x in batches} == {CODEC["none"]}, batches
        assert consume_kafka_python(b, "u", 600) == v + v


@test
def producer_keeps_the_producers_codec():
    """compression.type=producer (the default, and set explicitly)."""
    with broker() as b:
        assert create(b, "p") is None
        assert create(b, "p2", {"compression.type": "producer"}) is None
        produce(b, "p", vals("p", 100), "snappy")
        produce(b, "p2", vals("p", 100), "lz4")
        assert {x[0] for x in stored_batches(b, "p")} == {CODEC["snappy"]}
        assert {x[0] for x in stored_batches(b, "p2")} == {CODEC["lz4"]}
        assert describe(b, ConfigResource.Type.TOPIC, "p")["compression.type"].value == "producer"


@test
def compression_type_changed_at_run_time():
    """IncrementalAlterConfigs compression.type on a topic: batches after
    the change are stored in the new codec; a bad value is INVALID_CONFIG."""
    with broker() as b:
        assert create(b, "c") is None
        produce(b, "c", vals("x", 50), "gzip")
        assert incremental(b, RES_TOPIC, "c", [("compression.type", OP_SET, "lz4")])[0] == 0
        produce(b, "c", vals("y", 50), "gzip")
        codecs = [x[0] for x in stored_batches(b, "c")]
        assert codecs[0] == CODEC["gzip"] and codecs[-1] == CODEC["lz4"], codecs
        err, msg = incremental(b, RES_TOPIC, "c", [("compression.type", OP_SET, "brotli")])
        assert err == INVALID_CONFIG and "compression.type" in msg, (err, msg)


@test
def message_format_version_is_accepted_and_ignored():
    with broker() as b:
        assert create(b, "m", {"message.format.version": "2.8"}) is None
        assert incremental(b, RES_TOPIC, "m", [("message.format.version", OP_SET, "3.0")]) == (0, None)
        produce(b, "m", vals("m", 10), "none")
        assert consume_confluent(b, "m", 10) == vals("m", 10)
        b.stop()
        log = open(b.log_path).read()
        assert "message.format.version" in log and "ignored" in log, log


@test
def unsupported_keys_are_refused_with_a_message():
    with broker() as b:
        for key, value in (("flush.ms", "1000"), ("segment.ms", "60000"),
                           ("message.timestamp.difference.max.ms", "1000"),
                           ("remote.storage.enable", "true")):
            e = create(b, "t", {key: value})
            assert e is not None and e.code() == INVALID_CONFIG, (key, e)
            assert "Sluice does not support %s yet" % key in e.str(), (key, e.str())
        assert create(b, "t") is None
        err, msg = incremental(b, RES_TOPIC, "t", [("flush.messages", OP_SET, "1")])
        assert err == INVALID_CONFIG and "Sluice does not support flush.messages yet" in msg, (err, msg)
        # accepted as Kafka accepts them, nothing to do on one broker
        for key, value in (("preallocate", "true"), ("unclean.leader.election.enable", "false"),
                           ("remote.storage.enable", "false")):
            assert incremental(b, RES_TOPIC, "t", [(key, OP_SET, value)])[0] == 0, key


@test
def unknown_key_is_refused():
    with broker() as b:
        e = create(b, "t", {"no.such.key": "1"})
        assert e is not None and e.code() == INVALID_CONFIG and "no.such.key" in e.str(), e
        assert create(b, "t") is None
        err, msg = incremental(b, RES_TOPIC, "t", [("retention.msec", OP_SET, "1")])
        assert err == INVALID_CONFIG and "retention.msec" in msg, (err, msg)


@test
def broker_defaults_change_at_run_time_and_survive_a_restart():
    """IncrementalAlterConfigs on the cluster default ("") and AlterConfigs
    on the node ("1"): topics without an override follow (DescribeConfigs,
    and the stored codec), a topic's override wins, and both survive a
    restart."""
    with broker() as b:
        assert create(b, "plain") is None
        assert create(b, "own", {"retention.ms": "3600000"}) is None
        assert incremental(b, RES_BROKER, "", [("log.retention.ms", OP_SET, "1234567")]) == (0, None)
        res = ConfigResource(ConfigResource.Type.BROKER, "1", set_config={"compression.type": "gzip"})
        a = admin(b)
        a.alter_configs([res], request_timeout=30)[res].result(30)

        def check():
            t = describe(b, ConfigResource.Type.TOPIC, "plain")
            assert t["retention.ms"].value == "1234567", t["retention.ms"]
            assert t["compression.type"].value == "gzip", t["compression.type"]
            assert describe(b, ConfigResource.Type.TOPIC, "own")["retention.ms"].value == "3600000"
            br = describe(b, ConfigResource.Type.BROKER, "1")
            assert br["log.retention.ms"].value == "1234567" and not br["log.retention.ms"].is_read_only, \
                br["log.retention.ms"]
            assert br["compression.type"].value == "gzip"
            assert br["listeners"].is_read_only
        check()
        produce(b, "plain", vals("a", 50), "none")
        b.restart()
        check()
        produce(b, "plain", vals("b", 50), "none")
        assert {x[0] for x in stored_batches(b, "plain")} == {CODEC["gzip"]}
        # DELETE goes back to the static value
        assert incremental(b, RES_BROKER, "", [("log.retention.ms", OP_DELETE, None)]) == (0, None)
        assert describe(b, ConfigResource.Type.TOPIC, "plain")["retention.ms"].value == "604800000"
        b.restart()
        assert describe(b, ConfigResource.Type.TOPIC, "plain")["retention.ms"].value == "604800000"


@test
def one_request_for_the_broker_and_a_topic_reaches_the_partitions_in_either_order():
    """One IncrementalAlterConfigs with a broker entry and a topic entry:
    the records apply turns after they are proposed (the metadata quorum),
    and whichever entry comes first, the topic's partitions end with both
    changes: the topic's own override (broker entry first) and the new
    broker default (topic entry first). What the partitions use is read
    from the codec of the batches they store, not from DescribeConfigs."""
    with broker() as b:
        for name in ("bfirst", "tfirst", "plain"):
            assert create(b, name) is None
        # broker first: the topic's override must win on its partitions
        assert incremental_many(b, [(RES_BROKER, "", [("compression.type", OP_SET, "gzip")]),
                                    (RES_TOPIC, "bfirst", [("compression.type", OP_SET, "zstd")])]) == \
            [(0, None), (0, None)]
        # topic first: the broker's new default must reach this topic too
        assert incremental_many(b, [(RES_TOPIC, "tfirst", [("retention.ms", OP_SET, "3600000")]),
                                    (RES_BROKER, "", [("compression.type", OP_SET, "lz4")])]) == \
            [(0, None), (0, None)]
        for name, codec in (("bfirst", "zstd"), ("tfirst", "lz4"), ("plain", "lz4")):
            produce(b, name, vals(name, 20), "none")
            got = {x[0] for x in stored_batches(b, name)}
            assert got == {CODEC[codec]}, (name, codec, got)
        assert describe(b, ConfigResource.Type.TOPIC, "tfirst")["retention.ms"].value == "3600000"


@test
def read_only_broker_keys_are_refused():
    with broker() as b:
        for key, value in (("num.partitions", "3"), ("listeners", "PLAINTEXT://:1"),
                           ("log.retention.hours", "1")):
            err, msg = incremental(b, RES_BROKER, "", [(key, OP_SET, value)])
            assert err == INVALID_REQUEST and "Cannot update these configs dynamically" in msg \
                and key in msg, (key, err, msg)
        err, msg = incremental(b, RES_BROKER, "", [("log.retention.ms", OP_SET, "soon")])
        assert err == INVALID_CONFIG and "log.retention.ms" in msg, (err, msg)
        err, msg = incremental(b, RES_BROKER, "7", [("log.retention.ms", OP_SET, "1")])
        assert err != 0, (err, msg)
        assert describe(b, ConfigResource.Type.BROKER, "1")["log.retention.ms"].value == "604800000"


@test
def concurrent_changes_of_one_topic_run_one_after_the_other():
    """Three clients change one topic at once (IncrementalAlterConfigs of
    retention.ms from two connections, in odd rounds DeleteTopics from a
    third, all sent before any answer is read): each is answered, the
    topic is listed once (or, deleted, not at all: a change that waited
    behind the delete gets UNKNOWN_TOPIC_OR_PARTITION and does not bring
    it back), its retention.ms is one of the two values, and the broker
    stops cleanly. Each topic operation builds the topic's new version from
    the published one: two at once on one topic published it twice and
    retired its old version twice (the broker aborted: double free)."""
    DELETE_TOPICS, METADATA, UNKNOWN_TOPIC = 20, 3, 3

    def alter(topic, value):
        return W().array([(RES_TOPIC, topic)], lambda w, r: w.i8(r[0]).str(r[1]).array(
            [("retention.ms", OP_SET, value)], lambda w, o: w.str(o[0]).i8(o[1]).str(o[2]))).i8(0)

    def listed(c, topic):
        r = c.request(METADATA, 1, W().i32(-1))
        r.array(lambda r: (r.i32(), r.str(), r.i32(), r.str()))
        r.i32()
        names = r.array(lambda r: (r.i16(), r.str(), r.i8(), r.array(lambda r: (
            r.i16(), r.i32(), r.i32(), r.array(lambda r: r.i32()), r.array(lambda r: r.i32())))))
        r.done()
        return [t[1] for t in names].count(topic)

    with broker() as b, TConn(b.bootstrap) as c0, TConn(b.bootstrap) as c1, TConn(b.bootstrap) as c2, \
            TConn(b.bootstrap) as c3:
        for rnd in range(4):
            t = "cc%d" % rnd
            assert create(b, t, partitions=32) is None
            x = c1.send(INCREMENTAL_ALTER_CONFIGS, 0, alter(t, "1000001").b)
            y = c2.send(INCREMENTAL_ALTER_CONFIGS, 0, alter(t, "1000002").b)
            z = c3.send(DELETE_TOPICS, 1, W().array([t], lambda w, n: w.str(n)).i32(30000).b) if rnd % 2 else None
            errs = []
            for conn, corr in ((c1, x), (c2, y)):
                r = conn.recv(corr)
                r.i32()
                errs.append(r.array(lambda r: (r.i16(), r.str(), r.i8(), r.str()))[0][0])
            if z:
                r = c3.recv(z)
                r.i32()
                derr = r.array(lambda r: (r.str(), r.i16()))[0][1]
                assert derr == 0, "DeleteTopics %s: error %d" % (t, derr)
                assert all(e in (0, UNKNOWN_TOPIC) for e in errs), errs
                assert listed(c0, t) == 0, "%s deleted, yet Metadata lists it" % t
            else:
                assert errs == [0, 0], errs
                assert listed(c0, t) == 1, "%s listed %d times" % (t, listed(c0, t))
                assert describe(b, ConfigResource.Type.TOPIC, t)["retention.ms"].value in ("1000001", "1000002")


if __name__ == "__main__":
    main("topic configs")
