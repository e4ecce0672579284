"""Clock nemesis of the fault harness (docs/fault-testing.md, "Clock
faults"): one node's wall clock (CLOCK_REALTIME) offset by libfaketime
(Debian packages faketime and libfaketime, scripts/setup), changed while it
runs.

A node can be skewed only if it was started for it: node_env(path) is the
environment to start it with (netcluster's node_env={id: ...}), LD_PRELOAD
of libfaketimeMT (the multi-threaded build) reading its offset from the
file path (FAKETIME_TIMESTAMP_FILE, "+0" until the nemesis writes another),
re-read at most once a second (FAKETIME_CACHE_DURATION=1;
FAKETIME_NO_CACHE=1 would open the file at every clock read, and the
shards read the clock every turn). CLOCK_MONOTONIC is left alone
(FAKETIME_DONT_FAKE_MONOTONIC=1): an NTP step moves the wall clock only,
and the broker's timers (session, lag, io_uring timeouts, which the kernel
counts anyway) run on the monotonic clock.

ClockSkew(offset_s=None): start() writes the offset ("+120" or "-300"
seconds; None: one at random from OFFSETS) to the file of the node given
(or of one at random among the nodes that have a file: cluster.clock_files
{id: path}); stop() writes "+0". A jump is a start with another offset.
"""

import os

LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
OFFSETS = (-600, -120, -5, 5, 120, 600)


def library():
    for p in LIBS:
        if os.path.exists(p):
            return p
    raise FileNotFoundError("libfaketime is not installed (scripts/setup: faketime libfaketime)")


def node_env(path, offset="+0"):
    """The environment a node must be started with for ClockSkew (the file
    path is made, holding offset)."""
    write_offset(path, offset)
    return {"LD_PRELOAD": library(), "FAKETIME_TIMESTAMP_FILE": path, "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_NO_CACHE": "0"}


def write_offset(path, offset):
    """offset: seconds (int, float) or a libfaketime spec string ("+2m")."""
    spec = offset if isinstance(offset, str) else "%+g" % offset
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(spec + "\n")
    os.rename(tmp, path)   # whole: the library never reads half a spec
    return spec


class ClockSkew:
    name = "clock-skew"

    def __init__(self, node=None, offset_s=None):
        self.node, self.offset_s = node, offset_s
        self.path = None

    def start(self, cluster, rng):
        files = getattr(cluster, "clock_files", {})
        assert files, "no node was started for a clock skew (nemesis_clock.node_env, cluster.clock_files)"
        n = self.node if self.node is not None else rng.choice(sorted(files))
        off = self.offset_s if self.offset_s is not None else rng.choice(OFFSETS)
        self.path = files[n]
        spec = write_offset(self.path, off)
        return {"node": n, "offset": spec}

    def stop(self, cluster):
        if self.path:
            write_offset(self.path, "+0")
            self.path = None


CLOCK_NEMESES = {ClockSkew.name: ClockSkew}
