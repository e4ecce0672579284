#!/usr/bin/python3
"""`sluicectl host check` (control/sluicectl_host.c, control/host_probe.c):
against this machine (it runs, its exit status is 1 exactly when a finding
fails, the JSON parses, a missing cpufreq or IOMMU is `unknown` with a
reason, never a crash), and against fake /proc and /sys trees built in a
temp dir (--root) for what this VM cannot show. A healthy fake host comes
out `ok` on every check first, so that each case below, which changes one
thing, shows that check firing: governor powersave, a deep idle state,
fewer isolated cores than shards, fewer NIC queues than shards, every queue
IRQ on one core, no hugepages with DPDK on (fail), memlock too low with DPDK
on (fail), no IOMMU with DPDK on, a volatile write cache without FUA under
log.durability=sync, nobarrier under sync (fail), the data directory on
tmpfs (fail), ext4 data=journal, an SSD with bfq, THP always, swappiness 60
with swap, an fd limit below the partitions on disk (fail), no time daemon,
and a host smaller than its hardware profile. No broker is started."""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, main, run, temp_dir, test  # noqa: E402

SLUICECTL = os.environ.get("SLUICECTL", os.path.join(REPO, "build", "sluicectl"))

# the healthy host: 4 CPUs, core 0 for the kernel and 1-3 isolated for 3
# shards, an ice NIC with 4 queues whose IRQs are on cores 1-3, an NVMe disk
# with a volatile cache and FUA, XFS, DPDK with hugepages and an IOMMU
CONFIG = {"log.dirs": "/var/lib/sluice", "shards": "3", "log.durability": "sync", "dpdk.enable": "true"}
HEALTHY = {
    "online": "0-3", "isolated": "1-3",
    "governor": ["performance"] * 4,
    "idle": [("POLL", 0, 0), ("C1", 2, 0), ("C6", 170, 1)],   # C6 disabled
    "queues": 4, "irqs": {"1": "1", "2": "2", "3": "3", "4": "1"},
    "hugepages": 1024, "iommu_groups": 3,
    "fstype": "xfs", "mount_opts": "rw,noatime", "super_opts": "rw,attr2,inode64",
    "scheduler": "[none] mq-deadline", "rotational": "0", "write_cache": "write back", "fua": "1",
    "thp": "always madvise [never]", "swappiness": "1", "swap_kib": 8388608,
    "nofile": "1048576", "memlock": "unlimited", "daemon": "chronyd",
    "partitions": 3,
}


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def build_tree(root, **changes):
    """A fake host under root: HEALTHY with changes; a value None leaves that
    part out."""
    h = dict(HEALTHY, **changes)
    cpu = "sys/devices/system/cpu"
    write(root, cpu + "/online", h["online"])
    if h["isolated"] is not None:
        write(root, cpu + "/isolated", h["isolated"])
    for i, g in enumerate(h["governor"] or []):
        write(root, "%s/cpu%d/cpufreq/scaling_governor" % (cpu, i), g)
        write(root, "%s/cpu%d/cpufreq/cpuinfo_max_freq" % (cpu, i), "3000000")
    for i in range(4):
        write(root, "%s/cpu%d/online" % (cpu, i), "1")
    for i, (name, lat, dis) in enumerate(h["idle"] or []):
        for k, v in (("name", name), ("latency", str(lat)), ("disable", str(dis))):
            write(root, "%s/cpu0/cpuidle/state%d/%s" % (cpu, i, k), v)
    # the NIC: eth0 -> a PCI device bound to ice; lo has no device
    if h["queues"] is not None:
        dev = os.path.join(root, "sys/devices/pci0000:00/0000:3b:00.0")
        os.makedirs(dev, exist_ok=True)
        os.makedirs(os.path.join(root, "sys/bus/pci/drivers/ice"), exist_ok=True)
        os.symlink("../../../bus/pci/drivers/ice", os.path.join(dev, "driver"))
        net = os.path.join(root, "sys/class/net/eth0")
        os.makedirs(net)
        os.symlink("../../../devices/pci0000:00/0000:3b:00.0", os.path.join(net, "device"))
        write(root, "sys/class/net/eth0/speed", "25000")
        for q in range(h["queues"]):
            os.makedirs(os.path.join(net, "queues", "rx-%d" % q))
            os.makedirs(os.path.join(net, "queues", "tx-%d" % q))
        os.makedirs(os.path.join(root, "sys/class/net/lo/queues/rx-0"))
        lines = ["           CPU0       CPU1       CPU2       CPU3"]
        lines.append(" 24:          1          0          0          0  IO-APIC   5-edge      ACPI:Ged")
        lines.append(" 30:          0          0          0          0  PCI-MSI 1-edge      ice-0000:3b:00.0:misc")
        for n, (irq, cpus) in enumerate(sorted(h["irqs"].items())):
            lines.append(" %3d:        10         10         10         10  PCI-MSI %d-edge      ice-eth0-TxRx-%d"
                         % (40 + int(irq), n, n))
            write(root, "proc/irq/%d/smp_affinity_list" % (40 + int(irq)), cpus)
        lines.append("LOC:      79162      80742      10000      10000   Local timer interrupts")
        write(root, "proc/interrupts", "\n".join(lines))
    write(root, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", str(h["hugepages"]))
    write(root, "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "0")
    for g in range(h["iommu_groups"]):
        os.makedirs(os.path.join(root, "sys/kernel/iommu_groups", str(g)))
    os.makedirs(os.path.join(root, "sys/kernel/iommu_groups"), exist_ok=True)
    write(root, "proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 isolcpus=1-3")
    write(root, "proc/meminfo", "MemTotal:       263921612 kB\nMemFree:        200000000 kB\n"
          "SwapTotal:       %d kB\nHugePages_Total:    %d\nHugepagesize:       2048 kB"
          % (h["swap_kib"], h["hugepages"]))
    # the data disk: /var/lib/sluice on nvme0n1p1 (259:1), / on nvme0n1p2
    write(root, "proc/self/mountinfo", "\n".join([
        "26 1 259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw",
        "27 26 0:21 / /sys rw,relatime - sysfs sysfs rw",
        "40 26 259:1 / /var/lib/sluice %s shared:1 - %s /dev/nvme0n1p1 %s"
        % (h["mount_opts"], h["fstype"], h["super_opts"]),
    ]))
    disk = os.path.join(root, "sys/block/nvme0n1")
    for k, v in (("scheduler", h["scheduler"]), ("rotational", h["rotational"]),
                 ("write_cache", h["write_cache"]), ("fua", h["fua"])):
        if v is not None:
            write(root, "sys/block/nvme0n1/queue/" + k, v)
    write(root, "sys/block/nvme0n1/device/model", "SAMSUNG MZQL23T8HCLS")
    for part in ("nvme0n1p1", "nvme0n1p2"):
        write(root, "sys/block/nvme0n1/%s/partition" % part, part[-1])
    os.makedirs(os.path.join(root, "sys/dev/block"))
    os.symlink("../../block/nvme0n1/nvme0n1p1", os.path.join(root, "sys/dev/block/259:1"))
    os.symlink("../../block/nvme0n1/nvme0n1p2", os.path.join(root, "sys/dev/block/259:2"))
    assert os.path.isdir(disk)
    write(root, "sys/kernel/mm/transparent_hugepage/enabled", h["thp"])
    write(root, "proc/sys/vm/swappiness", h["swappiness"])
    write(root, "proc/self/limits", "\n".join([
        "Limit                     Soft Limit           Hard Limit           Units",
        "Max open files            %-20s %-20s files" % (h["nofile"], h["nofile"]),
        "Max locked memory         %-20s %-20s bytes" % (h["memlock"], h["memlock"]),
    ]))
    write(root, "proc/1/comm", "systemd")
    if h["daemon"]:
        write(root, "proc/812/comm", h["daemon"])
    for p in range(h["partitions"]):
        os.makedirs(os.path.join(root, "var/lib/sluice", "orders-%d" % p))


def check(root, *extra, config=None, rc=None, fmt="json"):
    """Run host check on root (None: this machine) with the broker config;
    returns (exit status, parsed JSON or text)."""
    d = temp_dir("sluice-hostcheck-")
    try:
        args = [SLUICECTL, "host", "check"]
        if config is not False:
            props = os.path.join(d, "sluiced.properties")
            with open(props, "w") as f:
                for k, v in (config or CONFIG).items():
                    f.write("%s=%s\n" % (k, v))
            args += ["--config", props]
        if root:
            args += ["--root", root]
        args += list(extra) + ["--format", fmt]
        p = run(args, check=False, cwd=d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode in (0, 1), "%s: exit %d\n%s\n%s" % (" ".join(args), p.returncode, out, err)
    if rc is not None:
        assert p.returncode == rc, "%s: exit %d, wanted %d\n%s\n%s" % (" ".join(args), p.returncode, rc, out, err)
    if fmt != "json":
        return p.returncode, out
    doc = json.loads(out)
    fails = [f for f in doc["findings"] if f["status"] == "fail"]
    assert (p.returncode == 1) == bool(fails), "exit %d but failing findings %s" % (p.returncode, fails)
    assert doc["result"] == ("fail" if fails else "ok")
    for f in doc["findings"]:
        assert f["status"] in ("ok", "warn", "fail", "unknown"), f
        assert f["seen"], f
        if f["status"] in ("warn", "fail"):
            assert f["fix"], "a %s without a fix: %s" % (f["status"], f)
    return p.returncode, doc


def finding(doc, name, nth=0):
    got = [f for f in doc["findings"] if f["name"] == name]
    assert len(got) > nth, "no finding %s in %s" % (name, [f["name"] for f in doc["findings"]])
    return got[nth]


def fake(**changes):
    """A fresh tree with changes; the caller removes it."""
    root = temp_dir("sluice-hostroot-")
    build_tree(root, **changes)
    return root


def case(changes, name, status, words=(), config=None, rc=None, extra=()):
    """Build a tree with changes, check it, and assert finding name has
    status and says words."""
    root = fake(**changes)
    try:
        code, doc = check(root, *extra, config=config, rc=rc)
        f = finding(doc, name)
        assert f["status"] == status, "%s: %s, wanted %s: %s" % (name, f["status"], status, f)
        text = f["seen"] + " " + (f["fix"] or "")
        for w in words:
            assert w in text, "%s: %r not in %r" % (name, w, text)
        return doc
    finally:
        shutil.rmtree(root, ignore_errors=True)


HEALTHY_OK = ["cpu.governor", "cpu.idle", "cpu.shards", "cpu.isolated", "nic.queues", "nic.irq",
              "dpdk.hugepages", "dpdk.iommu", "fs.odirect", "disk.scheduler", "disk.durability", "mm.thp",
              "mm.swappiness", "limits.nofile", "limits.memlock", "clock.sync"]


@test
def healthy_host_all_ok():
    root = fake()
    try:
        code, doc = check(root, rc=0)
        assert doc["shards"] == 3 and doc["durability"] == "sync" and doc["dpdk"] is True
        assert doc["log_dirs"] == ["/var/lib/sluice"], doc["log_dirs"]
        for name in HEALTHY_OK:
            f = finding(doc, name)
            assert f["status"] == "ok", "healthy %s: %s" % (name, f)
        assert "nvme0n1" in finding(doc, "disk.durability")["seen"]
        assert "3 partitions" in finding(doc, "limits.nofile")["seen"]
        # the text form says the same, failures first
        code, text = check(root, rc=0, fmt="table")
        assert "0 fail" in text and "host check of " + root in text, text
    finally:
        shutil.rmtree(root, ignore_errors=True)


@test
def governor_powersave_warns():
    case({"governor": ["powersave"] * 4}, "cpu.governor", "warn", ["powersave on 4 of 4", "performance"], rc=0)


@test
def deep_idle_state_warns():
    case({"idle": [("POLL", 0, 0), ("C1", 2, 0), ("C6", 170, 0)]}, "cpu.idle", "warn", ["C6", "170 us"], rc=0)


@test
def isolated_fewer_than_shards_warns():
    case({"isolated": "1"}, "cpu.isolated", "warn", ["1 isolated core (1) for 3 shards", "isolcpus="], rc=0)
    case({"isolated": ""}, "cpu.isolated", "warn", ["0 isolated cores"], rc=0)


@test
def nic_fewer_queues_than_shards_warns():
    case({"queues": 2, "irqs": {"1": "1", "2": "2"}}, "nic.queues", "warn",
         ["eth0 (ice, 25000 Mb/s): 2 RX and 2 TX queues for 3 shards", "ethtool -L eth0 combined 3"], rc=0)


@test
def irqs_all_on_one_core_warn():
    case({"irqs": {"1": "0", "2": "0", "3": "0", "4": "0"}}, "nic.irq", "warn", ["all 4 queue IRQs on CPU 0"], rc=0)


@test
def dpdk_without_hugepages_fails():
    doc = case({"hugepages": 0}, "dpdk.hugepages", "fail", ["no hugepages", "nr_hugepages"], rc=1)
    # and with DPDK off the same host is fine
    case({"hugepages": 0}, "dpdk.hugepages", "ok", ["not needed"], rc=0,
         config=dict(CONFIG, **{"dpdk.enable": "false"}))
    assert doc["result"] == "fail"


@test
def dpdk_memlock_too_low_fails():
    case({"memlock": "65536"}, "limits.memlock", "fail", ["64 KiB", "LimitMEMLOCK=infinity"], rc=1)
    case({"memlock": "65536"}, "limits.memlock", "ok", [], rc=0, config=dict(CONFIG, **{"dpdk.enable": "false"}))


@test
def dpdk_without_iommu_warns():
    case({"iommu_groups": 0}, "dpdk.iommu", "warn", ["no IOMMU groups", "intel_iommu=on"], rc=0)


@test
def volatile_cache_without_fua_is_the_durability_finding():
    case({"fua": "0"}, "disk.durability", "warn", ["volatile write cache", "without FUA",
                                                   "log.durability=sync"], rc=0)
    # the same disk under durability=write: what write promises, no warning
    case({"fua": "0"}, "disk.durability", "ok", ["survives a broker crash, not a power loss"], rc=0,
         config=dict(CONFIG, **{"log.durability": "write"}))
    case({"write_cache": "write through", "fua": "0"}, "disk.durability", "ok", ["write through"], rc=0)


@test
def nobarrier_under_sync_fails():
    case({"super_opts": "rw,nobarrier"}, "disk.durability", "fail", ["nobarrier", "power loss"], rc=1)


@test
def tmpfs_data_dir_fails():
    case({"fstype": "tmpfs", "super_opts": "rw,size=1g"}, "fs.odirect", "fail", ["tmpfs", "O_DIRECT"], rc=1)


@test
def ext4_data_journal_warns():
    case({"fstype": "ext4", "super_opts": "rw,data=journal"}, "fs.odirect", "warn", ["data=journal"], rc=0)


@test
def ssd_with_bfq_warns():
    case({"scheduler": "mq-deadline kyber [bfq] none"}, "disk.scheduler", "warn", ["bfq", "echo none"], rc=0)


@test
def thp_always_warns():
    case({"thp": "[always] madvise never"}, "mm.thp", "warn", ["'always'", "madvise"], rc=0)


@test
def swappiness_60_warns():
    case({"swappiness": "60"}, "mm.swappiness", "warn", ["vm.swappiness 60", "8192 MiB of swap"], rc=0)
    case({"swappiness": "60", "swap_kib": 0}, "mm.swappiness", "ok", ["none"], rc=0)


@test
def fd_limit_below_partitions_fails():
    # 800 partitions + the reserve (256 + 1024/32) > 1024
    case({"nofile": "1024", "partitions": 800}, "limits.nofile", "fail", ["1024", "800 partitions"], rc=1)
    case({"nofile": "4096", "partitions": 800}, "limits.nofile", "warn", ["4096"], rc=0)


@test
def no_time_daemon_warns():
    case({"daemon": None}, "clock.sync", "warn", ["no time daemon", "chrony"], rc=0)


@test
def host_smaller_than_profile_warns():
    d = temp_dir("sluice-hostprof-")
    try:
        big = os.path.join(d, "big.conf")
        with open(big, "w") as f:
            f.write("description=Big\ncores=64\nmemory_gib=4096\nnic_gbps=100\ndisk_write_mbps=30000\n")
        small = os.path.join(d, "small.conf")
        with open(small, "w") as f:
            f.write("description=Small\ncores=2\nmemory_gib=16\nnic_gbps=1\ndisk_write_mbps=500\n")
        doc = case({}, "profile", "warn", ["cores 4 (the profile 64)", "make hwprobe"], rc=0, extra=["--profile", big])
        b = finding(doc, "profile.binding")
        assert b["status"] == "ok" and "binds first" in b["seen"], b
        doc = case({}, "profile", "ok", ["Small"], rc=0, extra=["--profile", small])
        # this host's 25 Gb/s NIC (3125 MB/s) against the small profile's 500 MB/s disk
        assert finding(doc, "profile.binding")["seen"].startswith("disk write binds first"), doc
        # a shipped profile by name
        case({}, "profile", "warn", ["commodity-2026.conf"], rc=0, extra=["--profile", "commodity-2026"])
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def suite_costs_name_what_binds():
    results = os.path.join(REPO, "docs", "bench", "results-local-2026-12-03.json")
    doc = case({}, "profile.plan", "ok", ["binds first with the costs of", "servers like this one", "cpu "], rc=0,
               extra=["--profile", "commodity-2026", "--results", results])
    assert "(of disk and NIC)" in finding(doc, "profile.binding")["seen"]
    root = fake()
    try:
        p = run([SLUICECTL, "host", "check", "--root", root, "--results", "/nonexistent.json"], check=False)
        assert p.returncode == 2 and b"--results" in p.stderr, p
    finally:
        shutil.rmtree(root, ignore_errors=True)


@test
def empty_tree_is_unknown_not_a_crash():
    root = temp_dir("sluice-hostroot-")
    try:
        code, doc = check(root, rc=0, config={"log.dirs": "/var/lib/sluice"})
        for name in ("cpu.governor", "cpu.idle", "nic.queues", "fs.odirect", "disk.durability", "mm.thp",
                     "limits.nofile", "profile"):
            f = finding(doc, name)
            assert f["status"] == "unknown", "%s: %s" % (name, f)
        # DPDK on with nothing: no hugepages is a failure, and said so
        code, doc = check(root, rc=1, config={"dpdk.enable": "true"})
        assert finding(doc, "dpdk.hugepages")["status"] == "fail"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@test
def this_machine():
    d = temp_dir("sluice-hostreal-")
    try:
        data = os.path.join(d, "data")
        os.makedirs(data)
        code, doc = check(None, config={"log.dirs": data})
        assert doc["root"] == "/" and doc["log_dirs"] == [os.path.realpath(data)], doc
        names = {f["name"] for f in doc["findings"]}
        for name in HEALTHY_OK + ["profile"]:
            assert name in names, name
        # the temp dir's filesystem takes O_DIRECT (the test directory is on a disk)
        fs = finding(doc, "fs.odirect")
        assert "O_DIRECT" in fs["seen"], fs
        # nothing left behind by the O_DIRECT probe
        assert os.listdir(d) == ["data"], os.listdir(d)
        # a VM without cpufreq says why
        if not os.path.exists("/sys/devices/system/cpu/cpu0/cpufreq"):
            g = finding(doc, "cpu.governor")
            assert g["status"] == "unknown" and "no cpufreq" in g["seen"], g
        # the defaults (./data under the working directory) and the text form
        code2, text = check(None, config=False, fmt="table")
        assert "host check of this machine" in text and ("fail," in text), text
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def usage_and_help():
    p = run([SLUICECTL, "host", "check", "--root", "/nonexistent-sluice-root"], check=False)
    assert p.returncode == 2 and b"not a directory" in p.stderr, p
    p = run([SLUICECTL, "host", "check", "--profile", "no-such-profile"], check=False)
    assert p.returncode == 2 and b"no hardware profile 'no-such-profile'" in p.stderr, p
    p = run([SLUICECTL, "host", "check", "--set", "log.durability=often"], check=False)
    assert p.returncode == 2 and b"log.durability" in p.stderr, p
    out = run([SLUICECTL, "--help"]).stdout.decode()
    assert "host check" in out, out
    out = run([SLUICECTL, "host", "check", "--help"]).stdout.decode()
    for opt in ("--config", "--set", "--profile", "--results", "--root"):
        assert opt in out, (opt, out)
    out = run([SLUICECTL, "completion", "bash"]).stdout.decode()
    assert "'host check') opts='--config --set --profile --results --root" in out, out


if __name__ == "__main__":
    if subprocess.run([SLUICECTL, "--help"], stdout=subprocess.DEVNULL).returncode != 0:
        sys.exit("%s does not run: make build/sluicectl" % SLUICECTL)
    main("test_host_check")
