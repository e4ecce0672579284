#!/usr/bin/python3
"""Consumer groups with the Python clients against a real sluiced.

kafka-python 2.0.2 (python3-kafka: JoinGroup v2, SyncGroup v1, Heartbeat v1,
OffsetCommit v2, OffsetFetch v1 and its admin client's ListGroups,
DescribeGroups, OffsetFetch with null topics, DeleteGroups) and
confluent-kafka-python 1.7.0 (librdkafka 2.0.2; AdminClient.list_groups is
ListGroups v0 + DescribeGroups v0; 1.7 has no list_consumer_group_offsets or
delete_consumer_groups, so those go through kafka-python's admin client).

kafka-python consumers are not thread-safe: each one lives in its own thread
(Member), which polls continuously (so it heartbeats and rejoins) and runs
what the test asks of it (commit, committed, ...) between polls."""

import gc
import os
import queue
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, broker, main, test  # noqa: E402
import kraw  # noqa: E402

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from kafka.errors import GroupIdNotFoundError, NoError, NonEmptyGroupError  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

SETTINGS = {"group.initial.rebalance.delay.ms": 0}
COMMON = dict(api_version_auto_timeout_ms=30000, request_timeout_ms=40000)
GROUP_TIMING = dict(session_timeout_ms=10000, heartbeat_interval_ms=300, max_poll_interval_ms=30000,
                    fetch_max_wait_ms=100)


def wait_for(cond, what):
    """Poll a condition under the hang guard (not a timing threshold)."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("hang guard waiting for: " + (what() if callable(what) else what))
        time.sleep(0.05)


class Member(threading.Thread):
    """One kafka-python group consumer in its own thread."""

    def __init__(self, b, group, topic, name, **kw):
        super().__init__(daemon=True, name=name)
        self.c = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, group_id=group, client_id=name,
                               enable_auto_commit=False, auto_offset_reset="earliest",
                               **dict(COMMON, **dict(GROUP_TIMING, **kw)))
        self.name_ = name
        self.lock = threading.Lock()
        self.records = []
        self.assigned = set()
        self.calls = queue.Queue()
        self.stopping = threading.Event()
        self.error = None
        self.start()

    def run(self):
        try:
            while not self.stopping.is_set():
                while True:
                    try:
                        fn, box = self.calls.get_nowait()
                    except queue.Empty:
                        break
                    try:
                        box["value"] = fn(self.c)
                    except BaseException as e:  # handed back to the caller
                        box["error"] = e
                    box["done"].set()
                recs = self.c.poll(timeout_ms=100)
                with self.lock:
                    for rs in recs.values():
                        self.records.extend(rs)
                    self.assigned = set(self.c.assignment())
        except BaseException as e:
            self.error = e
        finally:
            self.c.close()  # LeaveGroup

    def call(self, fn):
        box = {"done": threading.Event()}
        self.calls.put((fn, box))
        assert box["done"].wait(HANG_GUARD), "%s: call hung (hang guard)" % self.name_
        if "error" in box:
            raise box["error"]
        return box["value"]

    def snapshot(self):
        with self.lock:
            assert self.error is None, "%s died: %r" % (self.name_, self.error)
            return set(self.assigned), list(self.records)

    def close(self):
        self.stopping.set()
        self.join(HANG_GUARD)
        assert not self.is_alive(), "%s: close hung" % self.name_
        assert self.error is None, "%s died: %r" % (self.name_, self.error)


def produce(b, topic, per_partition, partitions, tag):
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", **COMMON)
    futs = []
    for part in range(partitions):
        for i in range(per_partition):
            futs.append(p.send(topic, key=b"%s-%d-%d" % (tag, part, i), value=b"v", partition=part))
    p.flush()
    for f in futs:
        f.get(timeout=HANG_GUARD)
    p.close()


def offsets_by_partition(records):
    out = {}
    for r in records:
        out.setdefault(r.partition, []).append(r.offset)
    return out


@test
def kafka_python_split_commit_resume():
    """Two kafka-python consumers in group "kpg" split a 4-partition topic
    (2 partitions each, disjoint); 25 records per partition are each read
    exactly once, by the owner of the partition. A commits its positions
    (25), B commits 20 with metadata (records 20..24 stay uncommitted). Both
    close (LeaveGroup): the group is Empty and OffsetFetch (consumer and
    admin, with null topics) shows exactly those offsets. 10 more records per
    partition are produced; a new consumer C in the group gets all four
    partitions and reads from the committed offsets: A's partitions 25..34,
    B's 20..34, nothing lost, nothing else reread."""
    topic, group, parts = "kpg", "kpg-group", 4
    with broker(settings=SETTINGS) as b:
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap, **COMMON)
        adm.create_topics([NewTopic(topic, num_partitions=parts, replication_factor=1)])
        a = Member(b, group, topic, "kp-a")
        wait_for(lambda: len(a.snapshot()[0]) == parts, "A alone owns all 4 partitions")
        m_b = Member(b, group, topic, "kp-b")

        def split():
            sa, sb = a.snapshot()[0], m_b.snapshot()[0]
            return len(sa) == 2 and len(sb) == 2 and not (sa & sb) and len(sa | sb) == parts
        wait_for(split, lambda: "split 2/2: A %s B %s" % (a.snapshot()[0], m_b.snapshot()[0]))
        gi = adm.describe_consumer_groups([group])[0]
        assert (gi.error_code, gi.group, gi.state, gi.protocol_type) == (0, group, "Stable", "consumer"), gi
        assert sorted(m.client_id for m in gi.members) == ["kp-a", "kp-b"], gi.members
        owned = {m.client_id: sorted(p for _, ps in m.member_assignment.assignment for p in ps)
                 for m in gi.members}
        a_parts = sorted(tp.partition for tp in a.snapshot()[0])
        b_parts = sorted(tp.partition for tp in m_b.snapshot()[0])
        assert owned == {"kp-a": a_parts, "kp-b": b_parts}, (owned, a_parts, b_parts)

        produce(b, topic, 25, parts, b"one")
        wait_for(lambda: len(a.snapshot()[1]) >= 50 and len(m_b.snapshot()[1]) >= 50,
                 lambda: "A read %d, B read %d of 50 each" % (len(a.snapshot()[1]), len(m_b.snapshot()[1])))
        time.sleep(0.3)  # anything extra (a duplicate) would show up now
        for m, mine in ((a, a_parts), (m_b, b_parts)):
            assert sorted(tp.partition for tp in m.snapshot()[0]) == mine, "assignment moved"
            got = offsets_by_partition(m.snapshot()[1])
            assert got == {p: list(range(25)) for p in mine}, (m.name_, got)

        tps_a = [TopicPartition(topic, p) for p in a_parts]
        tps_b = [TopicPartition(topic, p) for p in b_parts]
        a.call(lambda c: c.commit())
        m_b.call(lambda c: c.commit({tp: OffsetAndMetadata(20, "b-%d" % tp.partition) for tp in tps_b}))
        assert a.call(lambda c: [c.committed(tp) for tp in tps_a]) == [25, 25]
        assert m_b.call(lambda c: [c.committed(tp) for tp in tps_b]) == [20, 20]
        a.close()
        m_b.close()

        want = {tp: OffsetAndMetadata(25, "") for tp in tps_a}
        want.update({tp: OffsetAndMetadata(20, "b-%d" % tp.partition) for tp in tps_b})
        have = adm.list_consumer_group_offsets(group)
        assert have == want, "committed offsets read back %s, want %s" % (have, want)
        gi = wait_for(lambda: (lambda g: g if g.state == "Empty" else None)(adm.describe_consumer_groups([group])[0]),
                      "group Empty after both left")
        assert gi.members == [], gi

        produce(b, topic, 10, parts, b"two")
        c = Member(b, group, topic, "kp-c")
        wait_for(lambda: len(c.snapshot()[1]) >= 2 * 10 + 2 * 15,
                 lambda: "C read %s" % offsets_by_partition(c.snapshot()[1]))
        time.sleep(0.3)
        before = {(r.partition, r.offset) for m in (a, m_b) for r in m.records}
        twice = before & {(r.partition, r.offset) for r in c.snapshot()[1]}
        assert twice == {(p, o) for p in b_parts for o in range(20, 25)}, \
            "%d records read twice after the restart, expected B's 10 uncommitted: %s" % (len(twice), sorted(twice))
        got = offsets_by_partition(c.snapshot()[1])
        expect = {p: list(range(25, 35)) for p in a_parts}
        expect.update({p: list(range(20, 35)) for p in b_parts})
        assert got == expect, got
        assert len(c.snapshot()[0]) == parts
        c.call(lambda c: c.commit())
        c.close()
        assert adm.list_consumer_group_offsets(group) == {TopicPartition(topic, p): OffsetAndMetadata(35, "")
                                                          for p in range(parts)}
        adm.close()


@test
def kafka_python_rejoin_after_member_leaves():
    """A member leaving (close: LeaveGroup) hands its partition to the one
    that stays, which resumes it from the leaver's committed offset (7 of
    12: 7..11 reread) and its own partition from its own commit (nothing
    reread)."""
    topic, group, parts = "kpl", "kpl-group", 2
    with broker(settings=SETTINGS) as b:
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap, **COMMON)
        adm.create_topics([NewTopic(topic, num_partitions=parts, replication_factor=1)])
        a = Member(b, group, topic, "kpl-a")
        wait_for(lambda: len(a.snapshot()[0]) == parts, "A owns both partitions")
        m_b = Member(b, group, topic, "kpl-b")
        wait_for(lambda: len(a.snapshot()[0]) == 1 and len(m_b.snapshot()[0]) == 1
                 and a.snapshot()[0] != m_b.snapshot()[0], "split 1/1")
        pb = next(iter(m_b.snapshot()[0])).partition
        pa = 1 - pb
        produce(b, topic, 12, parts, b"x")
        wait_for(lambda: len(m_b.snapshot()[1]) >= 12 and len(a.snapshot()[1]) >= 12, "both read 12")
        m_b.call(lambda c: c.commit({TopicPartition(topic, pb): OffsetAndMetadata(7, "b")}))
        a.call(lambda c: c.commit())  # A keeps pa and resumes it at 12
        m_b.close()
        wait_for(lambda: len(a.snapshot()[0]) == parts, "A owns both again")
        wait_for(lambda: len(a.snapshot()[1]) >= 12 + 5, "A reread 7..11 of B's partition")
        time.sleep(0.3)
        got = offsets_by_partition(a.snapshot()[1])
        assert got == {pa: list(range(12)), pb: list(range(7, 12))}, got
        a.close()
        adm.close()


# ---- confluent-kafka-python (librdkafka) -----------------------------------

def ck_consumer(b, group, name):
    from confluent_kafka import Consumer
    return Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "client.id": name,
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 300,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "topic.metadata.refresh.interval.ms": 1000})


def ck_group(adm, group, one=True):
    gs = adm.list_groups(group=group, timeout=30) if one else adm.list_groups(timeout=30)
    found = [g for g in gs if g.id == group]
    return found[0] if found else None


@test
def confluent_list_groups_and_offsets():
    """confluent-kafka AdminClient.list_groups (ListGroups v0 +
    DescribeGroups v0), all groups and one group: group "ckg" with one
    librdkafka consumer is Stable, protocol type "consumer", protocol
    "range", one member ("ck-one-..." id, the same in both calls), client id
    and host,
    its subscription and its assignment (all 3 partitions); with two members
    the assignments are disjoint and cover the topic. Offsets committed by
    the consumer read back through Consumer.committed and kafka-python's
    list_consumer_group_offsets. After both close the group is Empty with no
    members; kafka-python's delete_consumer_groups refuses a group with
    members (NON_EMPTY_GROUP), reports an unknown one (GROUP_ID_NOT_FOUND)
    and deletes the empty one: it is no longer listed and its offsets are
    gone."""
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient
    topic, group, parts = "ckt", "ckg", 3
    with broker(settings=SETTINGS) as b:
        kadm = KafkaAdminClient(bootstrap_servers=b.bootstrap, **COMMON)
        kadm.create_topics([NewTopic(topic, num_partitions=parts, replication_factor=1)])
        produce(b, topic, 10, parts, b"ck")
        adm = AdminClient({"bootstrap.servers": b.bootstrap})
        c1 = ck_consumer(b, group, "ck-one")
        c1.subscribe([topic])
        got = []
        deadline = time.monotonic() + HANG_GUARD
        while len(got) < 30:
            assert time.monotonic() < deadline, "c1 read %d of 30 (hang guard)" % len(got)
            m = c1.poll(0.2)
            if m is not None and not m.error():
                got.append((m.partition(), m.offset()))
        assert sorted(got) == [(p, o) for p in range(parts) for o in range(10)], sorted(got)
        assert len(c1.assignment()) == parts

        for one in (False, True):
            g = ck_group(adm, group, one)
            assert g is not None, "group %s not listed (one=%s)" % (group, one)
            assert g.error is None, g.error
            assert (g.state, g.protocol_type, g.protocol) == ("Stable", "consumer", "range"), \
                (g.state, g.protocol_type, g.protocol)
            assert len(g.members) == 1, g.members
            mem = g.members[0]
            # (confluent-kafka 1.7 has no Consumer.memberid(); Kafka's member
            # ids are "<client.id>-<uuid>")
            assert mem.id.startswith("ck-one-") and len(mem.id) > len("ck-one-"), mem.id
            if not one:
                member_id = mem.id
            assert mem.id == member_id, (mem.id, member_id)
            assert mem.client_id == "ck-one" and "127.0.0.1" in mem.client_host, (mem.client_id, mem.client_host)
            sub = kraw.R(mem.metadata)
            sub.i16()
            assert sub.array(kraw.R.str) == [topic], mem.metadata
            assert kraw.parse_assignment(mem.assignment) == {topic: [0, 1, 2]}, mem.assignment

        c1.commit(offsets=[CTP(topic, p, 10 - p) for p in range(parts)], asynchronous=False)
        com = c1.committed([CTP(topic, p) for p in range(parts)], timeout=30)
        assert [(t.partition, t.offset, t.error) for t in com] == [(p, 10 - p, None) for p in range(parts)], com
        assert kadm.list_consumer_group_offsets(group) == {
            TopicPartition(topic, p): OffsetAndMetadata(10 - p, "") for p in range(parts)}

        c2 = ck_consumer(b, group, "ck-two")
        c2.subscribe([topic])

        def two_members():
            c1.poll(0.05)
            c2.poll(0.05)
            g = ck_group(adm, group)
            if g is None or g.state != "Stable" or len(g.members) != 2:
                return None
            return g
        g = wait_for(two_members, "two members, Stable")
        owned = [kraw.parse_assignment(m.assignment).get(topic, []) for m in g.members]
        assert sorted(p for ps in owned for p in ps) == [0, 1, 2] and all(owned), owned
        assert sorted(m.client_id for m in g.members) == ["ck-one", "ck-two"]
        ids = {m.client_id: m.id for m in g.members}
        assert ids["ck-one"] == member_id and ids["ck-two"].startswith("ck-two-"), (ids, member_id)

        res = kadm.delete_consumer_groups([group, "no-such-group"])
        assert dict(res) == {group: NonEmptyGroupError, "no-such-group": GroupIdNotFoundError}, res
        c1.close()
        c2.close()
        g = wait_for(lambda: (lambda g: g if g and g.state == "Empty" else None)(ck_group(adm, group)),
                     "group Empty after both closed")
        assert (g.protocol_type, g.members) == ("consumer", []), (g.protocol_type, g.members)
        assert kadm.list_consumer_group_offsets(group) == {
            TopicPartition(topic, p): OffsetAndMetadata(10 - p, "") for p in range(parts)}
        assert (group, "consumer") in kadm.list_consumer_groups()

        assert dict(kadm.delete_consumer_groups([group])) == {group: NoError}
        assert ck_group(adm, group, one=False) is None
        assert group not in [g for g, _ in kadm.list_consumer_groups()]
        assert kadm.list_consumer_group_offsets(group) == {}
        kadm.close()
        adm = None  # librdkafka handles close on destruction: before the broker stops (not del: a closure names it)
        gc.collect()


def ck_read(c, n, what):
    """n records from a confluent-kafka consumer, as (partition, offset)."""
    got = []
    deadline = time.monotonic() + HANG_GUARD
    while len(got) < n:
        assert time.monotonic() < deadline, "%s read %d of %d (hang guard)" % (what, len(got), n)
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.partition(), m.offset()))
    return got


@test
def confluent_commit_stop_resume_rereads_only_the_window():
    """Issue 25's check for every client, with librdkafka: a consumer in
    group "ckr" reads 40 of the 60 records of a 3-partition topic, commits
    them synchronously (OffsetCommit; kafka-python's admin reads the 40
    back), reads 5 more without committing them (the uncommitted window)
    and closes. 10 more records per partition; a new consumer in the group
    resumes at the committed offsets: every record read, exactly the 5 of
    the window read twice."""
    from confluent_kafka import TopicPartition as CTP
    topic, group, parts = "ckr", "ckr-group", 3
    with broker(settings=SETTINGS) as b:
        kadm = KafkaAdminClient(bootstrap_servers=b.bootstrap, **COMMON)
        kadm.create_topics([NewTopic(topic, num_partitions=parts, replication_factor=1)])
        produce(b, topic, 20, parts, b"one")
        c1 = ck_consumer(b, group, "ckr-one")
        c1.subscribe([topic])
        first = ck_read(c1, 40, "c1")
        c1.commit(asynchronous=False)
        pos = {}
        for p, o in first:
            pos[p] = max(pos.get(p, 0), o + 1)
        com = c1.committed([CTP(topic, p) for p in range(parts)], timeout=30)
        assert {t.partition: t.offset for t in com if t.offset >= 0} == pos, (com, pos)
        assert kadm.list_consumer_group_offsets(group) == {
            TopicPartition(topic, p): OffsetAndMetadata(o, "") for p, o in pos.items()}
        window = ck_read(c1, 5, "c1 (window)")
        c1.close()  # enable.auto.commit=false: the window stays uncommitted

        produce(b, topic, 10, parts, b"two")
        c2 = ck_consumer(b, group, "ckr-two")
        c2.subscribe([topic])
        second = ck_read(c2, 90 - 40, "c2")
        time.sleep(0.3)  # anything extra would show up now
        extra = []
        while True:
            m = c2.poll(0.2)
            if m is None:
                break
            if not m.error():
                extra.append((m.partition(), m.offset()))
        c2.close()
        # the records read twice first (a lost commit shows as more of them
        # than the window), then that c2 read nothing beyond its 50
        twice = set(first + window) & set(second + extra)
        assert len(twice) == len(window) and twice == set(window), \
            "%d records read twice (want the %d of the uncommitted window %s): %s" % (
                len(twice), len(window), sorted(window), sorted(twice))
        assert not extra, "c2 read more than 50: %s" % extra[:10]
        assert sorted(set(first + window + second)) == [(p, o) for p in range(parts) for o in range(30)]
        kadm.close()


if __name__ == "__main__":
    main("groups-python")
