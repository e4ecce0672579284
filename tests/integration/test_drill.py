#!/usr/bin/python3
"""`sluicectl drill` (tools/sluicefault/drill.py) against a real three-node
loopback cluster (tests/integration/cluster.py): its drill file's commands
are scripts/cluster's (kill, restart) and kill -STOP/-CONT of a node's pid.

- leader-loss holds (exit 0): nothing lost, the report printed, the drill's
  topics gone afterwards;
- consumer-crash-after-commit holds: the consumer SIGKILLed right after a
  commit, its successor's first read of each partition is the committed
  offset (checked here from the histories too);
- a drill whose promise is broken fails (exit 1) and names the lost
  records: one replica (min.insync.replicas=1,
  unclean.leader.election.enable=true) and a `start` command that loses
  the killed node's disk (its drill topic directories removed): with no
  other copy the partition comes back empty whatever the timing;
- Ctrl-C in the middle of a fault (a paused leader) resumes the node,
  stops the clients and deletes the drill's topics (exit 2, no verdict);
  the Ctrl-C comes while the pause command still runs, and that command's
  work goes on after its shell is gone (as an ssh's remote side would):
  the drill waits for it before it resumes the node (a drill that killed
  the command and resumed at once left the node paused a second later);
- txn-leader-loss holds: transactional producers and the copier across
  a leader's SIGKILL, both topics read back and checked (about 11 s, so
  only with --long: `make fault` runs it);
- a bad drill file is refused with exit 2 naming its line and key;
- a cluster with a topic the drill did not create is refused (exit 2)
  unless --allow-existing-topics.
"""

import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, main, skip, temp_dir, test  # noqa: E402
from cluster import CLUSTER, Cluster, create_topic, until  # noqa: E402

SLUICECTL = os.environ.get("SLUICECTL", os.path.join(REPO, "build", "sluicectl"))
SETS = ["broker.session.timeout.ms=4000", "group.initial.rebalance.delay.ms=0", "replica.lag.time.max.ms=10000"]

_cluster = None
LONG = "--long" in sys.argv     # the slow drills too (make fault)
if LONG:
    sys.argv.remove("--long")


def tmpdir():
    """A directory for one test's drill file and histories, removed at exit."""
    import atexit
    import shutil
    d = temp_dir("sluice-drill-")
    atexit.register(shutil.rmtree, d, True)
    return d


def cluster():
    """One cluster for the suite (closed by main's exit through atexit)."""
    global _cluster
    if _cluster is None:
        import atexit
        _cluster = Cluster(3, sets=SETS)
        atexit.register(_cluster.close)
    return _cluster


def drill_file(c, path, start=None):
    d = c.dir
    start = start or "%s restart {node} --dir %s" % (CLUSTER, d)
    with open(path, "w") as f:
        f.write("# the test cluster's nodes: scripts/cluster, and signals to their pids\n[all]\n"
                "kill = %s kill {node} --dir %s\nstart = %s\n"
                "pause = kill -STOP $(cat %s/n{node}/pid)\nresume = kill -CONT $(cat %s/n{node}/pid)\n\n"
                % (CLUSTER, d, start, d, d))
        for n in (1, 2, 3):
            f.write("[node %d]\nkafka = %s\n" % (n, c.addr(n)))
    return path


def sluicectl(*args, timeout=300):
    p = subprocess.run([SLUICECTL] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def drill_topics(c):
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": c.bootstrap}).list_topics(timeout=20)
    return sorted(t for t in md.topics if t.startswith("sluice-drill-"))


def histories(out):
    recs = {}
    for f in os.listdir(out):
        if f.endswith(".jsonl") and not f.endswith(".drill.jsonl"):
            with open(os.path.join(out, f)) as fh:
                recs[f] = [json.loads(line) for line in fh if line.endswith("\n")]
    return recs


@test
def leader_loss_holds_and_cleans_up():
    c = cluster()
    tmp = tmpdir()
    df = drill_file(c, os.path.join(tmp, "drill.ini"))
    rc, out, err = sluicectl("drill", "run", "leader-loss", "--drill-file", df, "--seconds", "4",
                             "--out", os.path.join(tmp, "out"))
    assert rc == 0, "exit %d\n%s\n%s" % (rc, out, err)
    for want in ("PROMISES HELD", "acknowledged records lost", "fault on: node ", "converged after the heal"):
        assert want in out, "no %r in the report:\n%s" % (want, out)
    assert "kill" in err and "start" in err, err
    until("the drill's topics deleted", lambda: drill_topics(c) == [])
    print("  " + "\n  ".join(l for l in out.splitlines() if "lost" in l or "unacknowledged" in l or "converged" in l))


@test
def txn_leader_loss_holds_and_cleans_up():
    if not LONG:
        skip("about 11 s: run with --long (make fault)")
    c = cluster()
    tmp = tmpdir()
    df = drill_file(c, os.path.join(tmp, "drill.ini"))
    out_dir = os.path.join(tmp, "out")
    rc, out, err = sluicectl("drill", "run", "txn-leader-loss", "-f", df, "--seconds", "4", "--out", out_dir,
                             "--json")
    assert rc == 0, "exit %d\n%s\n%s" % (rc, out, err)
    r = json.loads(out)
    assert r["held"] and r["lost"] == 0 and r["victim"].startswith("node "), r
    assert r["transactions_committed"] > 0 and r["copier_commits"] > 0, r
    # the evidence: both producers, the copier, both readers and the
    # final reads of both topics, and the kill and start
    h = histories(out_dir)
    for name in ("txn-x1", "txn-x2", "txn-copier", "txn-rc1", "txn-ru1", "final-rc", "final-ru", "drill"):
        assert name + ".jsonl" in h, sorted(h)
    assert [e["detail"]["action"] for e in h["drill.jsonl"] if e["type"] == "nemesis"] == ["kill", "start"]
    assert any(e["type"] == "read" and e["topic"].endswith("-out") for e in h["final-rc.jsonl"])
    until("the drill's topics deleted", lambda: drill_topics(c) == [])
    print("  %d transactions committed, %d aborted, copier %d; first commit %.1f s after the heal" % (
        r["transactions_committed"], r["transactions_aborted"], r["copier_commits"], r["first_commit_after_heal_s"]))


@test
def consumer_crash_after_commit_resumes_at_the_committed_offset():
    c = cluster()
    tmp = tmpdir()
    df = drill_file(c, os.path.join(tmp, "drill.ini"))
    out_dir = os.path.join(tmp, "out")
    rc, out, err = sluicectl("drill", "run", "consumer-crash-after-commit", "-f", df, "--seconds", "4",
                             "--out", out_dir, "--json")
    assert rc == 0, "exit %d\n%s\n%s" % (rc, out, err)
    r = json.loads(out)
    assert r["held"] and r["lost"] == 0 and r["crashed_after_commit"], r
    # from the evidence: c1's last commit is where c2 starts, per partition
    h = histories(out_dir)
    last = {}
    for e in h["c1.jsonl"]:
        if e["type"] == "commit" and e["ok"]:
            last.update({p: o for _, p, o in e["partitions"]})
    first = {}
    for e in h["c2.jsonl"]:
        if e["type"] == "read":
            first.setdefault(e["partition"], e["offset"])
    assert last and all(first.get(p, o) == o for p, o in last.items()), (last, first)
    until("the drill's topics deleted", lambda: drill_topics(c) == [])


@test
def a_broken_promise_fails_the_drill_and_names_the_lost_records():
    c = cluster()
    tmp = tmpdir()
    # the killed node comes back without its drill topic's data (a lost disk)
    df = drill_file(c, os.path.join(tmp, "drill.ini"), start="rm -rf %s/n{node}/data/sluice-drill-* && "
                    "%s restart {node} --dir %s" % (c.dir, CLUSTER, c.dir))
    rc, out, err = sluicectl("drill", "run", "leader-loss", "-f", df, "--seconds", "4", "-r", "1",
                             "-c", "min.insync.replicas=1", "-c", "unclean.leader.election.enable=true",
                             "--out", os.path.join(tmp, "out"))
    assert rc == 1, "exit %d (want 1: records lost)\n%s\n%s" % (rc, out, err)
    assert "PROMISE BROKEN" in out and "lost (first)" in out, out
    lost = [l for l in out.splitlines() if l.startswith("acknowledged records lost")]
    assert lost and int(lost[0].split()[3]) > 0, out
    print("  " + lost[0])


@test
def ctrl_c_mid_fault_heals_the_node_and_deletes_the_topics():
    c = cluster()
    tmp = tmpdir()
    df = drill_file(c, os.path.join(tmp, "drill.ini"))
    # the pause takes a second and its work outlives its shell (a remote
    # command that goes on when the local ssh is killed), then says so
    done = os.path.join(tmp, "paused")
    with open(df) as f:
        text = f.read()
    text = text.replace("pause = kill -STOP $(cat %s/n{node}/pid)" % c.dir,
                        "pause = (sleep 1; kill -STOP $(cat %s/n{node}/pid); touch %s) & wait" % (c.dir, done))
    assert done in text
    with open(df, "w") as f:
        f.write(text)
    p = subprocess.Popen([SLUICECTL, "drill", "run", "lost-produce-response", "-f", df, "--seconds", "30",
                          "--out", os.path.join(tmp, "out")], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    err = b""
    try:
        while b"pause:" not in err:          # the leader is paused (the line follows the command)
            line = p.stderr.readline()
            assert line, "the drill ended before its fault: %s" % err.decode()
            err += line
        p.send_signal(signal.SIGINT)
        out, rest = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    err = (err + rest).decode()
    assert p.returncode == 2 and "resume:" in err and "no verdict" in err, (p.returncode, out, err)
    until("the pause's own work done", lambda: os.path.exists(done))
    for n in (1, 2, 3):
        with open("/proc/%d/stat" % c.pid(n)) as f:
            assert f.read().rsplit(")", 1)[1].split()[0] != "T", "node %d left paused:\n%s" % (n, err)
    until("the drill's topic deleted", lambda: drill_topics(c) == [])


@test
def a_bad_drill_file_exits_2_naming_the_line_and_key():
    tmp = tmpdir()
    bad = os.path.join(tmp, "bad.ini")
    with open(bad, "w") as f:
        f.write("[all]\nkill = ssh {host} systemctl kill -s KILL sluiced\n\n[node 1]\nkafka = n1:9092\n"
                "kil = oops\n")
    rc, out, err = sluicectl("drill", "check-file", bad)
    assert rc == 2 and "%s:6: key 'kil'" % bad in err, (rc, out, err)
    with open(bad, "w") as f:
        f.write("[node 1]\nkafka = n1:9092\nstart = ssh {hots} systemctl start sluiced\n")
    rc, out, err = sluicectl("drill", "run", "leader-loss", "-f", bad)
    assert rc == 2 and "%s:3: key 'start'" % bad in err and "{hots}" in err, (rc, out, err)
    with open(bad, "w") as f:
        f.write("[node 1]\nkafka = n1\n")
    rc, out, err = sluicectl("drill", "check-file", bad)
    assert rc == 2 and "%s:2: key 'kafka'" % bad in err, (rc, out, err)
    rc, out, err = sluicectl("drill", "run", "no-such-drill", "-f", bad)
    assert rc == 2 and "no drill 'no-such-drill'" in err, (rc, out, err)
    rc, out, err = sluicectl("drill", "list")
    assert rc == 0 and "poison-pill" in out and "hot-key" in out, (rc, out, err)


@test
def a_cluster_with_topics_the_drill_did_not_create_is_refused():
    c = cluster()
    tmp = tmpdir()
    df = drill_file(c, os.path.join(tmp, "drill.ini"))
    from confluent_kafka.admin import AdminClient
    create_topic(c.bootstrap, "orders", 1, 3)
    # every node knows the topic before the drill asks any of them
    for n in (1, 2, 3):
        until("node %d lists orders" % n, lambda: "orders" in AdminClient(
            {"bootstrap.servers": c.addr(n)}).list_topics(timeout=10).topics)
    try:
        rc, out, err = sluicectl("drill", "run", "leader-loss", "-f", df, "--seconds", "5", "--out",
                                 os.path.join(tmp, "out"))
        assert rc == 2 and "refusing to run" in err and "orders" in err and "--allow-existing-topics" in err, \
            (rc, out, err)
        assert drill_topics(c) == []    # none was created
        status = subprocess.run([CLUSTER, "status", "--dir", c.dir], stdout=subprocess.PIPE).stdout.decode()
        assert status.count("running") == 3, "a refused drill touched a node:\n" + status
    finally:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.delete_topics(["orders"])["orders"].result(60)


if __name__ == "__main__":
    main("test_drill")
