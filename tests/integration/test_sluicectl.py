#!/usr/bin/python3
"""build/sluicectl (or $SLUICECTL) against a real sluiced: every command in
table and JSON form (the JSON is parsed), the exit codes (0 success, 1 Kafka
error or refusal, 2 usage), the error messages for an unreachable broker, an
unknown topic, a bad config key and a reset on an active group; what comes
from the broker's HTTP admin endpoint (shards, log end, health; each broker
gets a free admin port), and the same commands with it unreachable; and
cross-checks of what topic describe and group describe report against kcat
-L (librdkafka 2.0.2), confluent-kafka (librdkafka) and kafka-python for
the same state."""

import json
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, REPO, broker, free_port, main, run, test  # noqa: E402

SLUICECTL = os.environ.get("SLUICECTL", os.path.join(REPO, "build", "sluicectl"))
KCAT = os.environ.get("KCAT", "kcat")
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "num.partitions": 1}


def settings():
    """SETTINGS plus a free port for the broker's admin endpoint (never the
    default 9644, which another broker on this host may hold)."""
    return dict(SETTINGS, **{"admin.listen": "127.0.0.1:%d" % free_port()})


def admin_get(b, path):
    """GET path from broker b's admin endpoint; the parsed JSON."""
    with urllib.request.urlopen("http://%s%s" % (b.settings["admin.listen"], path), timeout=10) as r:
        return json.loads(r.read())


def ctl(b, *args, input=None, rc=0, fmt=None, env=None):
    """Run sluicectl against broker b (and its admin endpoint, unless the
    arguments name one); check the exit status; return (stdout text, stderr
    text), or the parsed JSON with fmt='json'."""
    admin = []
    if b and "admin.listen" in b.settings and "--admin" not in args:
        admin = ["--admin", b.settings["admin.listen"]]
    cmd = [SLUICECTL] + (["-b", b.bootstrap] if b else []) + admin + (["--format", fmt] if fmt else []) + list(args)
    p = run(cmd, input=input, check=False, env=env)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    assert p.returncode == rc, "%s: exit %d, wanted %d\nstdout:\n%s\nstderr:\n%s" % (
        " ".join(cmd), p.returncode, rc, out, err)
    if fmt == "json" and rc == 0:
        return json.loads(out)
    return out, " ".join(err.split())   # messages wrap at 80 columns: compare words


def murmur2(data):
    """Java's murmur2 (kafka-protocol/README.md)."""
    m, seed = 0x5bd1e995, 0x9747b28c
    n = len(data)
    h = (seed ^ n) & 0xffffffff
    i = 0
    while i + 4 <= n:
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) & 0xffffffff
        k ^= k >> 24
        k = (k * m) & 0xffffffff
        h = (h * m) & 0xffffffff
        h ^= k
        i += 4
    left = n - i
    if left == 3:
        h ^= data[i + 2] << 16
    if left >= 2:
        h ^= data[i + 1] << 8
    if left >= 1:
        h ^= data[i]
        h = (h * m) & 0xffffffff
    h ^= h >> 13
    h = (h * m) & 0xffffffff
    h ^= h >> 15
    return h


# Java's own values (kafka-protocol/README.md, test_rdkafka.c murmur2_matches_java)
for _k, _h in ((b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
               (b"a-little-bit-longer-string", -1486304829)):
    assert murmur2(_k) == _h & 0xffffffff, _k


def partition_of(key, n):
    return (murmur2(key) & 0x7fffffff) % n


def kcat_metadata(b, topic):
    p = run([KCAT, "-b", b.bootstrap, "-m", "30", "-L", "-J", "-t", topic])
    md = json.loads(p.stdout)
    return [t for t in md["topics"] if t["topic"] == topic][0]


@test
def help_and_usage_exit_codes():
    """--help at every level exits 0 and shows examples; bad usage exits 2
    and points at --help; no command at all is usage too."""
    out, _ = ctl(None, "--help")
    assert "topic describe" in out and "exit status" in out and "HTTP admin" in out, out
    for noun in ("cluster", "topic", "group", "record"):
        out, _ = ctl(None, noun, "--help")
        assert "verbs:" in out, out
    for cmd in (["topic", "create"], ["group", "reset-offsets"], ["record", "consume"], ["cluster", "info"]):
        out, _ = ctl(None, *cmd, "--help")
        assert "examples:" in out and "sluicectl " + " ".join(cmd) in out, out
    # every help text fits an 80-column terminal
    helps = [ctl(None, "--help")[0]]
    for noun in ("cluster", "topic", "group", "record"):
        out, _ = ctl(None, noun, "--help")
        helps.append(out)
        for verb in re.findall(r"^  ([a-z-]+)", out.split("verbs:")[1], re.M):
            helps.append(ctl(None, noun, verb, "--help")[0])
    assert len(helps) == 22, len(helps)
    for h in helps:
        assert max(len(l) for l in h.splitlines()) <= 80, h
    ctl(None, rc=2)
    _, err = ctl(None, "frob", "list", rc=2)
    assert "unknown noun 'frob'" in err, err
    _, err = ctl(None, "topic", "frob", rc=2)
    assert "unknown verb 'frob'" in err and "--help" in err, err
    _, err = ctl(None, "topic", "create", "x", "--bogus", rc=2)
    assert "unknown option '--bogus'" in err, err
    _, err = ctl(None, "--format", "xml", "topic", "list", rc=2)
    assert "table or json" in err, err
    _, err = ctl(None, "topic", "create", "t", "-p", "zero", rc=2)
    assert "--partitions" in err, err


@test
def unreachable_broker_is_named_with_what_to_do():
    """Nobody listens on the port: exit 1, the address and the reason, and
    what to do; $SLUICE_BROKERS is the bootstrap when -b is absent."""
    port = free_port()
    p = run([SLUICECTL, "topic", "list"], check=False,
            env=dict(os.environ, SLUICE_BROKERS="127.0.0.1:%d" % port))
    err = p.stderr.decode()
    assert p.returncode == 1, (p.returncode, err)
    assert "127.0.0.1:%d" % port in err and "refused" in err.lower() and "what to do" in err, err
    _, err = ctl(None, "-b", "127.0.0.1:%d" % port, "cluster", "info", rc=1)
    assert "no broker reachable" in err and "SLUICE_BROKERS" in err, err


@test
def cluster_info_table_and_json():
    with broker(settings=settings()) as b:
        ctl(b, "topic", "create", "a", "-p", "3")
        info = ctl(b, "cluster", "info", fmt="json")
        cluster_id = re.search(r"cluster (\S+)\)", b.ready_line).group(1)
        assert info["cluster_id"] == cluster_id, (info, b.ready_line)
        assert [(x["node_id"], x["port"]) for x in info["brokers"]] == [(1, b.port)], info
        assert info["controller_id"] == 1 and info["offline_partitions"] == 0, info
        assert info["under_replicated_partitions"] == 0, info
        # a, plus __consumer_offsets and __transaction_state
        assert info["topics"] == 3 and info["internal_topics"] == 2, info
        assert {a["name"] for a in info["api_versions"]} >= {"Produce", "Fetch", "Metadata"}, info
        # from the admin endpoint: the broker's shards (harness: 2) and health
        assert [(x["shards"], x["health"]) for x in info["brokers"]] == [(2, "ready")], info
        assert len(admin_get(b, "/v1/shards")["shards"]) == 2
        out, err = ctl(b, "cluster", "info")
        assert cluster_id in out and "offline partitions" in out, out
        assert re.search(r"SHARDS\s+HEALTH\n\s+1\*\s+127\.0\.0\.1\s+%d\s+-\s+2\s+ready\n" % b.port, out), out
        assert max(len(l) for l in out.splitlines()) <= 80, out
        assert err == "", err
        # $SLUICE_ADMIN when --admin is absent
        p = run([SLUICECTL, "-b", b.bootstrap, "--format", "json", "cluster", "info"],
                env=dict(os.environ, SLUICE_ADMIN=b.settings["admin.listen"]))
        assert json.loads(p.stdout)["brokers"][0]["shards"] == 2, p.stdout
        _, err = ctl(b, "--admin", "nope", "cluster", "info", rc=2)
        assert "bad admin address 'nope'" in err and "--admin" in err, err


@test
def admin_endpoint_unreachable_leaves_fields_unknown():
    """--admin names a closed port: cluster info and topic describe still
    exit 0; shards, health, log end and shard are unknown (null, ?) with one
    note on stderr naming the address and --admin; the size on disk still
    comes from DescribeLogDirs (Kafka protocol)."""
    with broker(settings=settings()) as b:
        closed = "127.0.0.1:%d" % free_port()
        ctl(b, "topic", "create", "t", "-p", "3")
        ctl(b, "record", "produce", "t", "-p", "1", input=b"".join(b"r%d\n" % i for i in range(10)))
        info = ctl(b, "--admin", closed, "cluster", "info", fmt="json")
        assert [(x["shards"], x["health"]) for x in info["brokers"]] == [(None, None)], info
        out, err = ctl(b, "--admin", closed, "cluster", "info")
        assert re.search(r"^\s+1\*\s+127\.0\.0\.1\s+%d\s+-\s+\?\s+\?$" % b.port, out, re.M), out
        assert err.count("admin endpoint %s" % closed) == 1 and "refused" in err.lower(), err
        assert "--admin HOST:PORT" in err and "admin.listen" in err, err
        d = ctl(b, "--admin", closed, "topic", "describe", "t", fmt="json")["topics"][0]
        for p in d["partitions"]:
            assert p["log_end_offset"] is None and p["shard"] is None, p
            assert p["high_watermark"] == (10 if p["partition"] == 1 else 0), p
            v = admin_get(b, "/v1/partitions/t/%d" % p["partition"])
            assert p["size_bytes"] == v["size_bytes"], (p, v)
        out, err = ctl(b, "--admin", closed, "topic", "describe", "t")
        assert err.count("admin endpoint %s" % closed) == 1, err   # one note, not one per partition
        assert re.search(r"^\s+1\s+1\s+1\s+1\s+0\s+10\s+\?\s+\d+ B\s+\?$", out, re.M), out
        assert "(?: unknown" in out, out
        # something that is not the admin endpoint (the Kafka port): unknown too
        _, err = ctl(b, "--admin", b.bootstrap, "--timeout", "2000", "topic", "describe", "t")
        assert err.count("admin endpoint %s" % b.bootstrap) == 1, err


def check_json(b, *args):
    """cluster check --format json: (exit status, parsed output)."""
    cmd = [SLUICECTL, "-b", b.bootstrap, "--admin", b.settings["admin.listen"], "--format", "json",
           "cluster", "check"] + list(args)
    p = run(cmd, check=False)
    assert p.stderr == b"", p.stderr
    return p.returncode, json.loads(p.stdout)


def findings(out, code, topic=None):
    return [f for f in out["findings"] if f["finding"] == code and (topic is None or f["topic"] == topic)]


@test
def cluster_check_names_what_one_broker_can_lose():
    """One broker with the defaults, plus topics set up to trip each finding
    one node can: replication factor 1 (every topic), min.insync.replicas 1
    (the broker default, inherited), unclean election on a topic,
    min.insync.replicas 2 on a one-replica topic (>= the replication factor,
    and an ISR below it), the internal topics on one replica. Exit 1; each
    finding with its severity, where, what is at risk and the setting; what
    does not apply is not reported, and a fixed setting drops its finding."""
    with broker(settings=settings()) as b:
        ctl(b, "topic", "create", "plain", "-p", "2")
        ctl(b, "topic", "create", "unclean", "-c", "unclean.leader.election.enable=true")
        ctl(b, "topic", "create", "strict", "-p", "2", "-c", "min.insync.replicas=2")
        rc, out = check_json(b)
        assert rc == 1 and out["exit_status"] == 1, (rc, out)
        assert (out["brokers"], out["topics"]) == (1, 5), out
        sev = {(f["finding"], f["topic"], f["broker"]): f["severity"] for f in out["findings"]}
        assert sev[("few-brokers", None, None)] == "data-loss", sev
        # the broker's default min.insync.replicas (1), and every topic inheriting it
        f = findings(out, "min-insync-replicas-1")
        assert {(x["topic"], x["broker"]) for x in f} == {
            (None, 1), ("plain", None), ("unclean", None), ("__consumer_offsets", None),
            ("__transaction_state", None)}, f
        for x in f:
            assert x["severity"] == "data-loss" and (x["setting"], x["value"]) == ("min.insync.replicas", "2"), x
            assert "acks=all" in x["risk"] and "no protection" in x["risk"], x
        assert "the broker default" in findings(out, "min-insync-replicas-1", "plain")[0]["what"]
        # replication factor 1: the user topics, and the internal ones with their own keys
        f = findings(out, "replication-factor")
        assert sorted(x["topic"] for x in f) == ["plain", "strict", "unclean"], f
        assert all(x["partitions"] is None and x["value"] == "3" for x in f), f
        f = {x["topic"]: x for x in findings(out, "internal-topic-replication")}
        assert f["__consumer_offsets"]["setting"] == "offsets.topic.replication.factor", f
        assert f["__transaction_state"]["setting"] == "transaction.state.log.replication.factor", f
        assert "committed offsets" in f["__consumer_offsets"]["risk"], f
        # unclean election on the topic, not on the others
        f = findings(out, "unclean-leader-election")
        assert [(x["topic"], x["severity"], x["setting"], x["value"]) for x in f] == [
            ("unclean", "data-loss", "unclean.leader.election.enable", "false")], f
        assert "set on the topic" in f[0]["what"], f
        # min.insync.replicas 2 on one replica: acks=all is never acknowledged
        f = findings(out, "min-insync-replicas-ge-rf")
        assert [(x["topic"], x["severity"], x["value"]) for x in f] == [("strict", "availability", "1")], f
        assert "never" in f[0]["risk"], f
        f = findings(out, "under-min-isr")
        assert [(x["topic"], x["partitions"]) for x in f] == [("strict", [0, 1])], f
        assert "NOT_ENOUGH_REPLICAS" in f[0]["risk"], f
        # absent: strict's own min.insync.replicas is 2; nothing under-replicated,
        # offline or on racks; no warnings
        assert not findings(out, "min-insync-replicas-1", "strict"), out
        for code in ("under-replicated", "offline-partitions", "replicas-one-rack", "one-rack", "rack-missing",
                     "broker-unreachable", "settings-unknown"):
            assert not findings(out, code), (code, out)
        assert out["warning"] == 0 and out["data_loss"] + out["availability"] == len(out["findings"]), out
        # the same in text, every line within 80 columns
        text, err = ctl(b, "cluster", "check", rc=1)
        assert err == "", err
        words = " ".join(text.split())   # long lines wrap at 80 columns: compare words
        assert "[data-loss] topic unclean: unclean.leader.election.enable=true (set on the topic)" in words, text
        assert "setting: unclean.leader.election.enable=false" in words, text
        assert "[availability] topic strict, partitions 0,1:" in words, text
        assert "setting: offsets.topic.replication.factor=3" in words, text
        assert re.search(r"^\[data-loss\] cluster: 1 broker\(s\), fewer than 3$", text, re.M), text
        assert re.search(r"\d+ data-loss, 2 availability, 0 warning: exit 1", text), text
        assert max(len(l) for l in text.splitlines()) <= 80, text
        # data-loss findings come first
        sevs = re.findall(r"^\[([a-z-]+)\]", text, re.M)
        assert sevs == sorted(sevs, key=lambda s: ["data-loss", "availability", "warning"].index(s)), sevs
        # fixing a setting drops its finding (and only it)
        ctl(b, "topic", "alter-config", "unclean", "--set", "unclean.leader.election.enable=false")
        ctl(b, "topic", "alter-config", "strict", "--set", "min.insync.replicas=1")
        rc, after = check_json(b)
        assert rc == 1 and not findings(after, "unclean-leader-election"), after
        assert not findings(after, "min-insync-replicas-ge-rf") and not findings(after, "under-min-isr"), after
        assert findings(after, "min-insync-replicas-1", "strict")[0]["what"] == \
            "min.insync.replicas 1 (set on the topic)", after
        assert len(after["findings"]) == len(out["findings"]) - 2, (out, after)
        # usage and connection errors keep their exit codes
        ctl(b, "cluster", "check", "--bogus", rc=2)
        _, err = ctl(None, "-b", "127.0.0.1:%d" % free_port(), "cluster", "check", rc=1)
        assert "no broker reachable" in err, err


@test
def cluster_check_follows_the_broker_default():
    """min.insync.replicas=2 as the broker's default: no min.insync.replicas 1
    finding at all, and every one-replica topic inherits a value it can never
    meet (named as the broker default)."""
    with broker(settings=dict(settings(), **{"min.insync.replicas": 2})) as b:
        ctl(b, "topic", "create", "t")
        rc, out = check_json(b)
        assert rc == 1, out
        assert not findings(out, "min-insync-replicas-1"), out
        f = findings(out, "min-insync-replicas-ge-rf", "t")
        assert len(f) == 1 and "(the broker default)" in f[0]["what"], f
        assert {x["topic"] for x in findings(out, "min-insync-replicas-ge-rf")} == {
            "t", "__consumer_offsets", "__transaction_state"}, out


@test
def topic_describe_marks_and_counts_under_min_isr():
    """topic describe: ISR smaller than min.insync.replicas is marked (ISR!)
    and counted, per partition in JSON; a topic at its settings has none."""
    with broker(settings=settings()) as b:
        ctl(b, "topic", "create", "strict", "-p", "2", "-c", "min.insync.replicas=2")
        ctl(b, "topic", "create", "fine", "-p", "2")
        d = {t["name"]: t for t in ctl(b, "topic", "describe", "strict", "fine", fmt="json")["topics"]}
        assert (d["strict"]["min_insync_replicas"], d["strict"]["under_min_isr_partitions"]) == (2, 2), d
        assert (d["fine"]["min_insync_replicas"], d["fine"]["under_min_isr_partitions"]) == (1, 0), d
        for name, want in (("strict", True), ("fine", False)):
            assert d[name]["under_replicated_partitions"] == 0, d
            for p in d[name]["partitions"]:
                assert (p["under_min_isr"], p["under_replicated"]) == (want, False), p
        out, _ = ctl(b, "topic", "describe", "strict")
        assert re.search(r"^\s+0\s+1\s+1\s+1!\s", out, re.M), out
        assert "under-replicated: 0 (ISR*), under min.insync.replicas 2: 2 (ISR!)" in out, out
        out, _ = ctl(b, "topic", "describe", "fine")
        assert not re.search(r"^\s+\d+\s+1\s+1\s+1!", out, re.M) and "under min.insync.replicas 1: 0 (ISR!)" in out, out


@test
def cluster_info_shows_the_metadata_quorum():
    """cluster info: the controller per broker, and the quorum section from
    DescribeQuorum (55): a quorum of one, this node its leader and only
    voter, its log end the high watermark (nothing uncommitted)."""
    with broker(settings=settings()) as b:
        info = ctl(b, "cluster", "info", fmt="json")
        assert [x["controller"] for x in info["brokers"]] == [True], info
        assert 55 in [a["api_key"] for a in info["api_versions"]], info
        q = info["quorum"]
        assert q and info["quorum_error"] is None, info
        assert q["leader_id"] == 1 and q["leader_epoch"] >= 1 and q["high_watermark"] >= 1, q
        assert [v["node_id"] for v in q["voters"]] == [1] and q["observers"] == [], q
        assert q["voters"][0]["log_end_offset"] == q["high_watermark"] and q["voters"][0]["lag"] == 0, q
        out, _ = ctl(b, "cluster", "info")
        assert "quorum: leader 1, epoch %d, high watermark" % q["leader_epoch"] in out, out


@test
def topic_commands_and_kcat_cross_check():
    """create / list / describe / alter-config / describe-config / delete in
    both formats; describe matches kcat -L and kafka-python's offsets."""
    from kafka import KafkaConsumer, TopicPartition
    with broker(settings=settings()) as b:
        out, _ = ctl(b, "topic", "create", "orders", "-p", "4", "-c", "retention.ms=3600000")
        assert "created topic orders" in out, out
        _, err = ctl(b, "topic", "create", "orders", rc=1)
        assert "TOPIC_ALREADY_EXISTS (36)" in err and "what to do" in err, err
        ctl(b, "topic", "create", "orders", "--if-not-exists")
        ctl(b, "topic", "create", "other")
        lst = ctl(b, "topic", "list", fmt="json")
        assert [(t["name"], t["partitions"]) for t in lst["topics"]] == [("orders", 4), ("other", 1)], lst
        lst = ctl(b, "topic", "list", "--internal", fmt="json")
        assert "__consumer_offsets" in [t["name"] for t in lst["topics"]], lst
        out, _ = ctl(b, "topic", "list")
        assert re.search(r"orders\s+4\s+1\s+no", out), out

        # records so the offsets mean something
        lines = "".join("k%d:v%d\n" % (i, i) for i in range(100))
        ctl(b, "record", "produce", "orders", "-k", ":", input=lines.encode())
        d = ctl(b, "topic", "describe", "orders", fmt="json")["topics"][0]
        parts = {p["partition"]: p for p in d["partitions"]}
        assert sorted(parts) == [0, 1, 2, 3], d
        # cross-check with kcat -L (librdkafka)
        k = kcat_metadata(b, "orders")
        for kp in k["partitions"]:
            p = parts[kp["partition"]]
            assert p["leader"] == kp["leader"], (p, kp)
            assert p["replicas"] == [r["id"] for r in kp["replicas"]], (p, kp)
            assert p["isr"] == [r["id"] for r in kp["isrs"]], (p, kp)
        # and with kafka-python's beginning/end offsets
        c = KafkaConsumer(bootstrap_servers=b.bootstrap)
        tps = [TopicPartition("orders", i) for i in range(4)]
        ends, begins = c.end_offsets(tps), c.beginning_offsets(tps)
        c.close()
        for tp in tps:
            assert parts[tp.partition]["high_watermark"] == ends[tp], (parts, ends)
            assert parts[tp.partition]["log_start_offset"] == begins[tp], (parts, begins)
        assert sum(p["high_watermark"] for p in parts.values()) == 100
        # log end and shard from the admin endpoint, size from DescribeLogDirs:
        # cross-checked with /v1/partitions and /v1/shards
        nshards = len(admin_get(b, "/v1/shards")["shards"])
        for i, p in parts.items():
            v = admin_get(b, "/v1/partitions/orders/%d" % i)
            assert p["log_end_offset"] == p["high_watermark"] == v["log_end_offset"], (p, v)
            assert p["shard"] == v["shard"] and 0 <= p["shard"] < nshards, (p, v, nshards)
            assert p["size_bytes"] == v["size_bytes"] and (p["size_bytes"] > 0) == (p["high_watermark"] > 0), (p, v)
        assert sum(p["size_bytes"] for p in parts.values()) >= 100 * len("k0v0"), parts
        out, err = ctl(b, "topic", "describe", "orders")
        assert "HIGH-WM" in out and max(len(l) for l in out.splitlines()) <= 80, out
        assert err == "", err
        for i, p in parts.items():   # PART LEADER REPLICAS ISR LOG-START HIGH-WM LOG-END SIZE SHARD
            row = re.search(r"^\s+%d\s+1\s+1\s+1\s+0\s+(\d+)\s+(\d+)\s+(\d+ B|[\d.]+ KiB)\s+(\d+)$" % i, out, re.M)
            assert row and int(row.group(1)) == int(row.group(2)) == p["high_watermark"], (i, out)
            assert int(row.group(4)) == p["shard"], (i, out)

        _, err = ctl(b, "topic", "describe", "nope", rc=1)
        assert "UNKNOWN_TOPIC_OR_PARTITION (3)" in err and "sluicectl topic list" in err, err
        out, err = ctl(b, "--format", "json", "topic", "describe", "orders", "nope", rc=1)
        assert out == "" and "topic 'nope'" in err, (out, err)   # no half-written JSON
        assert "nope" not in [t["name"] for t in ctl(b, "topic", "list", fmt="json")["topics"]]  # not auto-created

        # configs: only what is set on the topic, --all for everything with its source
        cfg = ctl(b, "topic", "describe-config", "orders", fmt="json")
        assert [(x["name"], x["value"], x["source"]) for x in cfg["configs"]] == [
            ("retention.ms", "3600000", "topic")], cfg
        _, err = ctl(b, "topic", "alter-config", "orders", "--set", "no.such.key=1", rc=1)
        assert "INVALID_CONFIG (40)" in err and "no.such.key" in err and "what to do" in err, err
        out, _ = ctl(b, "topic", "alter-config", "orders", "--set", "cleanup.policy=compact", "--delete", "retention.ms")
        assert out.splitlines() == ["topic orders: set cleanup.policy=compact",
                                    "topic orders: reset retention.ms to its default"], out
        cfg = ctl(b, "topic", "describe-config", "orders", fmt="json")
        assert [(x["name"], x["value"]) for x in cfg["configs"]] == [("cleanup.policy", "compact")], cfg
        allc = ctl(b, "topic", "describe-config", "orders", "--all", fmt="json")
        byname = {x["name"]: x for x in allc["configs"]}
        assert byname["retention.ms"]["source"] != "topic" and byname["cleanup.policy"]["source"] == "topic", allc
        out, _ = ctl(b, "topic", "describe-config", "orders", "--all")
        assert "SOURCE" in out and "default" in out, out

        out, _ = ctl(b, "topic", "delete", "other")
        assert "deleted topic other" in out, out
        _, err = ctl(b, "topic", "delete", "other", rc=1)
        assert "UNKNOWN_TOPIC_OR_PARTITION" in err, err
        res = ctl(b, "topic", "delete", "other", "--if-exists", fmt="json")
        assert res["topics"][0]["deleted"] is False, res
        assert [t["name"] for t in ctl(b, "topic", "list", fmt="json")["topics"]] == ["orders"]
        ctl(b, "topic", "create", "x1")
        ctl(b, "topic", "create", "x2")
        res = ctl(b, "topic", "delete", "x1", "x2", fmt="json")
        assert [(t["name"], t["deleted"]) for t in res["topics"]] == [("x1", True), ("x2", True)], res
        assert [t["name"] for t in ctl(b, "topic", "list", fmt="json")["topics"]] == ["orders"]


@test
def produce_and_consume_cross_checked_with_kcat():
    """Keyed lines land on the partition Java's murmur2 picks, with their
    headers; kcat reads what sluicectl wrote and sluicectl reads what kcat
    wrote gzip-compressed; offsets, -n, @time and the print format."""
    with broker(settings=settings()) as b:
        ctl(b, "topic", "create", "t", "-p", "3")
        keys = [("key-%d" % i).encode() for i in range(60)]
        lines = b"".join(k + b"=" + b"value-" + k + b"\n" for k in keys)
        res = ctl(b, "record", "produce", "t", "-k", "=", "-H", "src=ctl", "-H", "n=1", input=lines, fmt="json")
        assert res["records"] == 60, res
        got = run([KCAT, "-b", b.bootstrap, "-C", "-t", "t", "-o", "beginning", "-e", "-q",
                   "-f", "%p %k %s %h\n"]).stdout.decode().splitlines()
        assert len(got) == 60, got
        for line in got:
            p, k, v, h = line.split(" ")
            assert int(p) == partition_of(k.encode(), 3), line
            assert v == "value-" + k and h == "src=ctl,n=1", line
        # sluicectl reads it back: format string, JSON lines, -n, one partition
        out, _ = ctl(b, "record", "consume", "t", "--print", "%p|%o|%k|%v|%h\\n")
        rows = [l.split("|") for l in out.splitlines()]
        assert sorted(r[2] for r in rows) == sorted(k.decode() for k in keys), rows[:3]
        assert all(int(r[0]) == partition_of(r[2].encode(), 3) for r in rows), rows[:3]
        js = [json.loads(l) for l in ctl(b, "--format", "json", "record", "consume", "t", "-p", "1")[0].splitlines()]
        assert [j["offset"] for j in js] == list(range(len(js))), js[:2]
        assert all(j["headers"] == [{"key": "src", "value": "ctl"}, {"key": "n", "value": "1"}] for j in js), js[0]
        out, _ = ctl(b, "record", "consume", "t", "-n", "5")
        assert len(out.splitlines()) == 5, out
        # what kcat writes (gzip), sluicectl reads
        run([KCAT, "-b", b.bootstrap, "-P", "-t", "z", "-p", "0", "-z", "gzip"],
            input=b"".join(b"zipped %d\n" % i for i in range(500)))
        out, _ = ctl(b, "record", "consume", "z")
        assert out.splitlines() == ["zipped %d" % i for i in range(500)], out[:200]
        # from an offset, from a time (after everything: nothing), latest: nothing
        out, _ = ctl(b, "record", "consume", "z", "-o", "498")
        assert out.splitlines() == ["zipped 498", "zipped 499"], out
        future = int(time.time() * 1000) + 3600 * 1000
        out, _ = ctl(b, "record", "consume", "z", "-o", "@%d" % future)
        assert out == "", out
        out, _ = ctl(b, "record", "consume", "z", "-o", "latest")
        assert out == "", out
        # JSON stays valid UTF-8: text passes through, other bytes become U+FFFD
        run([KCAT, "-b", b.bootstrap, "-P", "-t", "u", "-p", "0"],
            input="h\u00e9llo \u20ac \U0001f600\n".encode() + b"bin\xff\xc3(\x01\"\\\n")
        p = run([SLUICECTL, "-b", b.bootstrap, "--format", "json", "record", "consume", "u"])
        vals = [json.loads(l)["value"] for l in p.stdout.decode("utf-8").splitlines()]   # strict UTF-8
        assert vals == ["h\u00e9llo \u20ac \U0001f600", "bin\ufffd\ufffd(\x01\"\\"], vals
        # explicit partition and acks=1; a bad partition is a Kafka error
        res = ctl(b, "record", "produce", "t", "-p", "2", "--acks", "1", input=b"a\nb\n", fmt="json")
        assert [(p["partition"], p["records"]) for p in res["partitions"]] == [(2, 2)], res
        out, _ = ctl(b, "record", "produce", "t", "-p", "2", "--acks", "0", input=b"c\n\nd\n")
        assert out.splitlines()[0] == "produced 2 record(s) to t (acks=0: offsets unknown)", out
        assert re.search(r"^\s+2\s+2\s+-\s+-$", out, re.M), out
        _, err = ctl(b, "record", "produce", "t", "-p", "7", input=b"a\n", rc=1)
        assert "UNKNOWN_TOPIC_OR_PARTITION" in err, err
        _, err = ctl(b, "record", "consume", "missing", rc=1)
        assert "UNKNOWN_TOPIC_OR_PARTITION" in err, err


def rdk_consumer(b, group, topic, client_id):
    from confluent_kafka import Consumer
    return Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "client.id": client_id,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})


@test
def group_commands_cross_checked_with_librdkafka():
    """A librdkafka consumer commits offsets; group describe's members,
    committed offsets and lag match confluent-kafka's list_groups and
    committed() and kafka-python's end offsets. reset-offsets is refused
    while the member is active; after it leaves, a dry run changes nothing
    and --execute moves the offsets (read back through librdkafka);
    delete-offsets, delete, list."""
    from confluent_kafka import TopicPartition as RTP
    from confluent_kafka.admin import AdminClient
    with broker(settings=settings()) as b:
        ctl(b, "topic", "create", "g", "-p", "2")
        ctl(b, "record", "produce", "g", "-p", "0", input=b"".join(b"a%d\n" % i for i in range(30)))
        ctl(b, "record", "produce", "g", "-p", "1", input=b"".join(b"b%d\n" % i for i in range(20)))
        c = rdk_consumer(b, "app", "g", "app-1")
        c.subscribe(["g"])
        deadline = time.monotonic() + HANG_GUARD
        while not c.assignment():
            c.poll(0.2)
            assert time.monotonic() < deadline, "no assignment"
        c.commit(offsets=[RTP("g", 0, 10), RTP("g", 1, 20)], asynchronous=False)

        d = ctl(b, "group", "describe", "app", fmt="json")
        assert d["state"] == "Stable" and d["protocol_type"] == "consumer", d
        groups = AdminClient({"bootstrap.servers": b.bootstrap}).list_groups(timeout=30)
        rg = [g for g in groups if g.id == "app"][0]
        assert [(m["member_id"], m["client_id"]) for m in d["members"]] == \
            [(m.id, m.client_id) for m in rg.members], (d, rg.members)
        assert d["protocol"] == rg.protocol, (d, rg.protocol)
        assert sorted(p for a in d["members"][0]["assignment"] for p in a["partitions"]) == [0, 1], d
        offs = {o["partition"]: o for o in d["offsets"]}
        committed = {tp.partition: tp.offset for tp in c.committed([RTP("g", 0), RTP("g", 1)], timeout=30)}
        assert {p: o["committed_offset"] for p, o in offs.items()} == committed == {0: 10, 1: 20}, (offs, committed)
        assert offs[0]["high_watermark"] == 30 and offs[0]["lag"] == 20 and offs[1]["lag"] == 0, offs
        assert offs[0]["oldest_unconsumed_age_ms"] is not None and offs[1]["oldest_unconsumed_age_ms"] is None
        assert offs[0]["owner"] == "app-1", offs
        out, _ = ctl(b, "group", "describe", "app")
        assert "app-1" in out and "LAG" in out and max(len(l) for l in out.splitlines()) <= 80, out
        lst = ctl(b, "group", "list", fmt="json")
        assert [(g["group_id"], g["state"], g["members"]) for g in lst["groups"]] == [("app", "Stable", 1)], lst
        out, _ = ctl(b, "group", "list")
        assert re.search(r"^app\s+Stable\s+consumer\s+1\s+1$", out, re.M), out

        # a member that has committed nothing: its assigned partitions, no offsets
        f = rdk_consumer(b, "fresh", "g", "fresh-1")
        f.subscribe(["g"])
        while not f.assignment():
            f.poll(0.2)
            assert time.monotonic() < deadline, "no assignment"
        d = ctl(b, "group", "describe", "fresh", fmt="json")
        assert sorted((o["partition"], o["committed_offset"], o["lag"], o["owner"], o["high_watermark"])
                      for o in d["offsets"]) == [(0, None, None, "fresh-1", 30), (1, None, None, "fresh-1", 20)], d
        f.close()
        ctl(b, "group", "delete", "fresh")

        # a reset on an active group is refused and says what to do
        _, err = ctl(b, "group", "reset-offsets", "app", "--topic", "g", "--to-earliest", "--execute", rc=1)
        assert "1 active member" in err and "stop its consumers" in err, err
        _, err = ctl(b, "group", "delete", "app", rc=1)
        assert "NON_EMPTY_GROUP (68)" in err, err
        c.close()   # leaves the group

        dry = ctl(b, "group", "reset-offsets", "app", "--topic", "g", "--to-earliest", fmt="json")
        assert dry["executed"] is False and \
            [(o["partition"], o["old_offset"], o["new_offset"]) for o in dry["offsets"]] == [(0, 10, 0), (1, 20, 0)], dry
        out, _ = ctl(b, "group", "reset-offsets", "app", "--topic", "g:0", "--shift-by", "-4")
        assert "dry run" in out, out
        assert {o["partition"]: o["committed_offset"] for o in ctl(b, "group", "describe", "app", fmt="json")["offsets"]} == {0: 10, 1: 20}
        ctl(b, "group", "reset-offsets", "app", "--topic", "g:0", "--shift-by", "-4", "--execute")
        ctl(b, "group", "reset-offsets", "app", "--topic", "g:1", "--to-offset", "5", "--execute")
        c2 = rdk_consumer(b, "app", "g", "app-2")
        got = {tp.partition: tp.offset for tp in c2.committed([RTP("g", 0), RTP("g", 1)], timeout=30)}
        c2.close()
        assert got == {0: 6, 1: 5}, got
        _, err = ctl(b, "group", "reset-offsets", "app", "--topic", "g", rc=2)
        assert "exactly one of" in err, err

        # record consume --group starts at the commits and commits what it read
        out, _ = ctl(b, "record", "consume", "g", "--group", "app", "-p", "0", "-n", "3")
        assert out.splitlines() == ["a6", "a7", "a8"], out
        offs = {o["partition"]: o["committed_offset"] for o in ctl(b, "group", "describe", "app", fmt="json")["offsets"]}
        assert offs == {0: 9, 1: 5}, offs

        out, _ = ctl(b, "group", "delete-offsets", "app", "--topic", "g:1", "-t", "nope", rc=1)
        assert "UNKNOWN_TOPIC_OR_PARTITION" in _, _
        res = ctl(b, "group", "delete-offsets", "app", "--topic", "g:1", fmt="json")
        assert res["partitions"] == [{"topic": "g", "partition": 1, "deleted": True, "error": None}], res
        offs = {o["partition"] for o in ctl(b, "group", "describe", "app", fmt="json")["offsets"]}
        assert offs == {0}, offs
        out, _ = ctl(b, "group", "delete", "app")
        assert "deleted group app" in out, out
        _, err = ctl(b, "group", "describe", "app", rc=1)
        assert "GROUP_ID_NOT_FOUND" in err, err
        assert ctl(b, "group", "list", fmt="json") == {"groups": []}


@test
def add_partitions_samples_keys_and_refuses_without_force():
    """Keyed records: sluicectl reports the share of sampled keys that
    murmur2 moves for the new count (computed here independently) and
    refuses without --force; with --force the count grows (kcat -L agrees).
    A topic without keys grows without --force."""
    with broker(settings=settings()) as b:
        ctl(b, "topic", "create", "k", "-p", "3")
        keys = [("user-%d" % i).encode() for i in range(200)]
        ctl(b, "record", "produce", "k", "-k", ",", input=b"".join(k + b",x\n" for k in keys))
        moved = sum(partition_of(k, 3) != partition_of(k, 5) for k in keys)
        _, err = ctl(b, "topic", "add-partitions", "k", "--count", "5", rc=1)
        assert "without --force" in err and "murmur2" in err and "new topic" in err, err
        assert "%d have keys, and %d of those" % (200, moved) in err, (moved, err)
        assert len(kcat_metadata(b, "k")["partitions"]) == 3
        _, err = ctl(b, "topic", "add-partitions", "k", "--count", "2", rc=2)
        assert "must be larger" in err, err
        res = ctl(b, "topic", "add-partitions", "k", "--count", "5", "--force", fmt="json")
        assert res["added"] is True and res["moved_keys"] == moved and res["keyed_records"] == 200, res
        assert len(kcat_metadata(b, "k")["partitions"]) == 5
        ctl(b, "topic", "create", "nokey", "-p", "1")
        ctl(b, "record", "produce", "nokey", input=b"1\n2\n3\n")
        out, _ = ctl(b, "topic", "add-partitions", "nokey", "--count", "4")
        assert "0 keyed" in out, out
        assert len(kcat_metadata(b, "nokey")["partitions"]) == 4


@test
def bash_completion_completes_nouns_verbs_options_and_topics():
    script = run([SLUICECTL, "completion", "bash"]).stdout.decode()
    run(["bash", "-n"], input=script.encode())
    with broker(settings=settings()) as b:
        ctl(b, "topic", "create", "completed-topic")
        probe = script + r"""
PATH=%s:$PATH
complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _sluicectl; echo "${COMPREPLY[*]}"; }
complete_words sluicectl to
complete_words sluicectl topic de
complete_words sluicectl group reset-offsets --to-e
complete_words sluicectl -b %s topic describe comp
complete_words sluicectl -b %s group reset-offsets app --topic comp
complete_words sluicectl --adm
complete_words sluicectl --admin 127.0.0.1:1 topic describe comp
""" % (os.path.dirname(SLUICECTL), b.bootstrap, b.bootstrap)
        out = subprocess.run(["bash", "-c", probe], stdout=subprocess.PIPE, timeout=HANG_GUARD).stdout.decode()
        lines = out.splitlines()
        assert lines[0] == "topic", lines
        assert sorted(lines[1].split()) == ["delete", "describe", "describe-config"], lines
        assert lines[2] == "--to-earliest", lines
        assert lines[3] == "completed-topic" and lines[4] == "completed-topic", lines
        assert sorted(lines[5].split()) == ["--admin", "--admin-token-file"], lines
        assert lines[6] == "", lines   # --admin's value is skipped: no -b, so no topics from 9092


if __name__ == "__main__":
    main("sluicectl")
