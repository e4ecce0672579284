#!/usr/bin/python3
"""metadata.version, the finalized feature level that gates new metadata
record types (control/meta_features.h, docs/cluster.md "Rolling
upgrades"), against real sluiced processes (scripts/cluster): a 3-node
cluster, each node with a second listener INTERNAL after its PLAINTEXT one
(the inter-broker listener).

- A rolling upgrade: the cluster starts with every node claiming level 1
  at most (SLUICE_TEST_METADATA_VERSION_MAX=1, a test knob standing in for
  an older build), so it starts at level 1. Nodes 1 and 2 restart without
  the knob (upgraded); at level 1 they register with REGISTER_BROKER (the
  record older builds read): Metadata asked on the INTERNAL listener tells
  every broker at its PLAINTEXT address. UpdateFeatures to 2 is refused
  INVALID_UPDATE_VERSION naming broker 3, validate-only too; a node that
  is not the active controller answers NOT_CONTROLLER. Once node 3
  restarts without the knob the upgrade is accepted; ApiVersions v3 (a raw
  frame: its tagged fields) says the new level on every node; a downgrade
  is refused, of either type. A node restarted then registers with
  REGISTER_BROKER_ENDPOINTS: Metadata on INTERNAL tells it at its INTERNAL
  address, while the others (registered at level 1) still at PLAINTEXT.
  Node 3 restarted as an older build again (the knob back) refuses to
  start, naming the cluster's level and its own.
- A new cluster starts at the highest level, as kafka-storage format
  writes the release's: ApiVersions v3 says supported 1-2, finalized 2;
  sluicectl features describe says the same."""

import os
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, main, test  # noqa: E402
from cluster import CLUSTER, Cluster, until  # noqa: E402
from kraw import W, Conn, compact_str, read_compact_str, read_uvarint, uvarint  # noqa: E402

SLUICECTL = os.environ.get("SLUICECTL", os.path.join(REPO, "build", "sluicectl"))
KNOB = "SLUICE_TEST_METADATA_VERSION_MAX"
SETS = ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"]
INVALID_UPDATE_VERSION = 95
NOT_CONTROLLER = 41


def api_versions_v3(addr):
    """ApiVersions v3 on addr (request header v2, response header v0):
    {supported: {name: (min, max)}, finalized: {name: level}, epoch}."""
    body = compact_str("sluice-test") + compact_str("1") + b"\x00"
    with Conn(addr, timeout=10) as k:
        k.corr += 1
        hdr = W().i16(18).i16(3).i32(k.corr).str(k.client_id).b + b"\x00"
        msg = bytes(hdr) + body
        k.s.sendall(struct.pack(">i", len(msg)) + msg)
        r = k.recv(k.corr)
    assert r.i16() == 0
    for _ in range(read_uvarint(r) - 1):
        r.i16(), r.i16(), r.i16()
        assert read_uvarint(r) == 0
    r.i32()                                                          # ThrottleTimeMs
    out = {"supported": {}, "finalized": {}, "epoch": -1}
    for _ in range(read_uvarint(r)):
        tag, size = read_uvarint(r), read_uvarint(r)
        if tag == 0:
            for _ in range(read_uvarint(r) - 1):
                name, lo, hi = read_compact_str(r), r.i16(), r.i16()
                assert read_uvarint(r) == 0
                out["supported"][name] = (lo, hi)
        elif tag == 1:
            out["epoch"] = r.i64()
        elif tag == 2:
            for _ in range(read_uvarint(r) - 1):
                name, hi, lo = read_compact_str(r), r.i16(), r.i16()
                assert read_uvarint(r) == 0 and lo == hi, (lo, hi)
                out["finalized"][name] = hi
        else:
            r._u("%ds" % size, size)
    return out


def update_features(addr, level, upgrade_type=1, validate_only=False):
    """UpdateFeatures v1 raising metadata.version: (top error, [(feature,
    error, message)])."""
    body = (struct.pack(">i", 30000) + uvarint(2) + compact_str("metadata.version") +
            struct.pack(">hb", level, upgrade_type) + b"\x00" + bytes([1 if validate_only else 0]) + b"\x00")
    with Conn(addr, timeout=30) as k:
        r = k.request_flex(57, 1, body)
    r.i32()
    top = r.i16()
    read_compact_str(r)
    res = []
    for _ in range(read_uvarint(r) - 1):
        name, err, msg = read_compact_str(r), r.i16(), read_compact_str(r)
        read_uvarint(r)
        res.append((name, err, msg))
    return top, res


def on_controller(c, level, **kw):
    """UpdateFeatures on every node: the active controller's answer (the
    others must say NOT_CONTROLLER)."""
    answers = {n: update_features(c.addr(n), level, **kw) for n in (1, 2, 3)}
    mine = [a for a in answers.values() if a[0] != NOT_CONTROLLER]
    assert len(mine) == 1, answers
    return mine[0][1][0]


def told(c, via, node):
    """The port Metadata (v1) on address via tells for broker node."""
    with Conn(via, timeout=10) as k:
        r = k.request(3, 1, W().i32(0))                              # no topics
    brokers = r.array(lambda r: (r.i32(), r.str(), r.i32(), r.str()))
    return {b[0]: b[2] for b in brokers}.get(node)


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


@test
def a_rolling_upgrade_raises_metadata_version_once_every_broker_supports_it():
    with Cluster(3, listener="INTERNAL", sets=SETS, env={KNOB: "1"}) as c:
        internal = {n: c.listener_addr(n) for n in (1, 2, 3)}
        v = api_versions_v3(c.addr(1))
        assert v["supported"] == {"metadata.version": (1, 1)} and v["finalized"] == {"metadata.version": 1}, v
        assert v["epoch"] == 0, v                                    # level 1: no FEATURE_LEVEL record

        del c.env[KNOB]                                              # nodes 1 and 2 upgraded
        c.restart(1)
        c.restart(2)
        v = until("node 1 supports 1-2", lambda: (lambda v: v["supported"]["metadata.version"] == (1, 2) and v)(
            api_versions_v3(c.addr(1))))
        assert v["finalized"] == {"metadata.version": 1}, v
        for n in (1, 2, 3):   # REGISTER_BROKER at level 1: the inter-broker (PLAINTEXT) address only
            # (asked of another node: a node tells itself from its own settings)
            via = internal[2 if n == 1 else 1]
            got = until("broker %d told on INTERNAL" % n, lambda: told(c, via, n))
            assert got == c.port(n), (n, got, c.port(n), port_of(internal[n]))
        assert "registers its inter-broker listener PLAINTEXT" in c.log(1)

        def refused(validate_only):
            f, err, msg = on_controller(c, 2, validate_only=validate_only)
            # broker 3 named; or node 3 itself, when it is the active controller
            return err == INVALID_UPDATE_VERSION and re.search(
                r"(broker 3|node 3 \(the active controller\)) supports metadata.version up to 1", msg or "") \
                and (f, err, msg)
        # (until: a broker that has not heartbeated to this controller yet is named as unknown)
        until("the upgrade refused naming broker 3", lambda: refused(False))
        until("validate-only refused likewise", lambda: refused(True))
        assert api_versions_v3(c.addr(2))["finalized"] == {"metadata.version": 1}

        c.restart(3)                                                 # node 3 upgraded
        until("validate-only accepted", lambda: on_controller(c, 2, validate_only=True)[1] == 0)
        assert api_versions_v3(c.addr(2))["finalized"] == {"metadata.version": 1}, "validate-only changes nothing"
        assert on_controller(c, 2)[1] == 0
        for n in (1, 2, 3):
            v = until("node %d at level 2" % n, lambda: (lambda v: v["finalized"]["metadata.version"] == 2 and v)(
                api_versions_v3(c.addr(n))))
            assert v["epoch"] > 0, v
        assert on_controller(c, 2)[1] == 0, "there already: no error"
        for t in (1, 2, 3):                                          # UPGRADE, SAFE_ and UNSAFE_DOWNGRADE
            f, err, msg = on_controller(c, 1, upgrade_type=t)
            assert err == INVALID_UPDATE_VERSION and "lower" in msg, (t, f, err, msg)

        c.restart(2)                                                 # registers with every listener now
        assert until("broker 2 told at its INTERNAL address",
                     lambda: told(c, internal[1], 2) == port_of(internal[2]))
        assert told(c, internal[1], 3) == c.port(3), "broker 3 registered at level 1: PLAINTEXT"
        assert told(c, internal[2], 1) == c.port(1), "broker 1 likewise"
        assert told(c, c.addr(1), 2) == c.port(2), "PLAINTEXT's clients: its PLAINTEXT address"

        # a node of an older build cannot join once the level was raised
        # (Kafka's controller refuses its registration): node 3 restarted
        # with the knob back exits before it is ready, naming both levels
        c.env[KNOB] = "1"
        p = subprocess.run([CLUSTER, "restart", "3", "--dir", c.dir], env=c.env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=180)
        assert p.returncode != 0, ("node 3 of an older build joined a cluster at level 2", p.stdout, p.stderr)
        assert "the cluster's metadata.version is 2 and this node supports 1 at most" in c.log(3), c.log(3)[-2000:]


@test
def a_new_cluster_starts_at_the_highest_level():
    with Cluster(1) as c:
        v = api_versions_v3(c.addr(1))
        assert v["supported"] == {"metadata.version": (1, 2)} and v["finalized"] == {"metadata.version": 2}, v
        assert v["epoch"] > 0, v
        out = subprocess.run([SLUICECTL, "--brokers", c.bootstrap, "features", "describe"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out
        assert out.stdout.split("\n")[1].split()[:4] == ["metadata.version", "1", "2", "2"], out.stdout
        out = subprocess.run([SLUICECTL, "--brokers", c.bootstrap, "features", "upgrade", "--metadata",
                              "1"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and "INVALID_UPDATE_VERSION" in out.stderr, out


if __name__ == "__main__":
    main("features")
