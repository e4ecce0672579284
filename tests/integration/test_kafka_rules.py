#!/usr/bin/python3
"""Kafka's rules at the edges, over raw frames against a real sluiced: what
an adversary (or an unlucky client) sends on purpose, and the exact error
Kafka answers. Each test here was written before its fix and failed on the
broker of 8c36be7 (issue 17):

- reserved names: no client may create, delete, grow, reconfigure, write to
  or trim `__cluster_metadata`, `__consumer_offsets` or
  `__transaction_state`; creating and deleting `__cluster_metadata` used to
  delete the metadata log itself (a new cluster id and every topic gone at
  the next start);
- DeleteRecords: only -1 means "the high watermark"; -1001 deleted every
  record of the partition;
- CreateTopics: -1 means the default, any other count or replication factor
  below 1 is INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR (-5 partitions
  made a topic with the default count);
- a SASL listener whose mechanism Sluice does not implement (GSSAPI,
  OAUTHBEARER) stops the start (SASL listeners once served plaintext);
- Metadata for an illegal topic name is INVALID_TOPIC_EXCEPTION, so a
  producer fails at once (it got UNKNOWN_TOPIC_OR_PARTITION and waited out
  its message timeout);
- Fetch respects the request's max_bytes: only the first batch of the first
  non-empty partition may exceed it (KIP-74);
- ListGroups v4 answers each group's state and filters by state (KIP-518);
- a Metadata response larger than the request's memory (a topic of 18,500
  partitions) is answered, not UNKNOWN_SERVER_ERROR.
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICED, broker, free_port, main, skip, temp_dir, test  # noqa: E402
from kraw import R, W, compact_str, read_compact_str, read_uvarint, uvarint  # noqa: E402
from ktxn import READ_UNCOMMITTED, TConn, batch, new_topic, plain  # noqa: E402

OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REQUEST = 42

METADATA, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 3, 19, 20, 21
ALTER_CONFIGS, CREATE_PARTITIONS, LIST_GROUPS = 33, 37, 16
JOIN_GROUP, SYNC_GROUP = 11, 14

RESERVED = ["__cluster_metadata", "__consumer_offsets", "__transaction_state"]


# ---- requests the shared helpers do not have ----------------------------------

def create_topics(c, name, partitions=1, replication=1, configs=()):
    """CreateTopics v1: (error, message)."""
    def topic(w, _):
        w.str(name).i32(partitions).i16(replication).array([], None)
        w.array(list(configs), lambda w, kv: w.str(kv[0]).str(kv[1]))
    w = W().array([name], topic).i32(30000).i8(0)
    r = c.request(CREATE_TOPICS, 1, w)
    res = r.array(lambda r: (r.str(), r.i16(), r.str()))
    r.done()
    return res[0][1], res[0][2]


def delete_topic(c, name):
    r = c.request(DELETE_TOPICS, 0, W().array([name], W.str).i32(30000))
    res = dict(r.array(lambda r: (r.str(), r.i16())))
    r.done()
    return res[name]


def create_partitions(c, name, count):
    w = W().array([name], lambda w, n: w.str(n).i32(count).i32(-1)).i32(30000).i8(0)
    r = c.request(CREATE_PARTITIONS, 0, w)
    r.i32()
    res = r.array(lambda r: (r.str(), r.i16(), r.str()))
    r.done()
    return res[0][1]


def alter_topic_config(c, name, key, value):
    w = W().array([name], lambda w, n: w.i8(2).str(n).array([(key, value)], lambda w, kv: w.str(kv[0]).str(kv[1])))
    w.i8(0)
    r = c.request(ALTER_CONFIGS, 0, w)
    r.i32()
    res = r.array(lambda r: (r.i16(), r.str(), r.i8(), r.str()))
    r.done()
    return res[0][0]


def delete_records(c, name, partition, offset):
    """DeleteRecords v0: (error, low watermark)."""
    w = W().array([name], lambda w, n: w.str(n).array([(partition, offset)], lambda w, po: w.i32(po[0]).i64(po[1])))
    w.i32(30000)
    r = c.request(DELETE_RECORDS, 0, w)
    r.i32()
    res = r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i64(), r.i16()))))
    r.done()
    _, parts = res[0]
    return parts[0][2], parts[0][1]


def metadata(c, names, allow_auto=False):
    """Metadata v4: (cluster id, {topic: (error, internal, partitions)})."""
    w = W().array(names, W.str).i8(1 if allow_auto else 0)
    r = c.request(METADATA, 4, w)
    r.i32()
    r.array(lambda r: (r.i32(), r.str(), r.i32(), r.str()))
    cluster = r.str()
    r.i32()

    def part(r):
        e, i, _leader = r.i16(), r.i32(), r.i32()
        r.array(R.i32)
        r.array(R.i32)
        return (i, e)

    topics = r.array(lambda r: (r.i16(), r.str(), r.i8(), r.array(part)))
    r.done()
    return cluster, {t: (e, internal, len(ps)) for e, t, internal, ps in topics}


def end_offset(c, name, partition=0):
    return c.latest(name, partition, READ_UNCOMMITTED)


# ---- flexible encodings (ListGroups v4) ----------------------------------------

def list_groups_v4(c, states):
    """ListGroups v4 (flexible: request header v2, response header v1):
    (error, {group: (protocol type, state)})."""
    body = uvarint(len(states) + 1) + b"".join(compact_str(s) for s in states) + b"\x00"
    r = c.request_flex(LIST_GROUPS, 4, body)
    r.i32()                              # throttle
    err = r.i16()
    groups = {}
    for _ in range(read_uvarint(r) - 1):
        g, pt, st = read_compact_str(r), read_compact_str(r), read_compact_str(r)
        assert read_uvarint(r) == 0
        groups[g] = (pt, st)
    assert read_uvarint(r) == 0
    r.done()
    return err, groups


# ---- 1. reserved names -------------------------------------------------------------

@test
def reserved_names_are_refused_everywhere():
    with broker() as b:
        c = TConn(b.bootstrap)
        cluster, _ = metadata(c, [])
        new_topic(c, "user", 1)
        assert c.produce("user", 0, plain([b"a", b"b", b"c"])).error == 0
        for name in RESERVED:
            err, msg = create_topics(c, name, 1)
            assert err == INVALID_REQUEST, (name, err, msg)
            assert msg and name in msg, (name, msg)
            assert delete_topic(c, name) == INVALID_REQUEST, name
            assert create_partitions(c, name, 100) == INVALID_REQUEST, name
            assert alter_topic_config(c, name, "retention.ms", "1000") == INVALID_REQUEST, name
            err = c.produce(name, 0, plain([b"x"])).error
            assert err in (INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION) and err != 0, (name, err)
            err, _ = delete_records(c, name, 0, -1)
            assert err in (INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION) and err != 0, (name, err)
        # auto-creation of the metadata log's name: nothing is created
        _, md = metadata(c, ["__cluster_metadata"], allow_auto=True)
        assert md["__cluster_metadata"][0] != 0, md
        c.close()
        # the metadata log is still the broker's: same cluster, same topics
        b.restart()
        c = TConn(b.bootstrap)
        cluster2, md = metadata(c, ["user"])
        assert cluster2 == cluster, (cluster, cluster2)
        assert md["user"][0] == 0, md
        assert end_offset(c, "user") == 3
        c.close()
        assert os.path.isdir(os.path.join(b.data_dir, "__cluster_metadata-raft"))


@test
def internal_topics_are_shown_as_internal_and_user_double_underscore_topics_are_not():
    with broker() as b:
        c = TConn(b.bootstrap)
        # Kafka: only its own internal topics are internal; a user may name a
        # topic __anything else and write to it
        err, msg = create_topics(c, "__mine", 1)
        assert err == 0, (err, msg)
        assert c.produce("__mine", 0, plain([b"v"])).error == 0
        _, md = metadata(c, ["__consumer_offsets", "__mine"])
        assert md["__consumer_offsets"][1] == 1, md
        assert md["__mine"][1] == 0, md
        c.close()


# ---- 4. DeleteRecords ----------------------------------------------------------------

@test
def delete_records_only_minus_one_means_the_high_watermark():
    with broker() as b:
        c = TConn(b.bootstrap)
        new_topic(c, "dr", 1)
        for i in range(4):
            assert c.produce("dr", 0, plain([b"%d" % i] * 5)).error == 0
        assert end_offset(c, "dr") == 20
        for off in (-1001, -2, 21, 1 << 40):
            err, low = delete_records(c, "dr", 0, off)
            assert err == OFFSET_OUT_OF_RANGE, (off, err, low)
        f = c.fetch1("dr", 0, 0, READ_UNCOMMITTED)
        assert f.error == 0 and f.log_start == 0, f
        assert sum(len(bt.records) for bt in f.batches) == 20
        err, low = delete_records(c, "dr", 0, 5)
        assert (err, low) == (0, 5), (err, low)
        err, low = delete_records(c, "dr", 0, 3)        # below the log start
        assert err == OFFSET_OUT_OF_RANGE, (err, low)
        err, low = delete_records(c, "dr", 0, -1)
        assert (err, low) == (0, 20), (err, low)
        c.close()


# ---- 6. settings Kafka refuses --------------------------------------------------------

@test
def create_topics_refuses_counts_below_one_other_than_minus_one():
    with broker() as b:
        c = TConn(b.bootstrap)
        for np in (-5, -2, 0):
            err, msg = create_topics(c, "p%d" % -np, np, 1)
            assert err == INVALID_PARTITIONS, (np, err, msg)
        for rf in (0, -2, -100):
            err, msg = create_topics(c, "r%d" % -rf, 1, rf)
            assert err == INVALID_REPLICATION_FACTOR, (rf, err, msg)
        err, msg = create_topics(c, "defaults", -1, -1)
        assert err == 0, (err, msg)
        _, md = metadata(c, ["defaults", "p5", "r2"])
        assert md["defaults"] == (0, 0, 1), md
        assert md["p5"][0] == UNKNOWN_TOPIC_OR_PARTITION and md["r2"][0] == UNKNOWN_TOPIC_OR_PARTITION, md
        c.close()


def create_topics_assigned(c, name, assignment):
    """CreateTopics v1 with an explicit assignment ([brokers] per partition,
    in order): (error, message)."""
    def topic(w, _):
        w.str(name).i32(-1).i16(-1)
        w.array(list(enumerate(assignment)), lambda w, pa: w.i32(pa[0]).array(pa[1], W.i32))
        w.array([], None)
    w = W().array([name], topic).i32(30000).i8(0)
    r = c.request(CREATE_TOPICS, 1, w)
    res = r.array(lambda r: (r.str(), r.i16(), r.str()))
    r.done()
    return res[0][1], res[0][2]


def partition_leaders(c, name):
    """Metadata v4 of one topic: [(leader, replicas, isr)] by partition."""
    r = c.request(METADATA, 4, W().array([name], W.str).i8(0))
    r.i32()
    brokers = r.array(lambda r: (r.i32(), r.str(), r.i32(), r.str()))
    r.str()
    r.i32()
    topics = r.array(lambda r: (r.i16(), r.str(), r.i8(),
                                r.array(lambda r: (r.i16(), r.i32(), r.i32(), r.array(R.i32), r.array(R.i32)))))
    r.done()
    parts = sorted(topics[0][3], key=lambda p: p[1])
    return brokers, [(leader, reps, isr) for _e, _i, leader, reps, isr in parts]


@test
def replicas_beyond_the_brokers_or_on_an_unknown_broker_are_refused():
    """Kafka's rules for placement, on one broker: a replication factor of 2
    is INVALID_REPLICATION_FACTOR (38, "larger than available brokers: 1");
    an explicit assignment naming broker 9 is INVALID_REPLICA_ASSIGNMENT
    (39); one naming this broker is created there, and Metadata shows this
    broker as the leader, the replicas and the ISR of every partition."""
    INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT = 38, 39
    with broker() as b:
        c = TConn(b.bootstrap)
        err, msg = create_topics(c, "two", 3, 2)
        assert err == INVALID_REPLICATION_FACTOR and "larger than available brokers: 1" in msg, (err, msg)
        brokers, _ = partition_leaders(c, "__consumer_offsets")
        assert len(brokers) == 1, brokers
        me = brokers[0][0]
        err, msg = create_topics_assigned(c, "nine", [[me], [9]])
        assert err == INVALID_REPLICA_ASSIGNMENT and "broker 9" in msg, (err, msg)
        err, msg = create_topics_assigned(c, "twice", [[me, me]])
        assert err == INVALID_REPLICA_ASSIGNMENT, (err, msg)
        err, msg = create_topics_assigned(c, "mine", [[me], [me], [me]])
        assert err == 0, (err, msg)
        _, md = metadata(c, ["two", "nine", "mine"])
        assert md["two"][0] == UNKNOWN_TOPIC_OR_PARTITION and md["nine"][0] == UNKNOWN_TOPIC_OR_PARTITION, md
        _, parts = partition_leaders(c, "mine")
        assert parts == [(me, [me], [me])] * 3, parts
        assert c.produce_many({("mine", 2): plain([b"x"])}, acks=-1)[("mine", 2)].error == 0
        c.close()


@test
def sasl_listeners_with_unimplemented_mechanisms_stop_the_start():
    # (SSL is served since 2026-12-02: tests/integration/test_tls.py; SASL
    # with PLAIN and SCRAM: tests/integration/test_sasl.py)
    for proto in ("SASL_SSL", "SASL_PLAINTEXT"):
        for mech in ("GSSAPI", "OAUTHBEARER"):
            d = temp_dir()
            try:
                p = subprocess.run([SLUICED, "--data-dir", os.path.join(d, "data"), "--shards", "1",
                                    "--set", "listeners=PLAINTEXT://127.0.0.1:%d,%s://127.0.0.1:%d"
                                    % (free_port(), proto, free_port()),
                                    "--set", "sasl.enabled.mechanisms=SCRAM-SHA-512," + mech],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=60)
                err = p.stderr.decode()
                assert p.returncode == 2, (proto, p.returncode, err)
                assert "sasl.enabled.mechanisms" in err and mech in err, (proto, err)
                assert b"listening on" not in p.stdout, p.stdout
            finally:
                subprocess.run(["rm", "-rf", d])


# ---- 10. Metadata for an illegal name ------------------------------------------------

@test
def metadata_for_an_illegal_topic_name_is_invalid_topic():
    with broker() as b:
        c = TConn(b.bootstrap)
        for allow in (False, True):
            _, md = metadata(c, ["bad$#!", "x" * 250, "..", "fine"], allow_auto=allow)
            assert md["bad$#!"][0] == INVALID_TOPIC_EXCEPTION, md
            assert md["x" * 250][0] == INVALID_TOPIC_EXCEPTION, md
            assert md[".."][0] == INVALID_TOPIC_EXCEPTION, md
            assert md["fine"][0] == (0 if allow else UNKNOWN_TOPIC_OR_PARTITION), md
        c.close()


@test
def a_producer_to_an_illegal_topic_fails_at_once():
    from confluent_kafka import KafkaException, Producer
    with broker() as b:
        errors = []
        p = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 60000})

        def cb(err, _msg):
            errors.append(err)
        try:
            p.produce("bad$#!", b"v", on_delivery=cb)
        except (KafkaException, BufferError) as e:    # refused locally: also at once
            errors.append(e)
        left = p.flush(20)
        assert errors, "no delivery report within 20 s of a 60 s message timeout (left %d)" % left
        assert "Invalid" in str(errors[0]) or "INVALID" in str(errors[0]) or "illegal" in str(errors[0]), errors


# ---- 11. Fetch max_bytes ----------------------------------------------------------------

def fetch_sizes(c, parts, max_bytes, part_max):
    """Fetch v4 with a request limit and a per-partition limit: {(t, p):
    [batch sizes]} and the response's record bytes in all."""
    w = W().i32(-1).i32(0).i32(1).i32(max_bytes).i8(READ_UNCOMMITTED)
    topics = {}
    for (t, p), off in parts.items():
        topics.setdefault(t, []).append((p, off))
    w.array(sorted(topics.items()),
            lambda w, tv: w.str(tv[0]).array(tv[1], lambda w, pv: w.i32(pv[0]).i64(pv[1]).i32(part_max)))
    r = c.request(1, 4, w)
    r.i32()
    out, total = {}, 0

    def pdata(r):
        idx, err = r.i32(), r.i16()
        r.i64()
        r.i64()
        r.array(lambda r: (r.i64(), r.i64()))
        blob = r.bytes() or b""
        sizes, at = [], 0
        while at + 12 <= len(blob):
            n = int.from_bytes(blob[at + 8:at + 12], "big") + 12
            if at + n > len(blob):
                break
            sizes.append(n)
            at += n
        return idx, err, sizes, len(blob)
    for t, ps in r.array(lambda r: (r.str(), r.array(pdata))):
        for idx, err, sizes, n in ps:
            assert err == 0, (t, idx, err)
            out[(t, idx)] = sizes
            total += n
    r.done()
    return out, total


@test
def fetch_respects_the_request_max_bytes():
    with broker(settings={"message.max.bytes": 4000000}) as b:
        c = TConn(b.bootstrap)
        new_topic(c, "big", 2)
        big = os.urandom(920000)
        for p in (0, 1):
            for _ in range(2):
                assert c.produce("big", p, batch([big])).error == 0
        c.close()
        # read from the disk (the in-memory tail would hand out one chunk a
        # read): two batches fit in one read of the shard's buffers
        b.restart()
        c = TConn(b.bootstrap)
        # one partition, two batches of ~921 KB, a request limit of 1,000,000
        got, total = fetch_sizes(c, {("big", 0): 0}, 1000000, 10 << 20)
        assert len(got[("big", 0)]) == 1 and total <= 1000000 + 1024, (got, total)
        # two partitions: the second gets nothing once the first used the budget
        got, total = fetch_sizes(c, {("big", 0): 0, ("big", 1): 0}, 1000000, 10 << 20)
        assert total <= 1000000 + 1024, (got, total)
        assert len(got[("big", 0)]) + len(got[("big", 1)]) == 1, got
        # a limit smaller than one batch: the first batch still comes (KIP-74)
        got, total = fetch_sizes(c, {("big", 0): 0}, 1000, 10 << 20)
        assert len(got[("big", 0)]) == 1, got
        # room for more: both partitions answer
        got, total = fetch_sizes(c, {("big", 0): 0, ("big", 1): 0}, 8 << 20, 10 << 20)
        assert len(got[("big", 0)]) >= 1 and len(got[("big", 1)]) >= 1, got
        c.close()


# ---- a Metadata response larger than a request's memory ----------------------------

@test
def metadata_of_a_topic_with_18500_partitions():
    """A response is built in the request's arena (1 MiB at least); a
    Metadata answer for 18,500 partitions (Metadata v4) is larger, and was answered
    UNKNOWN_SERVER_ERROR (-1)."""
    import resource
    n = 18500
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 20000:
        skip("needs 20,000 file descriptors (the hard RLIMIT_NOFILE is %d)" % hard)
    with broker(nofile=20000) as b:
        c = TConn(b.bootstrap, timeout=120)
        err, msg = create_topics(c, "wide", n, 1)
        assert err == 0, (err, msg)
        _, md = metadata(c, ["wide"])
        assert md["wide"] == (0, 0, n), md["wide"]
        _, md = metadata(c, None)          # every topic, the internal ones too
        assert md["wide"] == (0, 0, n), md["wide"]
        c.close()


# ---- 13. ListGroups v4 ------------------------------------------------------------------

@test
def list_groups_v4_gives_states_and_filters_by_them():
    with broker() as b:
        c = TConn(b.bootstrap)
        new_topic(c, "lg", 1)
        # a Stable group (one member, joined and synced) and an Empty one
        # (offsets committed, no member)
        from kraw import subscription
        j = c.join_group("g-stable", protocols=[("range", subscription(["lg"]))], ver=2)
        if j.error == 79:     # MEMBER_ID_REQUIRED (JoinGroup v4+); v2 never asks
            j = c.join_group("g-stable", member_id=j.member_id, protocols=[("range", subscription(["lg"]))], ver=2)
        assert j.error == 0, j
        assert c.sync_group("g-stable", j.generation, j.member_id, [(j.member_id, b"")]).error == 0
        assert c.offset_commit("g-empty", {("lg", 0): (1, "")}) == {("lg", 0): 0}
        err, groups = list_groups_v4(c, [])
        assert err == 0, err
        assert groups.get("g-stable") == ("consumer", "Stable"), groups
        assert groups.get("g-empty", ("", ""))[1] == "Empty", groups
        err, groups = list_groups_v4(c, ["Stable"])
        assert err == 0 and set(groups) == {"g-stable"}, groups
        err, groups = list_groups_v4(c, ["empty", "dead"])      # case-insensitive, as Kafka
        assert err == 0 and set(groups) == {"g-empty"}, groups
        c.close()


@test
def acks_all_needs_min_insync_replicas_in_sync():
    """Kafka's rule: acks=all is refused with NOT_ENOUGH_REPLICAS (19),
    before anything is appended, when the partition has fewer in-sync
    replicas than min.insync.replicas (the topic's, or the broker's). On one
    node the ISR is this broker, so 2 refuses every acks=all write; acks=1
    and acks=0 are not asked. A default.replication.factor above the one
    broker refuses a create that takes the default, as Kafka does."""
    NOT_ENOUGH_REPLICAS, INVALID_REPLICATION_FACTOR = 19, 38
    with broker() as b:
        c = TConn(b.bootstrap)
        assert create_topics(c, "strict", configs=[("min.insync.replicas", "2")])[0] == 0
        assert create_topics(c, "loose")[0] == 0
        assert c.produce_many({("strict", 0): plain([b"x"])}, acks=-1)[("strict", 0)].error == NOT_ENOUGH_REPLICAS
        assert c.produce_many({("strict", 0): plain([b"y"])}, acks=1)[("strict", 0)].error == 0
        assert c.produce_many({("loose", 0): plain([b"z"])}, acks=-1)[("loose", 0)].error == 0
        # nothing of the refused write was appended: one record in strict
        r = c.fetch({("strict", 0): 0}, READ_UNCOMMITTED)[("strict", 0)]
        assert r.error == 0 and r.hw == 1, (r.error, r.hw)
        c.close()
    with broker(settings={"min.insync.replicas": "2", "default.replication.factor": "3"}) as b:
        c = TConn(b.bootstrap)
        assert create_topics(c, "plain")[0] == 0, "an explicit replication factor 1 is created"
        assert create_topics(c, "own", configs=[("min.insync.replicas", "1")])[0] == 0
        err, msg = create_topics(c, "dflt", replication=-1)
        assert err == INVALID_REPLICATION_FACTOR and "default.replication.factor" in msg, (err, msg)
        assert c.produce_many({("plain", 0): plain([b"x"])}, acks=-1)[("plain", 0)].error == NOT_ENOUGH_REPLICAS
        assert c.produce_many({("own", 0): plain([b"x"])}, acks=-1)[("own", 0)].error == 0
        c.close()


if __name__ == "__main__":
    main("kafka_rules")
