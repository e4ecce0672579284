#!/usr/bin/python3
"""Consumer groups over raw sockets (kraw.py: struct, classic encodings)
against a real sluiced: the refusals Kafka gives for bad group input, each
with its exact error code, and after each one the broker still serves a new
connection, the group's member is still in its generation (Heartbeat 0) and
the offsets committed before are unchanged (OffsetFetch).

Every test starts with group "g": one member (JoinGroup v2, the version
kafka-python sends) in generation >= 1 owning both partitions of "gt",
having committed gt/0 = 5 ("m0") and gt/1 = 7 ("m1")."""

import os
import struct
import sys
import threading
import time
from types import SimpleNamespace as NS

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, broker, main, test  # noqa: E402
import kraw  # noqa: E402
from kraw import Conn, assignment, subscription  # noqa: E402

SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 6000,
            "group.max.session.timeout.ms": 60000, "offset.metadata.max.bytes": 4096}
TOPIC = "gt"
BASE = {(TOPIC, 0): (5, "m0"), (TOPIC, 1): (7, "m1")}


def join_alone(c, group, topic=TOPIC, parts=(0, 1), ver=2, **kw):
    """A member that is alone in group: JoinGroup (it is the leader), then
    SyncGroup with every partition; checks the responses field by field."""
    sub = subscription([topic])
    j = c.join_group(group, protocols=[("range", sub)], ver=ver, **kw)
    if ver >= 4 and j.error == kraw.MEMBER_ID_REQUIRED:
        assert j.member_id, j
        j = c.join_group(group, member_id=j.member_id, protocols=[("range", sub)], ver=ver, **kw)
    assert j.error == 0, j
    assert j.generation >= 1 and j.member_id and j.leader == j.member_id, j
    assert j.protocol == "range", j
    assert [(m.member_id, m.metadata) for m in j.members] == [(j.member_id, sub)], j.members
    a = assignment({topic: list(parts)})
    s = c.sync_group(group, j.generation, j.member_id, [(j.member_id, a)])
    assert s.error == 0 and s.assignment == a, s
    assert c.heartbeat(group, j.generation, j.member_id) == 0
    return NS(gen=j.generation, member=j.member_id, sub=sub)


def setup(b):
    """Topic gt (2 partitions), group g with one member, committed offsets."""
    c = Conn(b.bootstrap)
    assert c.create_topic(TOPIC, 2) == 0
    fc = c.find_coordinator("g")
    assert (fc.error, fc.node, fc.host, fc.port) == (0, 1, "127.0.0.1", b.port), fc
    st = join_alone(c, "g")
    errs = c.offset_commit("g", BASE, generation=st.gen, member_id=st.member)
    assert errs == {k: 0 for k in BASE}, errs
    assert fetched(c, "g") == {k: (o, m, 0) for k, (o, m) in BASE.items()}
    st.conn = c
    return st


def fetched(c, group, parts=(0, 1), topic=TOPIC):
    out, top = c.offset_fetch(group, {topic: list(parts)})
    assert top == 0, top
    return out


def check_after(b, st, offsets=None):
    """A new connection is served, the member is still in its generation and
    the offsets are what they were."""
    want = {k: (o, m, 0) for k, (o, m) in (offsets or BASE).items()}
    with Conn(b.bootstrap) as c:
        av = c.api_versions()
        assert av.error == 0 and kraw.JOIN_GROUP in av.apis, av
        assert fetched(c, "g") == want
        hb = c.heartbeat("g", st.gen, st.member)
        assert hb == 0, "heartbeat of g's member (generation %d): error %d" % (st.gen, hb)
        err, groups = c.list_groups()
        assert err == 0 and groups.get("g") == "consumer", groups
    # and the member's own connection is still usable
    assert st.conn.heartbeat("g", st.gen, st.member) == 0


@test
def baseline_join_sync_commit_fetch():
    """The happy path the other tests build on: FindCoordinator names this
    broker; a lone member is leader of generation 1 with its own metadata;
    SyncGroup hands back the assignment; OffsetFetch returns offsets and
    metadata; an offset never committed is -1 with empty metadata; ListGroups
    and DescribeGroups show the Stable group and its member."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        assert st.gen == 1, st.gen
        c = st.conn
        assert c.create_topic("other", 1) == 0
        out = fetched(c, "g", parts=(0,), topic="other")
        assert out == {("other", 0): (-1, "", 0)}, out
        out = fetched(c, "nosuchgroup")
        assert out == {(TOPIC, 0): (-1, "", 0), (TOPIC, 1): (-1, "", 0)}, out
        d = c.describe_groups(["g"])["g"]
        assert (d.error, d.state, d.protocol_type, d.protocol) == (0, "Stable", "consumer", "range"), d
        assert len(d.members) == 1 and d.members[0].member_id == st.member, d.members
        m = d.members[0]
        assert m.client_id == "kraw" and "127.0.0.1" in m.client_host, m
        assert m.metadata == st.sub and m.assignment == assignment({TOPIC: [0, 1]}), m
        # v3+: authorized operations only when asked; with no authorizer,
        # as Kafka without one, every operation a group supports: READ,
        # DESCRIBE, DELETE (328); until 2026-12-01 never answered
        assert c.describe_groups(["g"], ver=4)["g"].ops == -2147483648
        d = c.describe_groups(["g"], ver=4, include_ops=True)["g"]
        assert d.ops == (1 << 3) | (1 << 8) | (1 << 6), d.ops
        assert d.state == "Stable" and d.members[0].member_id == st.member, d
        check_after(b, st)


@test
def join_v4_needs_member_id():
    """JoinGroup v4+ with an empty member id: MEMBER_ID_REQUIRED (79) with a
    member id to use; the join with that id succeeds (same id, leader of
    generation 1); a join with a member id the broker never gave out gets
    UNKNOWN_MEMBER_ID (25)."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        c = Conn(b.bootstrap)
        sub = subscription([TOPIC])
        j = c.join_group("g4", protocols=[("range", sub)], ver=4)
        assert j.error == kraw.MEMBER_ID_REQUIRED and j.member_id and j.member_id != st.member, j
        j2 = c.join_group("g4", member_id=j.member_id, protocols=[("range", sub)], ver=4)
        assert (j2.error, j2.member_id, j2.leader, j2.generation) == (0, j.member_id, j.member_id, 1), j2
        a = assignment({TOPIC: [0, 1]})
        s = c.sync_group("g4", j2.generation, j2.member_id, [(j2.member_id, a)], ver=3)
        assert (s.error, s.assignment) == (0, a), s
        j3 = c.join_group("g4v", member_id="made-up", protocols=[("range", sub)], ver=4)
        assert j3.error == kraw.UNKNOWN_MEMBER_ID, j3
        c.close()
        check_after(b, st)


@test
def join_inconsistent_protocol():
    """Against g (a member with protocol type "consumer", protocol "range"):
    JoinGroup with protocol type "connect", or with type "consumer" and only
    an unknown protocol, is refused with INCONSISTENT_GROUP_PROTOCOL (23) at
    once; a new group asked with an empty protocol type or no protocols at
    all gets 23 too and is not created."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        with Conn(b.bootstrap) as c:
            j = c.join_group("g", protocol_type="connect", protocols=[("range", st.sub)])
            assert j.error == kraw.INCONSISTENT_GROUP_PROTOCOL, j
            j = c.join_group("g", protocol_type="consumer", protocols=[("bogus-assignor", st.sub)])
            assert j.error == kraw.INCONSISTENT_GROUP_PROTOCOL, j
            j = c.join_group("fresh", protocol_type="", protocols=[("range", st.sub)])
            assert j.error == kraw.INCONSISTENT_GROUP_PROTOCOL, j
            j = c.join_group("fresh2", protocol_type="consumer", protocols=[])
            assert j.error == kraw.INCONSISTENT_GROUP_PROTOCOL, j
            # (Kafka leaves "fresh" and "fresh2" behind as Empty groups with
            # no members; either way nobody joined them)
            err, groups = c.list_groups()
            assert err == 0 and groups.get("g") == "consumer", groups
            assert set(groups) <= {"g", "fresh", "fresh2"}, groups
            for name, d in c.describe_groups(["fresh", "fresh2"]).items():
                assert d.error == 0 and d.state in ("Empty", "Dead") and d.members == [], d
            d = c.describe_groups(["g"])["g"]
            assert (d.state, [m.member_id for m in d.members]) == ("Stable", [st.member]), d
        check_after(b, st)


@test
def join_invalid_session_timeout():
    """Session timeouts outside [group.min.session.timeout.ms,
    group.max.session.timeout.ms] = [6000, 60000]: INVALID_SESSION_TIMEOUT
    (26), for g and for a new group (which is not created); exactly 6000 and
    exactly 60000 are accepted."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        with Conn(b.bootstrap) as c:
            for group in ("g", "sess"):
                for ms in (5999, 60001, 0, -1):
                    j = c.join_group(group, session_ms=ms, protocols=[("range", st.sub)])
                    assert j.error == kraw.INVALID_SESSION_TIMEOUT, (group, ms, j)
            err, groups = c.list_groups()
            assert groups == {"g": "consumer"}, groups
            join_alone(c, "sess-min", session_ms=6000)
            join_alone(c, "sess-max", session_ms=60000)
        check_after(b, st)


@test
def empty_group_id():
    """An empty group id: INVALID_GROUP_ID (24) from JoinGroup, SyncGroup,
    Heartbeat and LeaveGroup."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        with Conn(b.bootstrap) as c:
            j = c.join_group("", protocols=[("range", st.sub)])
            assert j.error == kraw.INVALID_GROUP_ID, j
            j = c.join_group("", member_id=st.member, protocols=[("range", st.sub)])
            assert j.error == kraw.INVALID_GROUP_ID, j
            s = c.sync_group("", st.gen, st.member, [(st.member, b"")])
            assert s.error == kraw.INVALID_GROUP_ID, s
            assert c.heartbeat("", st.gen, st.member) == kraw.INVALID_GROUP_ID
            assert c.leave_group("", st.member) == kraw.INVALID_GROUP_ID
            err, groups = c.list_groups()
            assert groups == {"g": "consumer"}, groups
        check_after(b, st)


@test
def wrong_generation_and_unknown_member():
    """SyncGroup, Heartbeat and OffsetCommit from g's member with generation
    gen+1 or gen-1: ILLEGAL_GENERATION (22); the same from a member id the
    group does not know: UNKNOWN_MEMBER_ID (25). A refused commit changes no
    offset; a commit with generation -1 (a simple commit) to a group that has
    members is refused too (UNKNOWN_MEMBER_ID)."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        with Conn(b.bootstrap) as c:
            a = assignment({TOPIC: [0]})
            bad = {(TOPIC, 0): (100, "x"), (TOPIC, 1): (200, "y")}
            for gen in (st.gen + 1, st.gen - 1, st.gen + 1000):
                s = c.sync_group("g", gen, st.member, [(st.member, a)])
                assert s.error == kraw.ILLEGAL_GENERATION, (gen, s)
                assert c.heartbeat("g", gen, st.member) == kraw.ILLEGAL_GENERATION, gen
                errs = c.offset_commit("g", bad, generation=gen, member_id=st.member)
                assert errs == {k: kraw.ILLEGAL_GENERATION for k in bad}, (gen, errs)
            s = c.sync_group("g", st.gen, "nobody", [("nobody", a)])
            assert s.error == kraw.UNKNOWN_MEMBER_ID, s
            errs = c.offset_commit("g", bad, generation=st.gen, member_id="nobody")
            assert errs == {k: kraw.UNKNOWN_MEMBER_ID for k in bad}, errs
            errs = c.offset_commit("g", bad, generation=-1, member_id="")
            assert errs == {k: kraw.UNKNOWN_MEMBER_ID for k in bad}, errs
            # the member's sync in its own generation still returns its assignment
            s = c.sync_group("g", st.gen, st.member, [])
            assert s.error == 0 and s.assignment == assignment({TOPIC: [0, 1]}), s
        check_after(b, st)


@test
def heartbeat_unknown_member():
    """Heartbeat for a member id g does not know, and for a group that does
    not exist: UNKNOWN_MEMBER_ID (25); LeaveGroup of an unknown member: 25
    as well, and g's member stays."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        with Conn(b.bootstrap) as c:
            assert c.heartbeat("g", st.gen, "nobody") == kraw.UNKNOWN_MEMBER_ID
            assert c.heartbeat("g", st.gen, "") == kraw.UNKNOWN_MEMBER_ID
            assert c.heartbeat("nosuchgroup", 1, st.member) == kraw.UNKNOWN_MEMBER_ID
            assert c.leave_group("g", "nobody") == kraw.UNKNOWN_MEMBER_ID
        check_after(b, st)


@test
def commit_unknown_topic_or_partition():
    """OffsetCommit for a topic that does not exist, or a partition past the
    topic's count: UNKNOWN_TOPIC_OR_PARTITION (3) for those partitions; in the
    same request a valid partition is committed; OffsetFetch shows nothing
    for the unknown topic."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        with Conn(b.bootstrap) as c:
            req = {("nope", 0): (11, "a"), (TOPIC, 2): (12, "b"), (TOPIC, 99): (13, "c"), (TOPIC, -1): (14, "d")}
            errs = c.offset_commit("g", req, generation=st.gen, member_id=st.member)
            assert errs == {k: kraw.UNKNOWN_TOPIC_OR_PARTITION for k in req}, errs
            check_after(b, st)
            req = {("nope", 0): (11, "a"), (TOPIC, 1): (8, "m1b")}
            errs = c.offset_commit("g", req, generation=st.gen, member_id=st.member)
            assert errs == {("nope", 0): kraw.UNKNOWN_TOPIC_OR_PARTITION, (TOPIC, 1): 0}, errs
            out, _ = c.offset_fetch("g", {"nope": [0]})
            assert out == {("nope", 0): (-1, "", 0)}, out
            # simple commits (generation -1) from an empty group: the same refusal
            errs = c.offset_commit("solo", {("nope", 0): (1, None)})
            assert errs == {("nope", 0): kraw.UNKNOWN_TOPIC_OR_PARTITION}, errs
            errs = c.offset_commit("solo", {(TOPIC, 0): (3, None)})
            assert errs == {(TOPIC, 0): 0}, errs
            assert fetched(c, "solo", parts=(0,))[(TOPIC, 0)][0] == 3
        check_after(b, st, offsets={(TOPIC, 0): (5, "m0"), (TOPIC, 1): (8, "m1b")})


@test
def commit_metadata_too_large():
    """Commit metadata longer than offset.metadata.max.bytes (4096):
    OFFSET_METADATA_TOO_LARGE (12) for that partition, the previous offset and
    metadata stay; exactly 4096 bytes is accepted and read back whole."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        with Conn(b.bootstrap) as c:
            errs = c.offset_commit("g", {(TOPIC, 0): (50, "x" * 4097), (TOPIC, 1): (60, "y" * 32767)},
                                   generation=st.gen, member_id=st.member)
            assert errs == {(TOPIC, 0): kraw.OFFSET_METADATA_TOO_LARGE,
                            (TOPIC, 1): kraw.OFFSET_METADATA_TOO_LARGE}, errs
            check_after(b, st)
            errs = c.offset_commit("g", {(TOPIC, 0): (51, "z" * 4096), (TOPIC, 1): (61, "w" * 4097)},
                                   generation=st.gen, member_id=st.member)
            assert errs == {(TOPIC, 0): 0, (TOPIC, 1): kraw.OFFSET_METADATA_TOO_LARGE}, errs
        check_after(b, st, offsets={(TOPIC, 0): (51, "z" * 4096), (TOPIC, 1): (7, "m1")})


@test
def huge_assignment():
    """A leader's SyncGroup carrying a 2 MiB assignment (over
    message.max.bytes, under socket.request.max.bytes) gets
    UNKNOWN_SERVER_ERROR (-1) and an empty assignment, as in Kafka, whose
    group record cannot be written; not a dropped connection; the broker keeps serving; the group recovers
    (the member rejoins and a normal assignment goes through) and g's
    offsets are unchanged."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        with Conn(b.bootstrap) as c:
            sub = subscription([TOPIC])
            j = c.join_group("huge", protocols=[("range", sub)])
            assert j.error == 0 and j.leader == j.member_id, j
            big = assignment({TOPIC: [0, 1]}, user_data=b"\xab" * (2 << 20))
            s = c.sync_group("huge", j.generation, j.member_id, [(j.member_id, big)])
            assert (s.error, s.assignment) == (kraw.UNKNOWN_SERVER_ERROR, b""), (s.error, len(s.assignment or b""))
            check_after(b, st)
            # the member rejoins (the group went back to rebalancing) and a
            # normal assignment works
            a = assignment({TOPIC: [0, 1]})
            for _ in range(3):
                j = c.join_group("huge", member_id=j.member_id, protocols=[("range", sub)])
                assert j.error == 0 and j.leader == j.member_id, j
                s = c.sync_group("huge", j.generation, j.member_id, [(j.member_id, a)])
                if s.error != kraw.REBALANCE_IN_PROGRESS:
                    break
            assert s.error == 0 and s.assignment == a, s
            assert c.heartbeat("huge", j.generation, j.member_id) == 0
        check_after(b, st)


@test
def delete_groups_and_offsets():
    """DeleteGroups: a group with members gets NON_EMPTY_GROUP (68), an
    unknown group GROUP_ID_NOT_FOUND (69); OffsetDelete of a partition of a
    topic the members subscribe to gets GROUP_SUBSCRIBED_TO_TOPIC (86) and the
    offset stays; after LeaveGroup the group is Empty, OffsetDelete removes
    gt/1 only, DeleteGroups succeeds, the offsets are gone and ListGroups no
    longer shows it."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        c = st.conn
        assert c.delete_groups(["g", "ghost"]) == {"g": kraw.NON_EMPTY_GROUP, "ghost": kraw.GROUP_ID_NOT_FOUND}
        top, out = c.offset_delete("g", {TOPIC: [1]})
        assert (top, out) == (0, {(TOPIC, 1): kraw.GROUP_SUBSCRIBED_TO_TOPIC}), (top, out)
        top, _ = c.offset_delete("ghost", {TOPIC: [1]})
        assert top == kraw.GROUP_ID_NOT_FOUND, top
        check_after(b, st)
        assert c.leave_group("g", st.member) == 0
        d = c.describe_groups(["g"])["g"]
        assert (d.error, d.state, d.members) == (0, "Empty", []), d
        top, out = c.offset_delete("g", {TOPIC: [1]})
        assert (top, out) == (0, {(TOPIC, 1): 0}), (top, out)
        assert fetched(c, "g") == {(TOPIC, 0): (5, "m0", 0), (TOPIC, 1): (-1, "", 0)}
        assert c.delete_groups(["g"]) == {"g": 0}
        assert fetched(c, "g") == {(TOPIC, 0): (-1, "", 0), (TOPIC, 1): (-1, "", 0)}
        err, groups = c.list_groups()
        assert err == 0 and groups == {}, groups
        d = c.describe_groups(["g"])["g"]
        assert (d.error, d.state, d.members) == (0, "Dead", []), d


@test
def offsets_survive_restart():
    """Committed offsets and metadata are replayed from __consumer_offsets
    after a SIGTERM restart and after a SIGKILL; a later commit overrides
    an earlier one across restarts; a deleted group stays deleted."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        c = st.conn
        assert c.offset_commit("g", {(TOPIC, 1): (9, "m1-2")}, generation=st.gen, member_id=st.member) == {(TOPIC, 1): 0}
        assert c.offset_commit("gone", {(TOPIC, 0): (1, None)}) == {(TOPIC, 0): 0}
        assert c.delete_groups(["gone"]) == {"gone": 0}
        assert c.offset_commit("simple", {(TOPIC, 0): (42, "s42")}) == {(TOPIC, 0): 0}
        c.close()
        want = {(TOPIC, 0): (5, "m0", 0), (TOPIC, 1): (9, "m1-2", 0)}
        simple = 42
        for hard in (False, True, False):
            b.restart(hard=hard)
            with Conn(b.bootstrap) as c:
                assert fetched(c, "g") == want, hard
                assert fetched(c, "simple", parts=(0,)) == {(TOPIC, 0): (simple, "s%d" % simple, 0)}, hard
                assert fetched(c, "gone", parts=(0,)) == {(TOPIC, 0): (-1, "", 0)}, hard
                # a commit after the restart is what the next start replays
                simple += 1
                assert c.offset_commit("simple", {(TOPIC, 0): (simple, "s%d" % simple)}) == {(TOPIC, 0): 0}


@test
def old_offset_commit_and_fetch_versions():
    """OffsetCommit v0-1 and OffsetFetch v0, as Sarama 1.22 (Debian 12's)
    and other clients of Kafka 0.8-0.10's era send them (KIP-896 dropped
    them in Kafka 4.0; Sluice keeps them): advertised, stored with the
    other versions' offsets and read back by every version; v1 as a
    member is judged like v2+ (generation, member), v0 is a simple commit
    (refused while the group has members); v1's commit timestamp is the
    one offsets expire from (an old one expires at the next check, -1 is
    the broker's clock). Before 2026-12-04 Sluice served OffsetCommit 2-7
    only: Sarama's commits failed and its group re-read everything after
    a restart."""
    settings = dict(SETTINGS, **{"offsets.retention.ms": 60000, "offsets.retention.check.interval.ms": 200})
    with broker(settings=settings) as b:
        st = setup(b)
        c = st.conn
        av = c.api_versions()
        assert av.error == 0 and av.apis[kraw.OFFSET_COMMIT][0] == 0 and av.apis[kraw.OFFSET_FETCH][0] == 0, av.apis
        # v1 as g's member: judged, stored, read back by v0, v1 and v5
        assert c.offset_commit("g", {(TOPIC, 0): (11, "v1")}, generation=st.gen, member_id=st.member,
                               ver=1) == {(TOPIC, 0): 0}
        for v in (0, 1, 5):
            got, top = c.offset_fetch("g", {TOPIC: [0, 1]}, ver=v)
            assert top == 0 and got == {(TOPIC, 0): (11, "v1", 0), (TOPIC, 1): (7, "m1", 0)}, (v, got)
        assert c.offset_commit("g", {(TOPIC, 0): (12, "bad")}, generation=st.gen + 1, member_id=st.member,
                               ver=1) == {(TOPIC, 0): kraw.ILLEGAL_GENERATION}
        assert c.offset_commit("g", {(TOPIC, 0): (12, "bad")}, generation=st.gen, member_id="nobody",
                               ver=1) == {(TOPIC, 0): kraw.UNKNOWN_MEMBER_ID}
        # v0 is a simple commit: refused while g has a member, stored for a
        # group without one
        assert c.offset_commit("g", {(TOPIC, 0): (13, "v0")}, ver=0) == {(TOPIC, 0): kraw.UNKNOWN_MEMBER_ID}
        assert c.offset_commit("old", {(TOPIC, 0): (21, "v0"), (TOPIC, 1): (22, None)},
                               ver=0) == {(TOPIC, 0): 0, (TOPIC, 1): 0}
        for v in (0, 1, 3):
            got, top = c.offset_fetch("old", {TOPIC: [0, 1]}, ver=v)
            assert top == 0 and got == {(TOPIC, 0): (21, "v0", 0), (TOPIC, 1): (22, "", 0)}, (v, got)
        # v1's timestamp: two minutes old expires (retention 60 s), now stays
        now_ms = int(time.time() * 1000)
        assert c.offset_commit("stale", {(TOPIC, 0): (31, "old")}, ver=1,
                               commit_ts=now_ms - 120000) == {(TOPIC, 0): 0}
        assert c.offset_commit("fresh", {(TOPIC, 0): (32, "new")}, ver=1) == {(TOPIC, 0): 0}
        wait_until(lambda: c.offset_fetch("stale", {TOPIC: [0]}, ver=1)[0] == {(TOPIC, 0): (-1, "", 0)},
                   "the offset committed with a two-minute-old v1 timestamp expired")
        assert c.offset_fetch("fresh", {TOPIC: [0]}, ver=1)[0] == {(TOPIC, 0): (32, "new", 0)}
        # and after a restart, replayed like any other
        c.close()
        b.restart()
        with Conn(b.bootstrap) as c2:
            assert c2.offset_fetch("old", {TOPIC: [0, 1]}, ver=0)[0] == {(TOPIC, 0): (21, "v0", 0),
                                                                        (TOPIC, 1): (22, "", 0)}
            assert c2.offset_fetch("fresh", {TOPIC: [0]}, ver=0)[0] == {(TOPIC, 0): (32, "new", 0)}


class Async:
    """A request on its own connection in a thread (JoinGroup and a
    follower's SyncGroup wait for the rest of the group)."""

    def __init__(self, conn, fn, *args, **kw):
        self.value = self.error = None

        def body():
            try:
                self.value = fn(conn, *args, **kw)
            except BaseException as e:
                self.error = e
        self.t = threading.Thread(target=body, daemon=True)
        self.t.start()

    def result(self):
        self.t.join(HANG_GUARD)
        assert not self.t.is_alive(), "request hung (hang guard)"
        if self.error:
            raise self.error
        return self.value


@test
def late_commit_of_revoked_owner():
    """The design's invariant, over the wire: A alone owns orders-0 and
    orders-1 in generation 1 and commits orders-1 = 5. B joins: while the
    group prepares the rebalance A's heartbeat gets REBALANCE_IN_PROGRESS
    (27) and A's commit in generation 1 is still accepted (as in Kafka);
    once both rejoined (generation 2, CompletingRebalance) a commit of
    generation 1 gets ILLEGAL_GENERATION (22, Kafka's order: generation
    before state). The leader gives orders-0 to A and orders-1 to B; B
    commits orders-1 = 10. A's late commit of orders-1 in generation 1 is
    refused with ILLEGAL_GENERATION, and in generation 2 too (Sluice: A no
    longer owns it), while A's commit of orders-0 goes through; B's
    position stands (OffsetFetch orders-1 = 10)."""
    with broker(settings=SETTINGS) as b:
        ca, cb = Conn(b.bootstrap, client_id="A"), Conn(b.bootstrap, client_id="B")
        assert ca.create_topic("orders", 2) == 0
        sub = subscription(["orders"])
        a = join_alone(ca, "og", topic="orders")
        assert a.gen == 1
        o1 = ("orders", 1)
        assert ca.offset_commit("og", {o1: (5, "a")}, generation=1, member_id=a.member) == {o1: 0}

        jb = Async(cb, Conn.join_group, "og", protocols=[("range", sub)])
        wait_until(lambda: ca.heartbeat("og", 1, a.member) == kraw.REBALANCE_IN_PROGRESS,
                   "A's heartbeat sees the rebalance")
        assert ca.offset_commit("og", {o1: (6, "a")}, generation=1, member_id=a.member) == {o1: 0}
        ja = Conn.join_group(ca, "og", member_id=a.member, protocols=[("range", sub)])
        jbr = jb.result()
        assert ja.error == 0 and jbr.error == 0, (ja, jbr)
        assert ja.generation == jbr.generation == 2 and ja.leader == jbr.leader, (ja, jbr)
        leader, follower = (ja, jbr) if ja.leader == a.member else (jbr, ja)
        assert sorted(m.member_id for m in leader.members) == sorted([a.member, jbr.member_id])
        errs = ca.offset_commit("og", {o1: (7, "late")}, generation=1, member_id=a.member)
        problems = []  # checked at the end, so that the rest of the scenario runs too
        if errs != {o1: kraw.ILLEGAL_GENERATION}:
            problems.append("OffsetCommit v2 of generation 1 while generation 2 is CompletingRebalance: "
                            "expected ILLEGAL_GENERATION (22) as Kafka, got %s" % errs)

        asg = {a.member: assignment({"orders": [0]}), jbr.member_id: assignment({"orders": [1]})}
        conn_of = {a.member: ca, jbr.member_id: cb}
        fs = Async(conn_of[follower.member_id], Conn.sync_group, "og", 2, follower.member_id, [])
        ls = conn_of[leader.member_id].sync_group("og", 2, leader.member_id, sorted(asg.items()))
        fsr = fs.result()
        assert (ls.error, ls.assignment) == (0, asg[leader.member_id]), ls
        assert (fsr.error, fsr.assignment) == (0, asg[follower.member_id]), fsr

        assert cb.offset_commit("og", {o1: (10, "b")}, generation=2, member_id=jbr.member_id) == {o1: 0}
        for gen in (1, 2):
            errs = ca.offset_commit("og", {o1: (8, "late")}, generation=gen, member_id=a.member)
            assert errs == {o1: kraw.ILLEGAL_GENERATION}, (gen, errs)
        o0 = ("orders", 0)
        assert ca.offset_commit("og", {o0: (3, "a")}, generation=2, member_id=a.member) == {o0: 0}
        with Conn(b.bootstrap) as c:
            out, _ = c.offset_fetch("og", {"orders": [0, 1]})
            assert out == {o0: (3, "a", 0), o1: (10, "b", 0)}, out
        ca.close()
        cb.close()
        assert not problems, problems


@test
def static_member_second_instance_fences_first():
    """Static membership (JoinGroup v5 with group.instance.id): a second
    instance with the same id takes the membership over under a new member
    id, without a rebalance (same generation, same assignment through
    SyncGroup); the first instance is fenced: its Heartbeat and SyncGroup
    get FENCED_INSTANCE_ID (82)."""
    with broker(settings=SETTINGS) as b:
        c1, c2 = Conn(b.bootstrap, client_id="inst"), Conn(b.bootstrap, client_id="inst")
        assert c1.create_topic(TOPIC, 2) == 0
        first = join_alone(c1, "sg", ver=5, instance_id="inst-1")
        sub = subscription([TOPIC])
        j = c2.join_group("sg", protocols=[("range", sub)], ver=5, instance_id="inst-1")
        assert j.error == 0, j
        assert j.member_id and j.member_id != first.member, j
        assert j.generation == first.gen, "a static member's return started a rebalance: %r" % j
        s = c2.sync_group("sg", j.generation, j.member_id, [], ver=3, instance_id="inst-1")
        assert s.error == 0 and s.assignment == assignment({TOPIC: [0, 1]}), s
        assert c2.heartbeat("sg", j.generation, j.member_id, ver=3, instance_id="inst-1") == 0
        fenced = 82
        assert c1.heartbeat("sg", first.gen, first.member, ver=3, instance_id="inst-1") == fenced
        s1 = c1.sync_group("sg", first.gen, first.member, [], ver=3, instance_id="inst-1")
        assert s1.error == fenced, s1
        assert c2.heartbeat("sg", j.generation, j.member_id, ver=3, instance_id="inst-1") == 0
        c1.close()
        c2.close()


class _Captured(Exception):
    pass


class _Capture(Conn):
    """Builds a request body with kraw's encoders without sending it."""

    def __init__(self):
        self.calls = []

    def request(self, api, ver, w):
        self.calls.append((api, ver, bytes(w.b)))
        raise _Captured()


def body_of(fn, *args, **kw):
    cap = _Capture()
    try:
        fn(cap, *args, **kw)
    except _Captured:
        pass
    return cap.calls[0]


@test
def commit_behind_waiting_join_is_judged_at_its_generation():
    """Sluice pipelines group calls behind a JoinGroup that waits for the
    rebalance. M1 and M3 own gt in generation G; M2 joins. M1 sends its
    rejoin and, on the same connection right behind it, a commit of
    generation G (the generation it owns its partition in). The commit is
    applied while the rebalance still waits for M3 (another connection
    sees it) and is answered 0 after the JoinGroup's response; judged after
    the rebalance, as Kafka does, it would be ILLEGAL_GENERATION."""
    with broker(settings=SETTINGS) as b:
        st = setup(b)
        c1 = st.conn
        c3, c2, cx = Conn(b.bootstrap, client_id="M3"), Conn(b.bootstrap, client_id="M2"), Conn(b.bootstrap)
        sub = subscription([TOPIC])
        j3 = Async(c3, Conn.join_group, "g", protocols=[("range", sub)])
        wait_until(lambda: c1.heartbeat("g", st.gen, st.member) == kraw.REBALANCE_IN_PROGRESS,
                   "M1 sees the rebalance M3 started")
        j1 = c1.join_group("g", member_id=st.member, protocols=[("range", sub)])
        j3r = j3.result()
        assert j1.error == 0 and j3r.error == 0 and j1.generation == j3r.generation, (j1, j3r)
        gen = j1.generation
        asg = {st.member: assignment({TOPIC: [0]}), j3r.member_id: assignment({TOPIC: [1]})}
        conns = {st.member: c1, j3r.member_id: c3}
        follower = j3r.member_id if j1.leader == st.member else st.member
        fs = Async(conns[follower], Conn.sync_group, "g", gen, follower, [])
        ls = conns[j1.leader].sync_group("g", gen, j1.leader, sorted(asg.items()))
        assert ls.error == 0 and fs.result().error == 0

        j2 = Async(c2, Conn.join_group, "g", protocols=[("range", sub)])
        wait_until(lambda: c1.heartbeat("g", gen, st.member) == kraw.REBALANCE_IN_PROGRESS,
                   "M1 sees the rebalance M2 started")
        # rejoin and commit back to back on M1's connection, in one write
        frames = b""
        corrs = []
        for fn, args, kw in ((Conn.join_group, ("g",), dict(member_id=st.member, protocols=[("range", sub)])),
                             (Conn.offset_commit, ("g", {(TOPIC, 0): (9, "behind-join")}),
                              dict(generation=gen, member_id=st.member))):
            api, ver, body = body_of(fn, *args, **kw)
            c1.corr += 1
            corrs.append(c1.corr)
            msg = bytes(kraw.W().i16(api).i16(ver).i32(c1.corr).str(c1.client_id).b) + body
            frames += struct.pack(">i", len(msg)) + msg
        c1.s.sendall(frames)
        cj, cc = corrs
        wait_until(lambda: fetched(cx, "g")[(TOPIC, 0)] == (9, "behind-join", 0),
                   "the commit behind M1's waiting JoinGroup is applied before the rebalance completes")
        # M3 rejoins: the rebalance completes
        wait_until(lambda: c3.heartbeat("g", gen, j3r.member_id) == kraw.REBALANCE_IN_PROGRESS, "M3 sees it")
        j3b = c3.join_group("g", member_id=j3r.member_id, protocols=[("range", sub)])
        assert j3b.error == 0 and j3b.generation == gen + 1, j3b
        r = c1.recv(cj)
        r.i32()
        assert (r.i16(), r.i32()) == (0, gen + 1), "M1's JoinGroup answer"
        r = c1.recv(cc)
        errs = {(t, p): e for t, parts in r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i16()))))
                for p, e in parts}
        assert errs == {(TOPIC, 0): 0}, "the commit sent in generation %d: %s" % (gen, errs)
        assert j2.result().error == 0
        for c in (c2, c3, cx):
            c.close()


def wait_until(cond, what):
    deadline = time.monotonic() + HANG_GUARD
    while not cond():
        assert time.monotonic() < deadline, "hang guard waiting for: " + what
        time.sleep(0.02)


if __name__ == "__main__":
    main("groups-raw")
