"""Histories: one JSONL file per client process, one JSON object a line.

Every line has "t" (time.monotonic_ns() of the writing process; the
processes of one machine share the monotonic clock), "client" (a name unique
in the run) and "type"; the types and their fields are listed in
docs/fault-testing.md ("Histories"). A Writer writes each line whole and
flushes it at once, so a run that is killed keeps everything that happened
before the kill; read() merges any number of files (or directories of
*.jsonl) by "t" and ignores a last line cut short by a kill.

    w = Writer(out_dir, "p1")
    w.write("send", value="p1-0", key="k0", topic="t", partition=0, txn=None)
    for line in read([out_dir]): ...
"""

import json
import os
import threading
import time


class Writer:
    """The history of one client: out_dir/<client>.jsonl, appended to.
    write() is thread-safe (a producer's delivery callbacks may run on
    another thread than its sends)."""

    def __init__(self, out_dir, client):
        os.makedirs(out_dir, exist_ok=True)
        self.client = client
        self.path = os.path.join(out_dir, client + ".jsonl")
        self._f = open(self.path, "a", buffering=1, encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, type, **fields):
        """One line of the given type; "t" and "client" are added. Returns
        the line's dict."""
        with self._lock:            # "t" in the file's order
            line = {"t": time.monotonic_ns(), "client": self.client, "type": type}
            line.update(fields)
            text = json.dumps(line, separators=(",", ":")) + "\n"
            if self._f is not None:
                self._f.write(text)
                self._f.flush()
        return line

    def close(self):
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def files(paths):
    """The history files named by paths: files as given, directories
    expanded to their *.jsonl files (sorted)."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".jsonl"))
        else:
            out.append(p)
    return out


def read_file(path):
    """The lines of one history file as dicts. A line that is not JSON is
    skipped only when it is the last one (a write cut short by a kill);
    anywhere else it is an error naming the file and line."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    while lines and lines[-1] == "":
        lines.pop()
    for i, text in enumerate(lines):
        if not text.strip():
            continue
        try:
            out.append(json.loads(text))
        except ValueError:
            if i == len(lines) - 1:
                break
            raise ValueError("%s:%d: not a JSON line" % (path, i + 1))
    return out


def read(paths):
    """Every line of every history file under paths, merged by "t" (lines of
    one file keep their order when their "t" are equal)."""
    lines = []
    for n, path in enumerate(files(paths)):
        for i, line in enumerate(read_file(path)):
            lines.append((line.get("t", 0), n, i, line))
    lines.sort(key=lambda x: x[:3])
    return [x[3] for x in lines]
