#!/usr/bin/python3
"""ElectLeaders (ApiKey 43) over raw frames against a real sluiced on one
node, checked against what Kafka answers:

- ApiVersions advertises 43 at 0-2;
- type 0 (preferred; v0 has no type): every partition is led by its first
  replica on one node, so each is ELECTION_NOT_NEEDED (84) with Kafka's
  message; a null topic list answers for every partition of every topic;
- type 1 (unclean): a partition with a live leader is ELECTION_NOT_NEEDED;
- an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION (3);
- an election type other than 0 and 1 is INVALID_REQUEST (42) at the top;
- v2 (flexible) answers the same;
- the leader epochs are unchanged (nothing was elected) and /metrics shows
  the elections and offline partitions;
- `sluicectl leader elect` prints the results (a table, or JSON) and exits
  0, 1 for a partition it could not elect, 2 for bad usage.
"""

import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, free_port, main, test  # noqa: E402
from kraw import W, Conn, compact_str, read_compact_str, read_uvarint, uvarint  # noqa: E402

ELECT_LEADERS, API_VERSIONS = 43, 18
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, ELECTION_NOT_NEEDED = 3, 42, 84
NOT_NEEDED_MSG = "Leader election not needed for topic partition."
SLUICECTL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "sluicectl")


def elect(c, ver, topics, etype=0):
    """ElectLeaders: topics is None (every partition) or [(name, [p...])].
    Returns (top-level error or None, {topic: {partition: (code, message)}})."""
    if ver < 2:
        w = W()
        if ver >= 1:
            w.i8(etype)
        if topics is None:
            w.i32(-1)
        else:
            w.array(topics, lambda w, t: w.str(t[0]).array(t[1], lambda w, p: w.i32(p)))
        w.i32(30000)
        r = c.request(ELECT_LEADERS, ver, w)
        r.i32()
        top = r.i16() if ver >= 1 else None
        res = r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i16(), r.str()))))
        r.done()
    else:
        body = bytes([etype & 0xFF])
        if topics is None:
            body += uvarint(0)
        else:
            body += uvarint(len(topics) + 1)
            for name, parts in topics:
                body += compact_str(name) + uvarint(len(parts) + 1)
                for p in parts:
                    body += p.to_bytes(4, "big", signed=True)
                body += b"\x00"
        body += (30000).to_bytes(4, "big") + b"\x00"
        r = c.request_flex(ELECT_LEADERS, ver, body)
        r.i32()
        top = r.i16()
        res = []
        for _ in range(read_uvarint(r) - 1):
            name = read_compact_str(r)
            parts = []
            for _ in range(read_uvarint(r) - 1):
                parts.append((r.i32(), r.i16(), read_compact_str(r)))
                assert read_uvarint(r) == 0
            assert read_uvarint(r) == 0
            res.append((name, parts))
        assert read_uvarint(r) == 0
        r.done()
    return top, {t: {p: (e, m) for p, e, m in parts} for t, parts in res}


def metadata_epochs(c, topic):
    """Metadata v7 of one topic: {partition: (leader, leader epoch)}."""
    r = c.request(3, 7, W().array([topic], lambda w, t: w.str(t)).i8(0))
    r.i32()
    r.array(lambda r: (r.i32(), r.str(), r.i32(), r.str()))
    r.str()
    r.i32()
    out = {}

    def part(r):
        err, idx, leader, epoch = r.i16(), r.i32(), r.i32(), r.i32()
        r.array(lambda r: r.i32())
        r.array(lambda r: r.i32())
        r.array(lambda r: r.i32())
        out[idx] = (leader, epoch)

    r.array(lambda r: (r.i16(), r.str(), r.i8(), r.array(part)))
    return out


@test
def elect_leaders_on_one_node_finds_nothing_to_elect():
    with broker(settings={"admin.listen": "127.0.0.1:%d" % free_port()}) as b:
        with Conn(b.bootstrap) as c:
            apis = c.api_versions().apis
            assert apis.get(ELECT_LEADERS) == (0, 2), apis.get(ELECT_LEADERS)
            assert c.create_topic("a", 3) == 0
            assert c.create_topic("b", 1) == 0
            before = metadata_epochs(c, "a")
            for ver in (0, 1, 2):
                top, res = elect(c, ver, [("a", [0, 1, 2]), ("b", [0])])
                assert top in (None, 0), (ver, top)
                assert res == {"a": {p: (ELECTION_NOT_NEEDED, NOT_NEEDED_MSG) for p in range(3)},
                               "b": {0: (ELECTION_NOT_NEEDED, NOT_NEEDED_MSG)}}, (ver, res)
            # unclean: a live leader is there
            top, res = elect(c, 1, [("a", [1])], etype=1)
            assert (top, res) == (0, {"a": {1: (ELECTION_NOT_NEEDED, NOT_NEEDED_MSG)}}), (top, res)
            # null: every partition of every topic (the internal ones too)
            top, res = elect(c, 1, None)
            assert top == 0 and res["a"].keys() == {0, 1, 2} and res["b"].keys() == {0}, res
            assert all(e == ELECTION_NOT_NEEDED for t in res.values() for e, _ in t.values()), res
            # unknown topic, unknown partition
            top, res = elect(c, 2, [("nope", [0]), ("b", [7])])
            assert res["nope"][0][0] == UNKNOWN_TOPIC_OR_PARTITION, res
            assert res["b"][7][0] == UNKNOWN_TOPIC_OR_PARTITION, res
            # an election type Kafka does not define
            top, res = elect(c, 1, [("a", [0])], etype=5)
            assert (top, res) == (INVALID_REQUEST, {}), (top, res)
            assert metadata_epochs(c, "a") == before, "nothing was elected: the epochs stay"
        admin_port = b.settings["admin.listen"].rsplit(":", 1)[1]
        m = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % admin_port, timeout=30).read().decode()
        assert "sluice_controller_leader_elections_total 0\n" in m, m
        assert "sluice_controller_unclean_leader_elections_total 0\n" in m, m
        assert "sluice_controller_offline_partitions 0\n" in m, m
        # sluicectl leader elect: JSON, exit 0 (nothing needed is not an error)
        p = subprocess.run([SLUICECTL, "-b", b.bootstrap, "--format", "json", "leader", "elect", "--topic", "a",
                            "--partition", "1"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
        out = json.loads(p.stdout)
        assert out["partitions"] == [{"topic": "a", "partition": 1, "error": "ELECTION_NOT_NEEDED",
                                      "error_code": 84, "message": NOT_NEEDED_MSG}], out
        p = subprocess.run([SLUICECTL, "-b", b.bootstrap, "--format", "json", "leader", "elect", "--unclean"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
        out = json.loads(p.stdout)
        assert {(x["topic"], x["partition"]) for x in out["partitions"]} >= {("a", 0), ("a", 1), ("a", 2), ("b", 0)}
        assert out["elected"] == 0 and out["election"] == "unclean", out
        p = subprocess.run([SLUICECTL, "-b", b.bootstrap, "leader", "elect", "--partition", "1"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, "--partition without --topic is bad usage"
        p = subprocess.run([SLUICECTL, "-b", b.bootstrap, "leader", "elect", "--topic", "nope", "--partition", "0"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in p.stderr, (p.returncode, p.stdout, p.stderr)
        assert "not needed" in subprocess.run([SLUICECTL, "-b", b.bootstrap, "leader", "elect", "--topic", "a"],
                                              capture_output=True, text=True, timeout=60).stdout


if __name__ == "__main__":
    main("elections")
