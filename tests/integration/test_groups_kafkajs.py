#!/usr/bin/python3
"""kafkajs 2.2.4 consumers in groups (tests/integration/kafkajs/
groups_check.js; kafkajs consumers need a group and read read_committed by
default; JoinGroup v5 with MEMBER_ID_REQUIRED, SyncGroup v3, Heartbeat v3,
OffsetCommit v5, OffsetFetch v4) against a real sluiced: a consumer
commits, disconnects, and a new one in the group resumes from the committed
offsets; two consumers in one group share the partitions."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, main, run, test  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KJS_DIR = os.path.join(HERE, "kafkajs")
NODE = os.environ.get("NODE", "node")
SETTINGS = {"group.initial.rebalance.delay.ms": 0}


def groups_check(b, scenario, topic, group):
    p = run([NODE, os.path.join(KJS_DIR, "groups_check.js"), b.bootstrap, scenario, topic, group],
            check=False, cwd=KJS_DIR)
    out = p.stdout.decode("utf-8", "replace").strip().splitlines()
    err = p.stderr.decode("utf-8", "replace")[-4000:]
    assert out, "groups_check.js: exit %d, no output; stderr:\n%s" % (p.returncode, err)
    res = json.loads(out[-1])
    assert res["ok"] and p.returncode == 0, "groups_check.js %s failed (exit %d): %s\nstderr:\n%s\nbroker log:\n%s" % (
        scenario, p.returncode, res.get("error"), err, b.log_tail())
    return res


def by_partition(records):
    out = {}
    for r in records:
        out.setdefault(r["partition"], []).append(r["offset"])
    return out


@test
def kafkajs_commit_and_resume():
    """Consumer 1 reads 20 records from each of 3 partitions, each once
    (offsets 0..19, keys as produced); commits 15/20/20, which
    admin.fetchOffsets reads back; describeGroups shows it Stable with one
    member ("consumer" protocol type, "RoundRobinAssigner" protocol) and
    listGroups lists the group; after disconnect the group is Empty.
    Consumer 2 in the same group reads exactly partition 0 from 15 and the
    others from 20, up to 29: nothing lost, only the uncommitted 15..19
    reread."""
    topic, group = "kjs-resume", "kjs-resume-group"
    with broker(settings=SETTINGS) as b:
        res = groups_check(b, "resume", topic, group)
        c1 = res["c1"]
        assert by_partition(c1["records"]) == {p: list(range(20)) for p in range(3)}, by_partition(c1["records"])
        for r in c1["records"]:
            assert r["key"] == "one-%d-%d" % (r["partition"], r["offset"]), r
        assert c1["joins"] and sorted(c1["joins"][-1]["assignment"]) == [0, 1, 2], c1["joins"]
        assert c1["joins"][-1]["isLeader"] and c1["joins"][-1]["protocol"] == "RoundRobinAssigner", c1["joins"]
        assert res["committed"] == [{"partition": 0, "offset": "15"}, {"partition": 1, "offset": "20"},
                                    {"partition": 2, "offset": "20"}], res["committed"]
        d = res["describeWhileIn"]
        assert (d["groupId"], d["errorCode"], d["state"], d["protocolType"], d["protocol"]) == (
            group, 0, "Stable", "consumer", "RoundRobinAssigner"), d
        assert [m["memberId"] for m in d["members"]] == [c1["joins"][-1]["memberId"]], d
        assert d["members"][0]["clientId"] == "sluice-kafkajs-groups", d
        assert {"groupId": group, "protocolType": "consumer"} in res["listWhileIn"], res["listWhileIn"]
        d = res["describeAfterLeave"]
        assert (d["state"], d["members"]) == ("Empty", []), d

        c2 = res["c2"]
        twice = {(r["partition"], r["offset"]) for r in c1["records"]} & \
            {(r["partition"], r["offset"]) for r in c2["records"]}
        assert twice == {(0, o) for o in range(15, 20)}, \
            "%d records read twice after the restart, expected the 5 uncommitted (partition 0, 15..19): %s" % (
                len(twice), sorted(twice))
        got = by_partition(c2["records"])
        assert got == {0: list(range(15, 30)), 1: list(range(20, 30)), 2: list(range(20, 30))}, got
        for r in c2["records"]:
            tag = "one" if r["offset"] < 20 else "two"
            o = r["offset"] if r["offset"] < 20 else r["offset"] - 20
            assert r["key"] == "%s-%d-%d" % (tag, r["partition"], o), r
        assert c2["joins"][-1]["memberId"] != c1["joins"][-1]["memberId"]


@test
def kafkajs_two_consumers_share():
    """Two kafkajs consumers in one group on 4 partitions: their final
    assignments are 2 + 2, disjoint; describeGroups shows both members in a
    Stable group; every one of the 80 records produced afterwards is read
    exactly once, by the consumer that owns its partition."""
    topic, group = "kjs-share", "kjs-share-group"
    with broker(settings=SETTINGS) as b:
        res = groups_check(b, "share", topic, group)
        a, bb = res["a"], res["b"]
        la, lb = sorted(a["joins"][-1]["assignment"]), sorted(bb["joins"][-1]["assignment"])
        assert len(la) == 2 and len(lb) == 2 and sorted(la + lb) == [0, 1, 2, 3], (la, lb)
        assert a["joins"][-1]["leaderId"] == bb["joins"][-1]["leaderId"], (a["joins"], bb["joins"])
        d = res["describe"]
        assert (d["state"], d["protocolType"]) == ("Stable", "consumer"), d
        assert sorted(m["memberId"] for m in d["members"]) == sorted(
            [a["joins"][-1]["memberId"], bb["joins"][-1]["memberId"]]), d
        ga, gb = by_partition(a["records"]), by_partition(bb["records"])
        assert sorted(ga) == la and sorted(gb) == lb, (sorted(ga), la, sorted(gb), lb)
        for p, offs in list(ga.items()) + list(gb.items()):
            assert offs == list(range(20)), (p, offs)


if __name__ == "__main__":
    main("groups-kafkajs")
