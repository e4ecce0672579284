"""Disk nemeses of the fault harness (root; docs/fault-testing.md, "Disk
faults"): a node's data directory on a small loop-mounted ext4 filesystem
of its own (LoopFs), and three faults on it:

- DiskStall: the node's process (every thread, and those it makes later)
  in a cgroup v1 blkio group sluicef_<owner>_n<id> whose
  blkio.throttle.write_bps_device / write_iops_device for the loop device
  are set very low; stop() moves it back and removes the group. Throttling
  applies where the broker submits its O_DIRECT writes to the loop device
  (measured: dd oflag=direct 71 MB/s -> 1.1 MB/s under a 1 MB/s limit).
  Buffered writeback (the kernel's flusher threads) is not throttled by
  cgroup v1, so only O_DIRECT writes (the log's) stall.
- DiskFull: a filler file on the node's filesystem takes every free block
  (mkfs -m 0: no blocks reserved for root, which the broker is); stop()
  removes it. What the broker does: docs/fault-testing.md.
- DiskFail: every write (and read) on the filesystem fails with EIO from
  then on (ext4's shutdown ioctl, EXT4_IOC_SHUTDOWN, journal flushed
  first: a disk that stopped taking writes). The kernel has no
  device-mapper (dm-error, dm-flakey) and `mount -o remount,ro` is
  refused (EBUSY) while the broker holds files open for writing, so this
  is all-or-nothing, not intermittent. stop() repairs: SIGKILL of the node
  if it still runs, umount, e2fsck -fy, mount, restart.
- PowerCut: kill-all with every loop filesystem shut down first without
  its journal flushed (the page cache lost, as in a power cut).
- DiskReadOnly: every write fails with EROFS from then on (an ext4 error
  injected through /sys/fs/ext4/loopN/trigger_fs_error on a filesystem
  mounted errors=remount-ro); reads still work. stop() repairs as
  DiskFail's does.

Names: every filesystem lives in a directory sluicef-disk-<name> (the
image file, the mount point mnt, an owner file with the pid that made it);
sweep() removes what a dead owner left (mounts, loop devices, cgroups), and
with force=True everything of the kind. Nemeses find a node's filesystem
from its data_dir(id) (the mount holding it must be a sluicef one).
"""

import errno
import fcntl
import mmap
import os
import re
import shutil
import struct
import subprocess
import time

from nemesis_node import KillAll, restart, sigkill, until

BLKIO = "/sys/fs/cgroup/blkio"
PREFIX = "sluicef"
EXT4_IOC_SHUTDOWN = 0x8004587d       # _IOR('X', 125, __u32)
SHUTDOWN_LOGFLUSH, SHUTDOWN_NOLOGFLUSH = 1, 2


def _run(*cmd, ok=(0,)):
    p = subprocess.run(list(cmd), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    if p.returncode not in ok:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return p.stdout


def _mounts():
    """[(mount point, source device, major:minor)] from /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            a, b = line.split(" - ", 1)
            fa, fb = a.split(), b.split()
            out.append((fa[4].replace("\\040", " "), fb[1], fa[2]))
    return out


def _is_mount(path):
    """path is a mount point (os.path.ismount misses a bind mount of a
    directory onto itself: same device as its parent)."""
    real = os.path.realpath(path)
    return any(m == real for m, _, _ in _mounts())


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class LoopFs:
    """A size_mb ext4 filesystem in an image file under base (a directory
    sluicef-disk-<name>), on a loop device, mounted at .mnt; O_DIRECT is
    checked to work on it. close() unmounts, detaches and removes it."""

    def __init__(self, base, name, size_mb=64):
        self.dir = os.path.join(base, "%s-disk-%s" % (PREFIX, name))
        self.image = os.path.join(self.dir, "image")
        self.mnt = os.path.join(self.dir, "mnt")
        self.dev = None
        os.makedirs(self.mnt)
        with open(os.path.join(self.dir, "owner"), "w") as f:
            f.write("%d\n" % os.getpid())
        try:
            # the directory a shared mount of its own: a mount namespace
            # made while the filesystem is mounted (ip netns exec, another
            # test's) holds a copy of it, which would keep the superblock
            # (e2fsck: "in use") until its processes end; as a slave of
            # this one its copy goes when this unmounts
            _run("mount", "--bind", self.dir, self.dir)
            _run("mount", "--make-shared", self.dir)
            with open(self.image, "wb") as f:
                f.truncate(size_mb << 20)
            self.dev = _run("losetup", "--find", "--show", self.image).strip()
            _run("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard", self.dev)
            self.mount()
            self.check_direct()
        except BaseException:
            self.close()
            raise

    @property
    def majmin(self):
        st = os.stat(self.dev)
        return "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))

    def mount(self):
        mount(self.dev, self.mnt)

    def check_direct(self):
        """An aligned O_DIRECT write and read on the filesystem (the log's
        I/O); raises if either fails."""
        path = os.path.join(self.mnt, ".%s-direct" % PREFIX)
        buf = mmap.mmap(-1, 4096)
        buf.write(b"s" * 4096)
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o600)
        try:
            assert os.pwritev(fd, [buf], 0) == 4096
            assert os.preadv(fd, [buf], 0) == 4096
        finally:
            os.close(fd)
            os.unlink(path)

    def free_bytes(self):
        s = os.statvfs(self.mnt)
        return s.f_bavail * s.f_frsize

    def close(self):
        for m in (self.mnt, self.dir):
            if _is_mount(m):
                subprocess.run(["umount", m], capture_output=True)
                if _is_mount(m):
                    subprocess.run(["umount", "-l", m], capture_output=True)
        if self.dev:
            subprocess.run(["losetup", "-d", self.dev], capture_output=True)
            self.dev = None
        shutil.rmtree(self.dir, ignore_errors=True)


def mount(dev, mnt):
    # errors=remount-ro: an error ext4 finds (or disk-readonly injects)
    # turns the filesystem read-only rather than going on
    _run("mount", "-t", "ext4", "-o", "errors=remount-ro", dev, mnt)


def fs_of(path):
    """(mount point, /dev/loopN, major:minor) of the sluicef loop filesystem
    holding path, or None."""
    real = os.path.realpath(path)
    best = None
    for mnt, src, mm in _mounts():
        if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and (best is None or len(mnt) > len(best[0])):
            best = (mnt, src, mm)
    if best and best[1].startswith("/dev/loop") and "/%s-disk-" % PREFIX in best[0]:
        return best
    return None


def disk_of(path):
    """major:minor of the whole disk under path's filesystem (a partition's
    parent: blk-throttle keys its limits by the disk)."""
    st = os.stat(path)
    mm = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    sysd = os.path.realpath("/sys/dev/block/" + mm)
    if os.path.exists(os.path.join(sysd, "partition")):
        with open(os.path.join(os.path.dirname(sysd), "dev")) as f:
            mm = f.read().strip()
    return mm


def _loop_nodes(cluster):
    """The nodes whose data directory is on a sluicef loop filesystem."""
    nodes = [n for n in sorted(cluster.nodes) if fs_of(cluster.data_dir(n))]
    assert nodes, "no node's data directory is on a sluicef loop filesystem"
    return nodes


# ---- cgroups ---------------------------------------------------------------

def _cgroup_of(pid):
    """pid's blkio cgroup path (relative to the hierarchy's root)."""
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if "blkio" in ctrls.split(","):
                return path
    return "/"


def _move(pid, cg_dir):
    with open(os.path.join(cg_dir, "cgroup.procs"), "w") as f:
        f.write("%d\n" % pid)


def _threads_in(pid, rel):
    """Every thread of pid in blkio cgroup rel."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except FileNotFoundError:
        return True
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/cgroup" % (pid, tid)) as f:
                for line in f:
                    _, ctrls, path = line.rstrip("\n").split(":", 2)
                    if "blkio" in ctrls.split(",") and path != rel:
                        return False
        except FileNotFoundError:
            continue
    return True


def cgroup_stat(cg_dir, name="blkio.throttle.io_service_bytes", majmin=None, op="Write"):
    """A counter of the group's (for majmin, or summed over devices)."""
    total = 0
    with open(os.path.join(cg_dir, name)) as f:
        for line in f:
            f3 = line.split()
            if len(f3) == 3 and f3[1] == op and (majmin is None or f3[0] == majmin):
                total += int(f3[2])
    return total


def _remove_cgroup(cg_dir, back="/"):
    """Move every task of cg_dir to back, lift its limits, remove it."""
    if not os.path.isdir(cg_dir):
        return
    for _ in range(50):
        with open(os.path.join(cg_dir, "cgroup.procs")) as f:
            pids = [int(x) for x in f.read().split()]
        if not pids:
            break
        for p in pids:
            try:
                _move(p, BLKIO + back if os.path.isdir(BLKIO + back) else BLKIO)
            except OSError:
                pass
        time.sleep(0.02)
    for knob in ("blkio.throttle.write_bps_device", "blkio.throttle.write_iops_device"):
        try:
            with open(os.path.join(cg_dir, knob)) as f:
                rules = [line.split()[0] for line in f if line.strip()]
            for mm in rules:
                with open(os.path.join(cg_dir, knob), "w") as f:
                    f.write("%s 0\n" % mm)
        except OSError:
            pass
    for _ in range(50):
        try:
            os.rmdir(cg_dir)
            return
        except OSError as e:
            if e.errno != errno.EBUSY:
                return
            time.sleep(0.05)


# ---- the nemeses -----------------------------------------------------------

class DiskStall:
    """The node's O_DIRECT writes throttled to bps bytes and iops writes a
    second on the loop device of its data directory (or, with
    device="disk", the real disk under it); stop() lifts it."""
    name = "disk-stall"

    def __init__(self, node=None, bps=4096, iops=1, device="loop"):
        self.node, self.bps, self.iops, self.device = node, bps, iops, device
        self.cg = self.pid = self.back = None

    def start(self, cluster, rng):
        n = self.node if self.node is not None else rng.choice(_loop_nodes(cluster))
        if self.device == "loop":
            fs = fs_of(cluster.data_dir(n))
            assert fs, "node %d's data directory is not on a sluicef loop filesystem" % n
            self.majmin = fs[2]
        else:
            self.majmin = disk_of(cluster.data_dir(n))
        self.pid = cluster.pid(n)
        assert self.pid, "node %d is not running" % n
        self.cg = os.path.join(BLKIO, "%s_%d_n%d" % (PREFIX, os.getpid(), n))
        os.makedirs(self.cg, exist_ok=True)
        with open(os.path.join(self.cg, "blkio.throttle.write_bps_device"), "w") as f:
            f.write("%s %d\n" % (self.majmin, self.bps))
        with open(os.path.join(self.cg, "blkio.throttle.write_iops_device"), "w") as f:
            f.write("%s %d\n" % (self.majmin, self.iops))
        self.back = _cgroup_of(self.pid)
        _move(self.pid, self.cg)
        rel = "/" + os.path.basename(self.cg)
        until("every thread of %d in %s" % (self.pid, rel), lambda: _threads_in(self.pid, rel), timeout=10)
        self.node = n
        return {"node": n, "pid": self.pid, "device": self.majmin, "write_bps": self.bps,
                "write_iops": self.iops, "cgroup": self.cg}

    def written(self):
        """Bytes the node wrote to the device through the group so far."""
        return cgroup_stat(self.cg, majmin=self.majmin)

    def stop(self, cluster):
        if self.cg:
            _remove_cgroup(self.cg, self.back or "/")
            self.cg = None


class DiskFull:
    """The node's filesystem filled by a filler file (every free block);
    stop() removes it."""
    name = "disk-full"

    def __init__(self, node=None):
        self.node = node
        self.filler = None

    def start(self, cluster, rng):
        n = self.node if self.node is not None else rng.choice(_loop_nodes(cluster))
        fs = fs_of(cluster.data_dir(n))
        assert fs, "node %d's data directory is not on a sluicef loop filesystem" % n
        self.filler = os.path.join(fs[0], ".%s-filler" % PREFIX)
        free = os.statvfs(fs[0]).f_bavail * os.statvfs(fs[0]).f_frsize
        fd = os.open(self.filler, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            # most of it at once, the rest block by block until ENOSPC (the
            # extent tree takes some of what statvfs called free)
            try:
                os.posix_fallocate(fd, 0, max(free - (1 << 20), 0))
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
            off = os.fstat(fd).st_size
            chunk = b"\0" * 4096
            while True:
                try:
                    os.pwrite(fd, chunk, off)
                    os.fsync(fd)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
                off += len(chunk)
        finally:
            os.close(fd)
        self.node = n
        return {"node": n, "filler": self.filler, "filled_bytes": os.path.getsize(self.filler),
                "free_bytes_left": os.statvfs(fs[0]).f_bavail * os.statvfs(fs[0]).f_frsize}

    def stop(self, cluster):
        if self.filler:
            try:
                os.unlink(self.filler)
            except FileNotFoundError:
                pass
            self.filler = None


class DiskFail:
    """Every write (and read) on the node's filesystem fails with EIO from
    now on (ext4 shutdown; journal_flush=False: without flushing the
    journal first, closer to a power cut). stop(): SIGKILL of the node if
    it still runs, umount, e2fsck -fy, mount again, restart the node."""
    name = "disk-fail"

    def __init__(self, node=None, journal_flush=True):
        self.node, self.journal_flush = node, journal_flush
        self.fs = None

    def inject(self, fs):
        fd = os.open(fs[0], os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN,
                        struct.pack("I", SHUTDOWN_LOGFLUSH if self.journal_flush else SHUTDOWN_NOLOGFLUSH))
        finally:
            os.close(fd)
        return {"errno": "EIO", "journal_flushed": self.journal_flush}

    def start(self, cluster, rng):
        n = self.node if self.node is not None else rng.choice(_loop_nodes(cluster))
        self.fs = fs_of(cluster.data_dir(n))
        assert self.fs, "node %d's data directory is not on a sluicef loop filesystem" % n
        d = self.inject(self.fs)
        self.node = n
        return dict({"node": n, "device": self.fs[1]}, **d)

    def stop(self, cluster):
        if not self.fs:
            return
        mnt, dev, _ = self.fs
        sigkill(cluster, self.node)
        until("%s unmounted" % mnt, lambda: subprocess.run(["umount", mnt], capture_output=True).returncode == 0
              or not _is_mount(mnt), timeout=30, every=0.2)
        # the superblock goes only when the last reference to it does
        # (io_uring's rings of the killed process are torn down after it
        # exits): until then e2fsck finds the device in use (exit 8)
        until("e2fsck of %s" % dev, lambda: subprocess.run(
            ["e2fsck", "-fy", dev], capture_output=True, timeout=120).returncode in (0, 1), timeout=60, every=0.2)
        mount(dev, mnt)
        self.fs = None
        restart(cluster, self.node)


class DiskReadOnly(DiskFail):
    """The node's filesystem turned read-only under the broker: an ext4
    error injected (/sys/fs/ext4/loopN/trigger_fs_error) on a filesystem
    mounted errors=remount-ro, so every write fails with EROFS from now on
    (reads work). `mount -o remount,ro` would be refused (EBUSY) while the
    broker holds files open for writing; this is not. The kernel refuses
    to remount it read-write: stop() repairs as disk-fail's does."""
    name = "disk-readonly"

    def __init__(self, node=None):
        super().__init__(node)

    def inject(self, fs):
        with open("/sys/fs/ext4/%s/trigger_fs_error" % os.path.basename(fs[1]), "w") as f:
            f.write("sluicef disk-readonly\n")
        return {"errno": "EROFS"}


class PowerCut(KillAll):
    """kill-all that cuts the page cache too: every node's sluicef loop
    filesystem is shut down without flushing its journal
    (EXT4_IOC_SHUTDOWN, NOLOGFLUSH: what was not yet on the loop device
    never gets there), then every node is SIGKILLed. stop() repairs each
    filesystem (umount, e2fsck -fy, mount) and starts every node again.
    Nodes whose data directory is not on a loop filesystem lose only
    their process, as under kill-all. With log.durability=sync nothing
    acknowledged may be lost; with write, what was acknowledged but whose
    metadata (the extent's conversion, the file size) was still in the
    journal may be."""
    name = "disk-power-cut"

    def __init__(self):
        super().__init__()
        self.cut = []

    def start(self, cluster, rng):
        self.cut = []
        for n in sorted(cluster.nodes):
            fs = fs_of(cluster.data_dir(n))
            if fs:
                fd = os.open(fs[0], os.O_RDONLY | os.O_DIRECTORY)
                try:
                    fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", SHUTDOWN_NOLOGFLUSH))
                finally:
                    os.close(fd)
                self.cut.append((n, fs))
        d = super().start(cluster, rng)
        d["cut"] = [n for n, _ in self.cut]
        return d

    def stop(self, cluster):
        for n, (mnt, dev, _) in self.cut:
            until("%s unmounted" % mnt, lambda: subprocess.run(["umount", mnt], capture_output=True).returncode == 0
                  or not _is_mount(mnt), timeout=30, every=0.2)
            until("e2fsck of %s" % dev, lambda: subprocess.run(
                ["e2fsck", "-fy", dev], capture_output=True, timeout=120).returncode in (0, 1), timeout=60, every=0.2)
            mount(dev, mnt)
        self.cut = []
        super().stop(cluster)


DISK_NEMESES = {c.name: c for c in (DiskStall, DiskFull, DiskFail, DiskReadOnly, PowerCut)}


# ---- the sweeper -----------------------------------------------------------

def _owner_alive(d):
    try:
        with open(os.path.join(d, "owner")) as f:
            return _alive(int(f.read().strip()))
    except (OSError, ValueError):
        return False


def leftovers(base, owner=None):
    """What is still there of the filesystems under base (mounts, loop
    devices) and of owner's blkio groups: a list of strings, [] if none."""
    real = os.path.realpath(base)
    out = ["mount " + m for m, _, _ in _mounts() if m == real or m.startswith(real + "/")]
    try:
        lst = _run("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE")
    except (RuntimeError, OSError):
        lst = ""
    out += ["loop " + line.strip() for line in lst.splitlines() if real + "/" in line]
    if owner is not None and os.path.isdir(BLKIO):
        out += ["cgroup " + e for e in os.listdir(BLKIO) if e.startswith("%s_%d_" % (PREFIX, owner))]
    return out


def sweep(force=False):
    """Remove what a sluicef disk nemesis left: blkio groups sluicef_*,
    mounts under a sluicef-disk-* directory, loop devices whose backing
    file is in one, the directories. Only a dead owner's unless force.
    What it removed, as a list of strings."""
    done = []
    if os.path.isdir(BLKIO):
        for e in os.listdir(BLKIO):
            m = re.match(r"%s_(\d+)_" % PREFIX, e)
            if m and (force or not _alive(int(m.group(1)))):
                _remove_cgroup(os.path.join(BLKIO, e))
                done.append("cgroup " + e)
    dirs = set()
    # the loop devices first: once their directory's bind mount is gone
    # their backing file's path no longer names it
    try:
        out = _run("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE")
    except (RuntimeError, OSError):
        out = ""
    loops = []
    for line in out.splitlines():
        f = line.split(None, 1)
        if len(f) < 2:
            continue
        m = re.match(r"(.*/%s-disk-[^/]+)/image( \(deleted\))?$" % PREFIX, f[1].strip())
        if m and (force or not _owner_alive(m.group(1))):
            loops.append(f[0])
            dirs.add(m.group(1))
    for mnt, src, _ in sorted(_mounts(), key=lambda m: -len(m[0])):   # mnt before its directory's bind
        m = re.match(r"(.*/%s-disk-[^/]+)(/mnt)?$" % PREFIX, mnt)
        if m and (force or not _owner_alive(m.group(1))) or src in loops:
            subprocess.run(["umount", "-l", mnt], capture_output=True)
            done.append("mount " + mnt)
            if m:
                dirs.add(m.group(1))
    for dev in loops:
        subprocess.run(["losetup", "-d", dev], capture_output=True)
        done.append("loop " + dev)
    for d in dirs:
        if not _is_mount(os.path.join(d, "mnt")) and not _is_mount(d):
            shutil.rmtree(d, ignore_errors=True)
    return done


if __name__ == "__main__":
    # /usr/bin/python3 tests/fault/nemesis_disk.py sweep [--force]
    import sys
    if sys.argv[1:2] == ["sweep"]:
        for what in sweep(force="--force" in sys.argv):
            print("removed", what)
    else:
        print("usage: nemesis_disk.py sweep [--force]", file=sys.stderr)
        sys.exit(2)
