"""The checker: reads the histories of a run (sluicefault.history) and counts
each anomaly; docs/fault-testing.md ("The checker") defines every one.

    /usr/bin/python3 -m sluicefault.checker DIR_OR_FILES... [--json]

prints a table (anomaly, count, first examples) and the summary figures,
and exits 1 when any anomaly was found. check(paths) returns the same as a
dict: an integer count per anomaly (ANOMALIES), "details" (the first
examples of each), the count of "client-stale-reset" (STALE_RESET: the
backward jumps the history shows to be librdkafka's stale offset reset,
not counted as nonmonotonic and no anomaly; its examples are in
"details" too), the count of "client-epoch-bump" (EPOCH_BUMP: records
at two offsets whose batch headers, the "batch" lines of the final log,
show the client sent them again under a new producer epoch; not counted as
duplicated), and the figures sent, acked, read (reads by the run's
readers), read_final, longest_unavailable_s, recovery_s, cycle_kinds (the
dependency cycles that take ww edges, sluicefault.cycles) and cycle_graph.

What is never judged, so that a correct cluster reports nothing: a record
whose send failed indefinitely (a timeout; it may or may not be in the log)
is neither lost nor unexpected; the records of a transaction whose outcome
the client does not know; a record past the end of the final read of its
partition and isolation. Without a final read (no "final" lines) the
checks that need the final log (lost, reordered, skipped, partial_txn, the
copier's exactly-once) judge nothing.
"""

import argparse
import bisect
import json
import sys
from collections import defaultdict

from . import cycles
from .history import read

ANOMALIES = ("lost", "duplicated", "reordered", "unexpected", "divergent", "nonmonotonic", "skipped",
             "stale_commit", "commit_backwards", "aborted_visible", "partial_txn", "premature_read",
             "copy_mismatch", "cycles")
# a nonmonotonic read the history shows to be librdkafka's stale offset
# reset (_StaleReset): counted beside the anomalies, not among them
STALE_RESET = "client-stale-reset"
# a duplicated record the final log's batch headers show the client sent
# again under a new epoch of its producer id (librdkafka's epoch bump,
# _epoch_bump): counted beside the anomalies, not among them
EPOCH_BUMP = "client-epoch-bump"
EXAMPLES = 10
FINAL_READERS = ("final-rc", "final-ru")
RC, RU = "read_committed", "read_uncommitted"


def _seq(value):
    """The seq of a value "<client>-<seq>", or None."""
    head, _, tail = value.rpartition("-")
    return int(tail) if head and tail.isdigit() else None


class _Report:
    def __init__(self):
        self.counts = {a: 0 for a in ANOMALIES + (STALE_RESET, EPOCH_BUMP)}
        self.details = {a: [] for a in ANOMALIES + (STALE_RESET, EPOCH_BUMP)}

    def add(self, anomaly, n=1, **example):
        self.counts[anomaly] += n
        if len(self.details[anomaly]) < EXAMPLES:
            self.details[anomaly].append(example)


def check(paths):
    """Check the histories under paths (files or directories of *.jsonl)."""
    return check_lines(read(paths))


def check_lines(lines):
    """Check a merged history (a list of line dicts ordered by "t")."""
    r = _Report()
    sends, acks, fails = {}, {}, defaultdict(list)
    txn_state = {}                       # txn -> "committed" | "aborted" (absent: unknown)
    copier_offsets = {}                  # (topic, partition) -> highest offset committed by a copier txn
    txn_offsets = {}                     # txn -> its txn_commit "offsets" (a copier's)
    copier_commits = {}                  # txn -> (t, offsets) of its first txn_commit line, ok or not
    reads = []                           # the run's readers' reads
    final = {RC: {}, RU: {}}             # isolation -> {(topic, partition, offset): value}
    final_key = {RC: {}, RU: {}}
    final_end = {RC: {}, RU: {}}         # isolation -> {(topic, partition): end_offset}
    headers = defaultdict(list)          # (topic, partition) -> [(base, last, producer id, epoch)]
    for x in lines:
        ty = x.get("type")
        if ty == "batch":
            headers[(x["topic"], x["partition"])].append((x["base"], x["last"], x["producer_id"],
                                                          x["producer_epoch"]))
        elif ty == "send":
            sends[x["value"]] = x
        elif ty == "ack":
            acks[x["value"]] = x
        elif ty == "fail":
            fails[x["value"]].append(x)
        elif ty == "txn_commit" and x.get("ok"):
            txn_state[x["txn"]] = "committed"
            if x.get("offsets"):
                txn_offsets[x["txn"]] = x["offsets"]
        if ty == "txn_commit" and x.get("offsets") is not None and x["txn"] not in copier_commits:
            copier_commits[x["txn"]] = (x["t"], x["offsets"])
        elif ty == "txn_abort" and x.get("ok") and txn_state.get(x["txn"]) != "committed":
            txn_state[x["txn"]] = "aborted"
        elif ty == "read":
            if x.get("reader") in FINAL_READERS:
                iso = x.get("isolation", RU)
                final[iso][(x["topic"], x["partition"], x["offset"])] = x["value"]
                final_key[iso][(x["topic"], x["partition"], x["offset"])] = x.get("key")
            reads.append(x)
        elif ty == "final":
            final_end[x.get("isolation", RU)][(x["topic"], x["partition"])] = x["end_offset"]
    for txn, offs in txn_offsets.items():
        for t, p, o in offs:
            copier_offsets[(t, p)] = max(copier_offsets.get((t, p), 0), o)

    def outcome(value):
        txn = sends[value].get("txn") if value in sends else None
        return "plain" if txn is None else txn_state.get(txn, "unknown")

    # where each value is in the final logs
    where = {RC: defaultdict(list), RU: defaultdict(list)}
    for iso in (RC, RU):
        for (t, p, o), v in final[iso].items():
            where[iso][v].append((t, p, o))

    # lost: acknowledged (and not in a transaction of unknown outcome) but
    # not in the final read_uncommitted log; a committed transaction's
    # record not in the final read_committed log (below its end)
    for v, a in acks.items():
        st = outcome(v)
        if st == "unknown":
            continue
        tp = (a["topic"], a["partition"])
        if tp in final_end[RU] and not where[RU].get(v):
            r.add("lost", value=v, topic=a["topic"], partition=a["partition"], offset=a["offset"],
                  isolation=RU)
        elif st == "committed" and tp in final_end[RC] and a["offset"] < final_end[RC][tp] \
                and not where[RC].get(v):
            r.add("lost", value=v, topic=a["topic"], partition=a["partition"], offset=a["offset"],
                  isolation=RC)

    # duplicated: one value at two or more offsets, in any reads
    seen_at = defaultdict(set)
    for x in reads:
        seen_at[x["value"]].add((x["topic"], x["partition"], x["offset"]))
    producer_of = _producer_of(headers)
    for v, at in seen_at.items():
        if len(at) > 1:
            bump = _epoch_bump(v, sorted(at), acks.get(v), producer_of)
            if bump:
                r.add(EPOCH_BUMP, **bump)
            else:
                r.add("duplicated", value=v, offsets=sorted(at)[:5])

    # reordered: per producer client and partition, acknowledged values with
    # increasing seq at decreasing offsets of the final read_uncommitted log
    per = defaultdict(list)
    for v, a in acks.items():
        s = sends.get(v)
        locs = where[RU].get(v)
        if s is None or not locs or _seq(v) is None:
            continue
        t, p, o = min(locs)
        per[(s["client"], t, p)].append((_seq(v), o, v))
    out_of_order = set()
    for (client, t, p), vs in per.items():
        vs.sort()
        top = None
        for seq, o, v in vs:
            if top is not None and o < top[1]:
                out_of_order.add(v)
                r.add("reordered", client=client, topic=t, partition=p, value=v, offset=o,
                      after=top[2], after_offset=top[1])
            if top is None or o > top[1]:
                top = (seq, o, v)
    # and per key, for a key that one producer client alone sent, always to
    # the partitioner's choice (Kafka's promise per key; a key several
    # producers send has no order across them, one sent to chosen
    # partitions none across them): in send order, its acknowledged
    # records are in one partition at increasing offsets of the final
    # read_uncommitted log. A value counts once, even when out of order
    # both ways.
    key_clients = defaultdict(set)
    for v, s in sends.items():
        if s.get("key") is not None:
            key_clients[(s["topic"], s["key"])].add(s["client"] if s.get("partition") is None else None)
    single = {k for k, cs in key_clients.items() if len(cs) == 1 and None not in cs}
    per_key = defaultdict(list)
    for v, a in acks.items():
        s = sends.get(v)
        locs = where[RU].get(v)
        if s is None or not locs or _seq(v) is None or (s["topic"], s.get("key")) not in single:
            continue
        per_key[(s["topic"], s["key"])].append((_seq(v), min(locs), v))
    for (topic, key), vs in per_key.items():
        vs.sort()
        first, top = None, None
        for seq, (t, p, o), v in vs:
            if first is None:
                first, top = (p, o, v), (o, v)
                continue
            if p != first[0]:
                why = "key %s in partition %d after partition %d (%s)" % (key, p, first[0], first[2])
            elif o < top[0]:
                why = "key %s at offset %d after %s at %d" % (key, o, top[1], top[0])
            else:
                top = (o, v)
                continue
            if v not in out_of_order:
                out_of_order.add(v)
                r.add("reordered", key=key, topic=t, partition=p, value=v, offset=o, why=why)

    # unexpected: a value read that nobody sent, or whose send failed
    # definitely (it was certainly never written)
    for v in seen_at:
        if v not in sends:
            r.add("unexpected", value=v, why="never sent")
        elif any(f.get("definite") for f in fails.get(v, ())):
            r.add("unexpected", value=v, why="its send failed definitely")

    # divergent: one offset read with two different values
    at_offset = defaultdict(set)
    for x in reads:
        at_offset[(x["topic"], x["partition"], x["offset"])].add(x["value"])
    for k, vs in sorted(at_offset.items()):
        if len(vs) > 1:
            r.add("divergent", topic=k[0], partition=k[1], offset=k[2], values=sorted(vs)[:5])

    # nonmonotonic and skipped: within one reader session and partition
    logs = {RC: defaultdict(list), RU: defaultdict(list)}
    for iso in (RC, RU):
        for (t, p, o) in sorted(final[iso]):
            logs[iso][(t, p)].append(o)
    sessions = defaultdict(list)
    for x in reads:
        sessions[(x["reader"], x.get("session"), x["topic"], x["partition"], x.get("isolation", RU))].append(x)
    stale = _StaleReset(lines, reads)
    stale_jumps = []                     # the evidence of each client-stale-reset
    # an assignment that says where the member starts (an "assign" line's
    # "start": [[topic, partition, offset]], the committed offset it
    # fetched): its first read of the partition after it is the start, or
    # the first record of the log at or past it
    starts = defaultdict(list)           # (client, session, topic, partition) -> [(t, offset)]
    read_by = defaultdict(dict)          # (reader, topic, partition) -> {offset: t of its first read}
    for x in reads:
        read_by[(x["reader"], x["topic"], x["partition"])].setdefault(x["offset"], x["t"])
    for x in lines:
        if x.get("type") == "assign":
            for t, p, o in x.get("start") or ():
                starts[(x.get("client"), x.get("session"), t, p)].append((x["t"], o))
    for (reader, session, t, p, iso), rs in sessions.items():
        log = logs[iso].get((t, p), [])
        offs = [x["offset"] for x in rs]
        for ta, a in starts.get((reader, session, t, p), ()):
            b = next((x["offset"] for x in rs if x["t"] > ta), None)
            if b is not None and b > a and log:
                i, j = bisect.bisect_left(log, a), bisect.bisect_left(log, b)
                # not those the member read itself before (in an earlier
                # assignment: its client went on from its own position)
                mine = read_by.get((reader, t, p), {})
                gap = [o for o in log[i:j] if not (o in mine and mine[o] < ta)]
                if gap:
                    r.add("skipped", n=len(gap), reader=reader, session=session, topic=t, partition=p,
                          offsets=gap[:5], between=[a, b], why="from the assignment's start")
        first_back = True
        for k, (a, b) in enumerate(zip(offs, offs[1:])):
            if b <= a:
                ev = stale.evidence(rs, k + 1) if first_back else None
                first_back = False
                if ev is not None:
                    r.add(STALE_RESET, **ev)
                    stale_jumps.append(ev)
                else:
                    r.add("nonmonotonic", reader=reader, session=session, topic=t, partition=p, offset=b, after=a)
            elif b > a + 1 and log:
                i, j = bisect.bisect_right(log, a), bisect.bisect_left(log, b)
                if j > i:
                    r.add("skipped", n=j - i, reader=reader, session=session, topic=t, partition=p,
                          offsets=log[i:j][:5], between=[a, b])

    _commits(lines, r, stale_jumps)

    # aborted_visible: a record of an aborted transaction read
    # read_committed; and (an intermediate read) one of a transaction of
    # unknown outcome that the final read_committed log shows did not
    # commit: the record is below its partition's read_committed end but
    # not in that log (the broker aborted it: a timeout, a fencing), or at
    # or past the end (the transaction was still open at the final read)
    txn_last_send = {}
    for v, s in sends.items():
        if s.get("txn"):
            txn_last_send[s["txn"]] = max(txn_last_send.get(s["txn"], 0), s["t"])
    for x in reads:
        if x.get("isolation") != RC or x["value"] not in sends:
            continue
        st = outcome(x["value"])
        tp = (x["topic"], x["partition"])
        why = None
        if st == "aborted":
            why = "aborted"
        elif st == "unknown" and tp in final_end[RC]:
            if x["offset"] >= final_end[RC][tp]:
                why = "transaction still open at the final read"
            elif not where[RC].get(x["value"]):
                why = "transaction of unknown outcome not committed"
        if why is not None:
            r.add("aborted_visible", value=x["value"], reader=x["reader"], topic=x["topic"],
                  partition=x["partition"], offset=x["offset"], why=why)
        elif st != "plain" and x["t"] < txn_last_send[sends[x["value"]]["txn"]]:
            # premature_read: read read_committed before its transaction's
            # last record was handed to the client library, so before its
            # commit could have been asked for
            r.add("premature_read", value=x["value"], reader=x["reader"], topic=x["topic"],
                  partition=x["partition"], offset=x["offset"], txn=sends[x["value"]]["txn"])

    # partial_txn: a committed transaction with some records in the final
    # read_committed log and some not (those below the partition's end)
    by_txn = defaultdict(list)
    for v, s in sends.items():
        if s.get("txn") and txn_state.get(s["txn"]) == "committed" and v in acks:
            a = acks[v]
            tp = (a["topic"], a["partition"])
            if tp in final_end[RC] and a["offset"] < final_end[RC][tp]:
                by_txn[s["txn"]].append((v, bool(where[RC].get(v))))
    for txn, vs in by_txn.items():
        if any(ok for _, ok in vs) and not all(ok for _, ok in vs):
            r.add("partial_txn", txn=txn, visible=[v for v, ok in vs if ok][:5],
                  missing=[v for v, ok in vs if not ok][:5])

    # the copier: every committed input record below the offsets its
    # committed transactions consumed to is copied exactly once (a copy's
    # key is its input value) in the final read_committed log
    copies = defaultdict(list)
    for (t, p, o), key in final_key[RC].items():
        v = final[RC][(t, p, o)]
        s = sends.get(v)
        if s is not None and s.get("src") is not None:
            copies[s["src"]].append((t, p, o))
    if copier_offsets:
        for (t, p, o), v in final[RC].items():
            if (t, p) in copier_offsets and o < copier_offsets[(t, p)]:
                n = len(copies.get(v, ()))
                if n == 0:
                    r.add("lost", value=v, topic=t, partition=p, offset=o, why="input never copied")
                elif n > 1:
                    r.add("duplicated", value=v, copies=sorted(copies[v])[:5], why="input copied %d times" % n)

    # copy_mismatch: each committed copier transaction consumed the input
    # records from the previous committed copier transaction's offsets (or
    # the log start) to its own; the one copy of such a record in the final
    # read_committed logs must be one that transaction sent. A copier
    # transaction of unknown outcome counts as committed when any of its
    # records is in the final read_committed log. (No copy or two copies:
    # lost or duplicated, above.)
    txn_copied = defaultdict(bool)
    for v, locs in where[RC].items():
        s = sends.get(v)
        if s is not None and s.get("txn") and locs:
            txn_copied[s["txn"]] = True
    consumed_by = {}                     # (topic, partition) -> [(from, to, txn)]
    prev = {}
    for t_line, txn, offs in sorted((tl, txn, offs) for txn, (tl, offs) in copier_commits.items()
                                    if txn_state.get(txn) == "committed"
                                    or (txn not in txn_state and txn_copied[txn])):
        for t, p, o in offs:
            lo = prev.get((t, p), 0)
            if o > lo:
                consumed_by.setdefault((t, p), []).append((lo, o, txn))
                prev[(t, p)] = o
    for (t, p, o), v in sorted(final[RC].items()):
        for lo, hi, txn in consumed_by.get((t, p), ()):
            if lo <= o < hi:
                cs = copies.get(v, ())
                if len(cs) == 1:
                    ctxn = sends[final[RC][cs[0]]].get("txn")
                    if ctxn != txn:
                        r.add("copy_mismatch", value=v, topic=t, partition=p, offset=o, consumed_in=txn,
                              copied_in=ctxn, copy=list(cs[0]))
                break

    # cycles: dependency cycles between committed transactions (ww, wr,
    # rw as in Jepsen's Kafka workload): a cycle of wr edges alone counts;
    # G0, G1c, G-single and G2 (with ww edges) are figures, Kafka allows
    # them (docs/fault-testing.md, "Dependency cycles")
    committed = {t for t, st in txn_state.items() if st == "committed"} | \
        {t for t, ok in txn_copied.items() if ok and t not in txn_state}
    cyc = cycles.find(lines, committed, examples=EXAMPLES)
    for ex in cyc["examples"].get("wr_cycles", []):
        r.details["cycles"].append(dict(ex, kind="wr"))
    r.counts["cycles"] = cyc["wr_cycles"]
    for kind in cycles.KINDS:
        for ex in cyc["examples"].get(kind, [])[:1]:
            r.details["cycles"].append(dict(ex, kind=kind))

    out = dict(r.counts)
    out["cycle_kinds"] = {k: cyc[k] for k in cycles.KINDS}
    out["cycle_graph"] = {"txns": cyc["txns"], "edges": cyc["edges"]}
    out["details"] = {a: d for a, d in r.details.items() if d}
    out["sent"] = len(sends)
    out["acked"] = len(acks)
    out["read"] = sum(1 for x in reads if x.get("reader") not in FINAL_READERS)
    out["read_final"] = len(reads) - out["read"]
    out["longest_unavailable_s"], out["unavailable_client"] = _unavailability(lines)
    out["recovery_s"] = _recovery(lines)
    out["final_read"] = bool(final_end[RU] or final_end[RC])
    return out


class _StaleReset:
    """Tells librdkafka 2.0.2's stale offset reset from other nonmonotonic
    reads (docs/fault-testing.md, "The checker"; docs/fault-results.md,
    group/loss/5n). A group member whose lookup of the earliest offset (no
    offset committed) is answered after it lost that assignment has its
    client look the earliest offset up again 500 ms later; when the member
    is given the partition again in between, at a committed offset, that
    lookup moves the new assignment's fetch position back to the log start.
    evidence() says whether a backward jump has every mark of that, and
    returns them; anything short of all of them is a nonmonotonic read."""

    def __init__(self, lines, reads):
        self.reads = reads
        self.assigns = defaultdict(list)     # client -> its group assign lines (not a copier's rewinds)
        self.revokes = defaultdict(list)     # client -> its revoke lines
        self.group_assigns = defaultdict(list)   # (group, topic, partition) -> [(t, client)]
        self.commits = defaultdict(list)     # (group, topic, partition) -> [(t0, t, offset)] of ok commits
        for x in lines:
            ty, client = x.get("type"), x.get("client")
            if ty == "assign" and x.get("generation") is not None and not x.get("rewind"):
                self.assigns[client].append(x)
                for t, p in x["partitions"]:
                    self.group_assigns[(x.get("group"), t, p)].append((x["t"], client))
            elif ty == "revoke":
                self.revokes[client].append(x)
            elif ty == "commit" and x.get("ok"):
                for t, p, o in x["partitions"]:
                    self.commits[(x.get("group"), t, p)].append((x.get("t0", x["t"]), x["t"], o))
        self._earliest = self._at = self._sessions = None
        self.t0 = lines[0]["t"] if lines else 0

    def earliest(self, tp):
        """The lowest offset any reader read of the partition (the final
        readers read from its log start)."""
        if self._earliest is None:
            self._earliest = {}
            for x in self.reads:
                k = (x["topic"], x["partition"])
                self._earliest[k] = min(self._earliest.get(k, x["offset"]), x["offset"])
        return self._earliest.get(tp)

    def read_in(self, client, session, t, p):
        """Whether the client read the partition in that session."""
        if self._sessions is None:
            self._sessions = {(x["client"], x.get("session"), x["topic"], x["partition"]) for x in self.reads}
        return (client, session, t, p) in self._sessions

    def read_at(self, t, p, o):
        """Every read of (t, p, o), in history order."""
        if self._at is None:
            self._at = defaultdict(list)
            for x in self.reads:
                self._at[(x["topic"], x["partition"], x["offset"])].append(x)
        return self._at.get((t, p, o), ())

    def evidence(self, rs, j):
        """rs: one session's reads of one partition, in order; rs[j] the
        first read below its predecessor. The evidence dict, or None."""
        jump, prev = rs[j], rs[j - 1]
        client, session, t, p = jump["client"], jump.get("session"), jump["topic"], jump["partition"]
        a, b = prev["offset"], jump["offset"]
        # the assignment the session is: a group's, of this partition, by
        # a consumer whose auto.offset.reset is earliest
        mine = [x for x in self.assigns.get(client, ()) if x.get("session") == session and [t, p] in x["partitions"]]
        if len(mine) != 1 or mine[0].get("auto_offset_reset") != "earliest" or mine[0].get("consumer") is None:
            return None
        asg = mine[0]
        group = asg.get("group")
        if any([t, p] in x["partitions"] and asg["t"] < x["t"] < jump["t"] for x in self.revokes.get(client, ())):
            return None
        # back to exactly the partition's earliest offset
        if b != self.earliest((t, p)):
            return None
        # the assignment started at the offset committed before it, above
        # the log start
        before = [(tt, o) for t0, tt, o in self.commits.get((group, t, p), ()) if tt < asg["t"]]
        committed = max(before)[1] if before else None
        if committed is None or rs[0]["offset"] != committed or committed <= b:
            return None
        # the same Consumer (so the same auto.offset.reset) had the
        # partition in its assignment before (the last one that held it),
        # read nothing of it there, and no offset was committed for it
        # until that assignment ended (its member's next assign or revoke,
        # or another member's assignment of the partition): that
        # assignment's lookup was of the earliest offset, and nothing shows
        # it was ever answered
        earlier = [x for x in self.assigns.get(client, ()) if x["t"] < asg["t"] and [t, p] in x["partitions"]]
        if not earlier:
            return None
        e = earlier[-1]
        if e.get("consumer") != asg["consumer"] or e.get("group") != group:
            return None
        if self.read_in(client, e.get("session"), t, p):
            return None
        ends = [x["t"] for x in list(self.assigns.get(client, ())) + list(self.revokes.get(client, ()))
                if x["t"] > e["t"]]
        ends += [tt for tt, c in self.group_assigns.get((group, t, p), ()) if c != client and tt > e["t"]]
        end = min(ends) if ends else asg["t"]
        if any(t0 < end for t0, tt, o in self.commits.get((group, t, p), ())):
            return None
        # every record read again after the jump is what was read at its
        # offset before: each offset from the jump's to the one it left was
        # read before, and no read before differs in value or key
        reread = 0
        for x in rs[j:]:
            earlier_reads = [y for y in self.read_at(t, p, x["offset"]) if y["t"] < x["t"]]
            if b <= x["offset"] <= a and not earlier_reads:
                return None
            if any((y["value"], y.get("key")) != (x["value"], x.get("key")) for y in earlier_reads):
                return None
            reread += b <= x["offset"] <= a
        return dict(reader=client, session=session, topic=t, partition=p, offset=b, after=a, t=jump["t"],
                    at_s=round((jump["t"] - self.t0) / 1e9, 3),
                    committed=committed, generation=asg.get("generation"), earlier_session=e.get("session"),
                    earlier_generation=e.get("generation"), reread=reread)



def _after_stale_reset(lines, jumps):
    """The function telling whether a commit (client, topic, partition,
    call time t0) was made in an assignment after librdkafka's stale reset
    moved that member's position back there: after the jump and before
    the member's next assign or revoke line."""
    ends = defaultdict(list)             # client -> [t of its assign and revoke lines]
    for x in lines:
        if x.get("type") in ("assign", "revoke"):
            ends[x.get("client")].append(x["t"])
    spans = defaultdict(list)            # (client, topic, partition) -> [(from, to)]
    for ev in jumps:
        later = [t for t in ends.get(ev["reader"], ()) if t > ev["t"]]
        spans[(ev["reader"], ev["topic"], ev["partition"])].append((ev["t"], min(later) if later else float("inf")))

    def after(client, t, p, t0):
        return any(a < t0 < b for a, b in spans.get((client, t, p), ()))
    return after


def _producer_of(headers):
    """producer_of(topic, partition, offset): (producer id, epoch) of the
    final log's batch holding the offset (the batch lines of run.py's
    final-batches, each node's copy), or None when no line covers it."""
    index = {}
    for tp, batches in headers.items():
        batches.sort()
        index[tp] = ([b[0] for b in batches], batches)

    def producer_of(t, p, o):
        bases, batches = index.get((t, p), ((), ()))
        i = bisect.bisect_right(bases, o) - 1
        while i >= 0 and batches[i][0] <= o:
            if batches[i][1] >= o:
                return batches[i][2], batches[i][3]
            i -= 1
        return None
    return producer_of


def _epoch_bump(value, at, ack, producer_of):
    """A record at several offsets that its client sent again under a new
    epoch of its producer id, as librdkafka 2.0.2's idempotent producer does
    when a request in flight timed out (it bumps the epoch and sends what it
    has no answer for with new sequences: librdkafka issue #4953): every
    copy in one partition, in batches of one producer id whose epochs grow
    with the offsets, and no copy but the last acknowledged (the broker
    cannot put a record in an epoch its client did not send it in; a copy
    it took twice would be in one epoch). The evidence, or None."""
    if len({(t, p) for t, p, _ in at}) != 1:
        return None
    heads = [producer_of(t, p, o) for t, p, o in at]
    if any(h is None or h[0] < 0 for h in heads) or len({h[0] for h in heads}) != 1:
        return None
    epochs = [h[1] for h in heads]
    if any(b <= a for a, b in zip(epochs, epochs[1:])):
        return None
    if ack is not None and (ack["topic"], ack["partition"], ack["offset"]) != at[-1]:
        return None
    return dict(value=value, offsets=at[:5], producer_id=heads[0][0], epochs=epochs[:5],
                acked=ack is not None)


def _commits(lines, r, stale_jumps=()):
    """stale_commit and commit_backwards (see docs/fault-testing.md). A
    backward commit a member made after librdkafka's stale reset moved its
    position back in that assignment (stale_jumps: the evidence of each
    client-stale-reset) is the client's: written with that evidence, not
    counted."""
    after_reset = _after_stale_reset(lines, stale_jumps)
    owned = defaultdict(dict)            # client -> {(topic, partition): assign t}
    own_gen = {}                         # client -> the generation of its last assignment
    gen_history = defaultdict(list)      # group -> [(t, generation)] of assigns
    owners = defaultdict(dict)           # (group, topic, partition) -> {client: assign t}
    ok_commits = defaultdict(list)       # (group, topic, partition) -> [(t, offset, client, t0)]
    for x in lines:
        ty = x.get("type")
        client = x.get("client")
        group = x.get("group")
        if ty == "assign" and x.get("generation") is not None:
            for t, p in x["partitions"]:
                owned[client].setdefault((t, p), x["t"])
                owners[(group, t, p)].setdefault(client, x["t"])
            if not x.get("rewind"):
                gen_history[group].append((x["t"], x["generation"]))
                own_gen[client] = x["generation"]
        elif ty == "assign":
            for t, p in x["partitions"]:
                owned[client].setdefault((t, p), x["t"])
        elif ty == "revoke":
            for t, p in x["partitions"]:
                owned[client].pop((t, p), None)
                owners[(group, t, p)].pop(client, None)
        elif ty == "commit" and x.get("ok"):
            t0 = x.get("t0", x["t"])
            gen = x.get("generation")
            # the group's current generation when the commit was called:
            # that of the last assignment any member wrote before (a
            # coordinator that lost the group may start again at 1), and
            # the member's own
            before = [g for (ta, g) in gen_history[group] if ta < t0]
            mine = own_gen.get(client)
            # (a generation below 0 is a commit outside the group's
            # generations, which a broker takes only for an empty group:
            # judged by ownership alone)
            newer = [g for g in (before[-1] if before else None, mine)
                     if g is not None and gen is not None and gen >= 0 and g > gen]
            for t, p, o in x["partitions"]:
                since = owned[client].get((t, p))
                # another member assigned the partition after this one was,
                # before the commit was called
                other = [c for c, ta in owners[(group, t, p)].items()
                         if c != client and since is not None and since < ta < t0]
                if since is None:
                    r.add("stale_commit", client=client, member=x.get("member"), topic=t, partition=p,
                          offset=o, why="partition not owned")
                elif other:
                    r.add("stale_commit", client=client, member=x.get("member"), topic=t, partition=p,
                          offset=o, why="partition assigned to %s since" % other[0])
                elif newer:
                    r.add("stale_commit", client=client, member=x.get("member"), topic=t, partition=p,
                          offset=o, why="generation %s after generation %s was assigned" % (gen, max(newer)))
                # the highest offset any member committed (acknowledged)
                # before this member was assigned the partition, and its own
                # earlier commits since then
                if since is None:         # a stale commit: judged above
                    ok_commits[(group, t, p)].append((x["t"], o, client, t0))
                    continue
                prior = [(oo, cc) for (tt, oo, cc, t0c) in ok_commits[(group, t, p)]
                         if tt < since or (cc == client and t0c >= since)]
                if prior:
                    top = max(prior)
                    if o < top[0] and after_reset(client, t, p, t0):
                        if len(r.details[STALE_RESET]) < EXAMPLES:
                            r.details[STALE_RESET].append(dict(
                                commit=o, reader=client, topic=t, partition=p, after=top[0],
                                why="a commit behind %d after the client's stale reset in this assignment"
                                    % top[0]))
                    elif o < top[0]:
                        r.add("commit_backwards", client=client, topic=t, partition=p, offset=o,
                              after=top[0], after_client=top[1])
                ok_commits[(group, t, p)].append((x["t"], o, client, t0))


def _unavailability(lines):
    """The longest time a client kept trying without a success, in seconds,
    and that client. A success is an ack, a read, an ok commit or an ok
    transaction end; an attempt is a send, a fail, an error, a commit or
    transaction end that failed, a txn_begin. Per client, the time from its
    last success (or first line) to its next success counts when an attempt
    lies between them; a client that never succeeded again counts to its
    last attempt. The final readers are left out, and so are the clients
    the workload itself paused ("pause" lines: the group's zombie)."""
    best, who = 0.0, None
    last_ok, tried = {}, set()
    paused = {x.get("target") for x in lines if x.get("type") == "pause"}
    for x in lines:
        c, ty = x.get("client"), x.get("type")
        if c is None or c in FINAL_READERS or c in paused or ty == "nemesis":
            continue
        ok = ty in ("ack", "read") or (ty in ("commit", "txn_commit", "txn_abort") and x.get("ok"))
        last_ok.setdefault(c, x["t"])
        if ok:
            gap = (x["t"] - last_ok[c]) / 1e9 if c in tried else 0.0
            tried.discard(c)
            last_ok[c] = x["t"]
        elif ty in ("send", "fail", "error", "commit", "txn_commit", "txn_abort", "txn_begin"):
            tried.add(c)
            gap = (x["t"] - last_ok[c]) / 1e9
        else:
            continue
        if gap > best:
            best, who = gap, c
    return round(best, 3), who


def _recovery(lines):
    """The longest time from a nemesis "stop" to the next ack (seconds), or
    None without nemesis lines."""
    worst = None
    pending = []
    for x in lines:
        if x.get("type") == "nemesis" and x.get("phase") == "stop":
            pending.append(x["t"])
        elif x.get("type") == "ack" and pending:
            for t in pending:
                s = (x["t"] - t) / 1e9
                worst = s if worst is None else max(worst, s)
            pending = []
    return None if worst is None else round(worst, 3)


def stale_reset_text(res, n=3):
    """The evidence of the first client-stale-reset reads (and of the
    commits behind made after one), one phrase each."""
    out = []
    for e in res["details"].get(STALE_RESET, [])[:n]:
        if "commit" in e:
            out.append("%s %s[%d] then committed %d, behind %d (not counted as commit_backwards)" % (
                e["reader"], e["topic"], e["partition"], e["commit"], e["after"]))
            continue
        out.append("%s %s[%d] %d -> %d at +%.3f s (t %d): session %s (generation %s) from committed %d, its "
                   "session %s (generation %s) read nothing with nothing committed, auto.offset.reset earliest, "
                   "%d records re-read as before" % (
                       e["reader"], e["topic"], e["partition"], e["after"], e["offset"], e["at_s"], e["t"],
                       e["session"], e["generation"], e["committed"], e["earlier_session"],
                       e["earlier_generation"], e["reread"]))
    if not out:
        return ""
    return "(the client's, not counted as nonmonotonic) " + "; ".join(out)


def epoch_bump_text(res, n=3):
    """The evidence of the first client-epoch-bump duplicates, one phrase
    each."""
    out = ["%s at %s, producer id %d epochs %s%s" % (
        e["value"], ", ".join("%s[%d]@%d" % tuple(o) for o in e["offsets"]), e["producer_id"],
        "/".join(map(str, e["epochs"])), ", the last acknowledged" if e["acked"] else ", none acknowledged")
        for e in res["details"].get(EPOCH_BUMP, [])[:n]]
    if not out:
        return ""
    return "(the client's: sent again under a new producer epoch; not counted as duplicated) " + "; ".join(out)


def table(res):
    """The report as text."""
    rows = ["%-17s %7s  %s" % ("anomaly", "count", "first examples")]
    for a in ANOMALIES:
        ex = res["details"].get(a, [])[:3]
        rows.append("%-17s %7d  %s" % (a, res[a], "; ".join(json.dumps(e, sort_keys=True) for e in ex)))
        if a == "nonmonotonic" and STALE_RESET in res:
            rows.append("%-18s %6d  %s" % (STALE_RESET, res[STALE_RESET], stale_reset_text(res)))
        if a == "duplicated" and EPOCH_BUMP in res:
            rows.append("%-17s %7d  %s" % (EPOCH_BUMP, res[EPOCH_BUMP], epoch_bump_text(res)))
    rows.append("")
    rows.append("cycles with ww edges (figures): %s (%d transactions, %d edges)" % (
        ", ".join("%s %d" % kv for kv in res["cycle_kinds"].items()), res["cycle_graph"]["txns"],
        res["cycle_graph"]["edges"]))
    rows.append("sent %d, acked %d, read %d (final read %d%s), longest unavailable %.3f s%s, recovery %s" % (
        res["sent"], res["acked"], res["read"], res["read_final"], "" if res["final_read"] else ": none",
        res["longest_unavailable_s"], " (%s)" % res["unavailable_client"] if res["unavailable_client"] else "",
        "-" if res["recovery_s"] is None else "%.3f s" % res["recovery_s"]))
    return "\n".join(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="sluicefault.checker", description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="history files or directories of *.jsonl")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.epilog = "Exit status: 0 clean, 1 an anomaly, 2 a history that cannot be read."
    a = ap.parse_args(argv)
    try:
        res = check(a.paths)
    except (OSError, ValueError, KeyError) as e:
        print("sluicefault.checker: %s" % (e,), file=sys.stderr)
        return 2
    print(json.dumps(res, indent=1, sort_keys=True) if a.json else table(res))
    return 1 if any(res[k] for k in ANOMALIES) else 0


if __name__ == "__main__":
    sys.exit(main())
