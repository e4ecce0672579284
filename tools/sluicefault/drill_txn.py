"""sluicefault.drill_txn - the transactional drill of `sluicectl drill`
(docs/drills.md, txn-leader-loss): the fault runner's txn workload
(sluicefault.workload: transactional producers, a consume-transform-produce
copier, a read_committed and a read_uncommitted reader) against the drill's
own topics while the leader of one of its partitions is SIGKILLed and
started again through the drill file's kill and start; then every
partition of both topics read back (sluicefault.workload.final_read) and
the histories checked (sluicefault.checker): nothing committed lost or
duplicated, nothing aborted visible to read_committed, no committed
transaction seen in part, every copied record's copy matching its input.

The drill (sluicefault.drill.Drill) made the topics (T and T-out) and
deletes them; this module runs the clients, the fault and the verdict.
Only the stdlib and confluent_kafka; /usr/bin/python3.
"""

import os
import sys
import threading
import time

# Anomalies that break the transactional drill's promise: the others'
# (drill.BROKEN_IF) and the transactions' own.
TXN_BROKEN_IF = ("lost", "duplicated", "reordered", "unexpected", "divergent", "aborted_visible", "partial_txn",
                 "premature_read", "copy_mismatch", "cycles")


def run(d, say):
    """Drill d's txn-leader-loss: the report's dict."""
    from sluicefault import workload
    from sluicefault.drill import ANOMALIES, check, final_read, read_jsonl
    a, sc = d.args, d.sc
    crashed = []

    def served():
        """Healed, and both a producer and the copier committed since."""
        if d.t_heal is None:
            return False
        heal_ns = int(d.t_heal * 1e9)
        who = set()
        for name in ("txn-x1", "txn-x2", "txn-copier"):
            for r in read_jsonl(os.path.join(d.out, name + ".jsonl")):
                if r.get("type") == "txn_commit" and r.get("ok") and r["t"] > heal_ns:
                    who.add("copier" if name == "txn-copier" else "producer")
                    break
        return who == {"copier", "producer"}

    def clients():
        # past --seconds until served again after the heal, within the budget
        try:
            workload.run("txn", d.bootstrap, d.topic, a.seconds, d.out, d.seed, clients=2,
                         partitions=a.partitions, replication=d.rf, rate=max(5, int(a.rate)), flush_s=30,
                         until=served, until_s=a.budget)
        except Exception as e:  # noqa: BLE001 - reported as a broken promise
            crashed.append("%s: %s" % (type(e).__name__, e))

    t0 = time.monotonic()
    th = threading.Thread(target=clients, daemon=True)
    th.start()
    time.sleep(a.seconds * 0.25)
    d.t_fault = time.monotonic()
    node, desc = d.victim()
    d.victim_desc = "node %d (%s)" % (node, desc)
    d.active_heal = (node, sc.heal)
    d.command(node, sc.fault)
    time.sleep(max(0.0, d.t_fault + a.seconds * 0.35 - time.monotonic()))
    d.command(node, sc.heal)     # a failure here is retried once by cleanup()
    d.active_heal = None
    d.t_heal = time.monotonic()
    d.nemesis.flush()
    # the clients stop at --seconds once served again (at most the
    # budget later) and flush within 30 s
    th.join(max(0.0, t0 + a.seconds - time.monotonic()) + a.budget + 60)
    if th.is_alive():
        crashed.append("the clients were still busy %g s after --seconds" % (a.budget + 60))
    final_read(d.bootstrap, [d.topic, d.topic + "-out"], d.out)
    paths = d.histories()
    result = check(paths)
    broken = ["%s: %d" % (k, result[k]) for k in TXN_BROKEN_IF if result.get(k)]
    broken += ["the transactional clients failed: %s" % c for c in crashed]
    commits, aborts, failed, errors = [], 0, 0, {}
    heal_ns = int(d.t_heal * 1e9)
    for p in paths:
        for r in read_jsonl(p):
            t = r.get("type")
            if t == "txn_commit":
                if r.get("ok"):
                    commits.append((r["t"], r.get("client")))
                else:
                    failed += 1
            elif t == "txn_abort" and r.get("ok"):
                aborts += 1
            if t in ("fail", "error") or (t in ("txn_commit", "txn_abort") and not r.get("ok")):
                k = r.get("error") or "unknown"
                errors[k] = errors.get(k, 0) + 1
    commits.sort()
    producers = [c for _, c in commits if c and c.startswith("txn-x")]
    after = [t for t, c in commits if t > heal_ns and c and c.startswith("txn-x")]
    converged = round((after[0] - heal_ns) / 1e9, 2) if after else None
    if converged is None:
        broken.append("no transaction committed after the heal")
    elif converged > a.budget:
        broken.append("the first commit after the heal took %.1f s (budget %g s)" % (converged, a.budget))
    if not any(c == "txn-copier" for _, c in commits):
        broken.append("the copier committed no transaction")
    gaps = [0.0] + [(b - a_) / 1e9 for (a_, _), (b, _) in zip(commits, commits[1:])]
    return {
        "scenario": sc.name, "seed": d.seed, "topic": d.topic, "histories": d.out, "victim": d.victim_desc,
        "replication_factor": d.rf, "topic_config": d.topic_conf, "held": not broken, "broken": broken,
        "sent": result.get("sent"), "acked": result.get("acked"), "read": result.get("read"),
        "lost": result.get("lost", 0), "duplicated": result.get("duplicated", 0),
        "anomalies": {k: result.get(k, 0) for k in ANOMALIES}, "details": result.get("details", {}),
        "transactions_committed": len(producers), "copier_commits": sum(1 for _, c in commits if c == "txn-copier"),
        "transactions_aborted": aborts, "commits_failed": failed, "errors": errors,
        "longest_without_a_commit_s": round(max(gaps), 3), "first_commit_after_heal_s": converged,
        "budget_s": a.budget,
    }


def print_report(r):
    w = sys.stdout.write
    w("drill %s (seed %d) against topics %s and %s-out: %s\n" % (
        r["scenario"], r["seed"], r["topic"], r["topic"], "PROMISES HELD" if r["held"] else "PROMISE BROKEN"))
    if r["victim"]:
        w("fault on: %s\n" % r["victim"])
    w("topics: replication factor %d, %s\n" % (r["replication_factor"], ", ".join(
        "%s=%s" % kv for kv in sorted(r["topic_config"].items())) or "the broker's defaults"))
    w("\n%-48s %12s %12s\n" % ("", "seen", "promise"))
    an = r["anomalies"]
    rows = [
        ("records sent / acknowledged / read", "%s/%s/%s" % (r["sent"], r["acked"], r["read"]), ""),
        ("committed records lost", r["lost"], "0"),
        ("records duplicated in the log", r["duplicated"], "0"),
        ("aborted records read_committed saw", an.get("aborted_visible", 0), "0"),
        ("committed transactions seen in part", an.get("partial_txn", 0), "0"),
        ("open transactions read_committed saw", an.get("premature_read", 0), "0"),
        ("copies not matching their input", an.get("copy_mismatch", 0), "0"),
        ("transactions that read each other's (wr cycles)", an.get("cycles", 0), "0"),
        ("transactions committed / aborted", "%d/%d" % (r["transactions_committed"], r["transactions_aborted"]),
         "reported"),
        ("copier transactions committed", r["copier_commits"], "> 0"),
        ("commits or aborts that failed", r["commits_failed"], "reported"),
        ("longest without a commit (s)", r["longest_without_a_commit_s"], "reported"),
        ("first commit after the heal (s)", r["first_commit_after_heal_s"] if r["first_commit_after_heal_s"]
         is not None else "none", "<= %g" % r["budget_s"]),
    ]
    for k, v, p in rows:
        w("%-48s %12s %12s\n" % (k, v, p))
    if r["errors"]:
        w("\nerrors the clients saw, by kind:\n")
        for k, v in sorted(r["errors"].items(), key=lambda kv: -kv[1]):
            w("  %-40s %d\n" % (k, v))
    lost = r["details"].get("lost") if isinstance(r["details"], dict) else None
    if lost:
        w("\nlost (first): %s\n" % str(lost)[:800])
    if r["broken"]:
        w("\nbroken:\n")
        for b in r["broken"]:
            w("  %s\n" % b)
    w("\nevidence (every client's history, JSONL): %s\n" % os.path.abspath(r["histories"]))
