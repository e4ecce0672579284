"""Dependency cycles between transactions, in the way of Jepsen's Kafka
workload (jepsen.tests.kafka, with Elle): each partition's log is a total
version order, and from the transactions' sends and reads follow

  ww  T1 -> T2: T2's record is the next committed transactional record
      after T1's in a partition's offset order;
  wr  T1 -> T2: the highest offset T2 read in a partition holds T1's record;
  rw  T1 -> T2: the highest offset T1 read in a partition is below T2's
      record, the next committed transactional record after it (T2 wrote
      what T1 did not see).

A cycle of ww edges alone is G0, of ww and wr with a wr G1c, with exactly
one rw G-single, with more G2. Kafka orders concurrent transactions per
partition only, so ww edges need not agree with any serial order (Jepsen's
--no-ww-deps); a cycle of wr edges alone ("wr_cycles": each transaction
read what the next wrote, circular information flow) is what no
read_committed history can have. docs/fault-testing.md ("Dependency
cycles") says which of them the checker counts as an anomaly and why.

    find(lines, committed) -> {"G0": n, "G1c": n, "G-single": n, "G2": n,
                               "wr_cycles": n,
                               "examples": {kind: [cycle]}, "txns": n,
                               "edges": n}

`lines` is a merged history (sluicefault.history.read), `committed` the set
of transactions that committed. Stdlib only; Tarjan's algorithm without
recursion, so 10^5 transactions are fine.
"""

import bisect
from collections import defaultdict, deque

KINDS = ("G0", "G1c", "G-single", "G2")
RC = "read_committed"


def graph(lines, committed):
    """(edges, nodes): edges {t1: {t2: {kind: why}}} between committed
    transactions, why a dict naming the partition and offsets."""
    writes = defaultdict(dict)           # (topic, partition) -> {offset: (txn, value)}
    sends = {}                           # value -> txn
    acked = {}                           # value -> (topic, partition, offset)
    final_at = {}                        # value -> (topic, partition, offset) in the final logs
    open_txn = {}                        # client -> its transaction begun and not ended
    reads = defaultdict(dict)            # txn -> {(topic, partition): (offset, value)} highest read
    for x in lines:
        ty = x.get("type")
        if ty == "send" and x.get("txn"):
            sends[x["value"]] = x["txn"]
        elif ty == "ack":
            acked[x["value"]] = (x["topic"], x["partition"], x["offset"])
        elif ty == "txn_begin":
            open_txn[x["client"]] = x["txn"]
        elif ty in ("txn_commit", "txn_abort") and open_txn.get(x["client"]) == x.get("txn"):
            open_txn.pop(x["client"], None)
        elif ty == "read":
            if str(x.get("reader", "")).startswith("final-"):
                final_at.setdefault(x["value"], (x["topic"], x["partition"], x["offset"]))
                continue
            # a read inside a transaction (the copier's): its "txn", or the
            # transaction its client had open
            txn = x.get("txn") or (open_txn.get(x["client"]) if x.get("isolation") == RC else None)
            if txn is None:
                continue
            tp = (x["topic"], x["partition"])
            if tp not in reads[txn] or x["offset"] > reads[txn][tp][0]:
                reads[txn][tp] = (x["offset"], x["value"])
    for v, txn in sends.items():
        if txn not in committed:
            continue
        at = acked.get(v) or final_at.get(v)
        if at is not None:
            writes[at[:2]][at[2]] = (txn, v)
    edges = defaultdict(dict)
    nodes = set()

    def edge(a, b, kind, why):
        if a != b:
            edges[a].setdefault(b, {}).setdefault(kind, why)

    order = {}                           # (topic, partition) -> sorted offsets of committed writes
    for tp, ws in writes.items():
        offs = sorted(ws)
        order[tp] = offs
        for o1, o2 in zip(offs, offs[1:]):
            (t1, v1), (t2, v2) = ws[o1], ws[o2]
            nodes.update((t1, t2))
            edge(t1, t2, "ww", {"topic": tp[0], "partition": tp[1], "offsets": [o1, o2], "values": [v1, v2]})
        if offs:
            nodes.add(ws[offs[0]][0])
    for txn, tps in reads.items():
        if txn not in committed:
            continue
        nodes.add(txn)
        for tp, (o, v) in tps.items():
            w = sends.get(v)
            if w in committed:
                edge(w, txn, "wr", {"topic": tp[0], "partition": tp[1], "offset": o, "value": v})
            offs = order.get(tp, [])
            i = bisect.bisect_right(offs, o)
            if i < len(offs):
                t2, v2 = writes[tp][offs[i]]
                edge(txn, t2, "rw", {"topic": tp[0], "partition": tp[1], "read_to": o, "next": offs[i],
                                     "value": v2})
    return edges, nodes


def sccs(nodes, succ):
    """Strongly connected components of more than one node (Tarjan,
    iterative). succ(n) -> iterable of successors."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            n, it = work[-1]
            for m in it:
                if m not in index:
                    index[m] = low[m] = counter
                    counter += 1
                    stack.append(m)
                    on.add(m)
                    work.append((m, iter(succ(m))))
                    break
                if m in on:
                    low[n] = min(low[n], index[m])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[n])
                if low[n] == index[n]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on.discard(m)
                        comp.append(m)
                        if m == n:
                            break
                    if len(comp) > 1:
                        out.append(comp)
    return out


def _path(edges, src, dst, kinds, members):
    """The shortest path src ~> dst over edges of `kinds` inside members, as
    a list of nodes, or None."""
    prev = {src: None}
    q = deque([src])
    while q:
        n = q.popleft()
        if n == dst:
            out = []
            while n is not None:
                out.append(n)
                n = prev[n]
            return out[::-1]
        for m, ks in edges.get(n, {}).items():
            if m in members and m not in prev and any(k in kinds for k in ks):
                prev[m] = n
                q.append(m)
    return None


def _example(edges, cycle, kinds):
    """A cycle [t1, ..., tn, t1] with the edge between each pair: its kind
    (one of kinds when it has one) and the offsets that justify it."""
    steps = []
    for a, b in zip(cycle, cycle[1:]):
        ks = edges[a][b]
        k = next((k for k in ("ww", "wr", "rw") if k in ks and k in kinds), next(iter(ks)))
        steps.append(dict(ks[k], src=a, dst=b, kind=k))
    return {"txns": cycle[:-1], "edges": steps}


def classify(edges, comp, rw_limit=100):
    """The kinds of cycle in one strongly connected component, each with an
    example: {kind: example}. G-single is looked for through the first
    rw_limit rw edges of the component (a search of the component each);
    a component with more and no G-single among them is called G2."""
    members = set(comp)
    out = {}
    for kind, allowed, need in (("G0", ("ww",), "ww"), ("G1c", ("ww", "wr"), "wr")):
        sub = {n: {m: ks for m, ks in edges.get(n, {}).items() if m in members and any(k in allowed for k in ks)}
               for n in comp}
        for c in sccs(comp, lambda n, sub=sub: sub[n]):
            cm = set(c)
            hit = next(((a, b) for a in c for b, ks in sub[a].items() if b in cm and need in ks), None)
            if hit is not None:
                p = _path(edges, hit[1], hit[0], allowed, cm)
                out[kind] = _example(edges, [hit[0]] + p, (need,) + allowed)
                break
    rws = [(a, b) for a in comp for b, ks in edges.get(a, {}).items() if b in members and "rw" in ks]
    for a, b in rws[:rw_limit]:
        p = _path(edges, b, a, ("ww", "wr"), members)
        if p is not None:
            out["G-single"] = _example(edges, [a] + p, ("rw", "ww", "wr"))
            break
    if rws and "G-single" not in out:
        a, b = rws[0]
        p = _path(edges, b, a, ("ww", "wr", "rw"), members)
        out["G2"] = _example(edges, [a] + p, ("rw", "ww", "wr"))
    return out


def find(lines, committed, examples=3):
    """Counts of each kind of cycle (one per strongly connected component
    that has it) and the first examples."""
    edges, nodes = graph(lines, committed)
    res = {k: 0 for k in KINDS}
    res["examples"] = {}
    res["txns"] = len(nodes)
    res["edges"] = sum(len(v) for v in edges.values())
    for comp in sccs(sorted(nodes), lambda n: edges.get(n, {})):
        for kind, ex in classify(edges, comp).items():
            res[kind] += 1
            lst = res["examples"].setdefault(kind, [])
            if len(lst) < examples:
                lst.append(ex)
    wr = {n: [m for m, ks in edges.get(n, {}).items() if "wr" in ks] for n in nodes}
    comps = sccs(sorted(nodes), lambda n: wr[n])
    res["wr_cycles"] = len(comps)
    for comp in comps[:examples]:
        members = set(comp)
        a = comp[0]
        b = next(m for m in wr[a] if m in members)
        res["examples"].setdefault("wr_cycles", []).append(
            _example(edges, [a] + _path(edges, b, a, ("wr",), members), ("wr",)))
    return res
