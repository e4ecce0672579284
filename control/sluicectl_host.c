/* control/sluicectl_host.c — `sluicectl host check`: run on the server
 * (no broker needed), it reads what the kernel says about the host
 * (control/host_probe.c) and reports what will hurt the broker, each
 * finding with what was seen and the fix: CPU frequency and idle states,
 * isolated cores, NIC queues and their IRQs, hugepages and IOMMU for DPDK,
 * the data disk's scheduler and write cache against log.durability, its
 * filesystem for O_DIRECT, THP, swappiness, fd and memlock limits, clock
 * sync, and the host against a hardware profile, with the capacity
 * planner's model (bench/capacity.c) when a suite run's costs are given
 * (--results) (docs/host-check.md).
 * The broker's config file (--config, --set; else the defaults) says the
 * data directories, shards, durability and whether DPDK is on.
 * Exit 0 when nothing breaks a promise (warnings included), 1 when
 * something does (a `fail`), 2 bad usage.
 * @thread main */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/timex.h>
#include <unistd.h>

#include "bench/capacity.h"
#include "control/config.h"
#include "control/fd_budget.h"
#include "control/host_probe.h"
#include "control/hw_profile.h"
#include "control/sluicectl.h"

enum { HC_OK, HC_WARN, HC_FAIL, HC_UNKNOWN };
static const char *const hc_status_name[] = { "ok", "warn", "fail", "unknown" };

#define HC_MAX_FINDINGS 48
#define HC_MAX_DIRS 8
#define HC_MAX_CPUS 4096

struct hc_finding {
	char name[40];          /* cpu.governor */
	int status;             /* HC_* */
	char seen[800];         /* what was read; for unknown, why it could not be */
	char fix[600];          /* the command or setting; "" when none is needed */
};

/* What the check knows before it looks: the broker's settings and the
 * host's shape. */
struct hc {
	struct host_probe h;
	bool real;                      /* the running machine (no --root) */
	struct config *cfg;
	int shards;                     /* configured, or one per online CPU */
	bool shards_auto;
	int online;                     /* online CPUs (sys/devices/system/cpu/online) */
	int durability;                 /* 0 write, 1 sync, 2 memory */
	bool dpdk;
	char dirs[HC_MAX_DIRS][PATH_MAX];   /* log.dirs, absolute */
	int ndirs;
	struct hw_profile prof;
	bool has_prof;
	char prof_path[PATH_MAX];
	char prof_why[300];             /* why there is none */
	struct cap_calib *cal;          /* --results: a suite run's costs, for the CPU (NULL: none) */
	struct hc_finding f[HC_MAX_FINDINGS];
	int n;
};

static const char *const durability_name[] = { "write", "sync", "memory" };

static struct hc_finding *add(struct hc *c, const char *name, int status, const char *fix, const char *seen, ...)
	__attribute__((format(printf, 5, 6)));

static struct hc_finding *add(struct hc *c, const char *name, int status, const char *fix, const char *seen, ...)
{
	static struct hc_finding spill;
	struct hc_finding *f = c->n < HC_MAX_FINDINGS ? &c->f[c->n++] : &spill;
	va_list ap;

	snprintf(f->name, sizeof(f->name), "%s", name);
	f->status = status;
	snprintf(f->fix, sizeof(f->fix), "%s", fix ? fix : "");
	va_start(ap, seen);
	vsnprintf(f->seen, sizeof(f->seen), seen, ap);
	va_end(ap);
	return f;
}

/* the file rel as the check names it in a message: /sys/... on the real
 * machine, ROOT/sys/... under --root */
static const char *shown(const struct hc *c, const char *rel)
{
	return fmt("%s/%s", c->h.root, rel);
}

/* ---- CPU ------------------------------------------------------------------- */

static void check_governor(struct hc *c)
{
	char gov[64], first[64] = "", other[64] = "";
	int cpus = 0, perf = 0;

	for (int i = 0; i < HC_MAX_CPUS; i++) {
		if (host_read(&c->h, gov, sizeof(gov), "sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor", i) < 0) {
			char dummy[8];

			/* stop at the first CPU that does not exist */
			if (host_read(&c->h, dummy, sizeof(dummy), "sys/devices/system/cpu/cpu%d/uevent", i) < 0 &&
			    host_read(&c->h, dummy, sizeof(dummy), "sys/devices/system/cpu/cpu%d/online", i) < 0 && i > 0)
				break;
			continue;
		}
		cpus++;
		if (!strcmp(gov, "performance"))
			perf++;
		else if (!first[0])
			snprintf(first, sizeof(first), "%s", gov);
		else if (strcmp(gov, first))
			snprintf(other, sizeof(other), "%s", gov);
	}
	if (!cpus)
		add(c, "cpu.governor", HC_UNKNOWN, "",
		    "no cpufreq in %s (a VM, or no cpufreq driver loaded): the firmware or the hypervisor sets the "
		    "clock", shown(c, "sys/devices/system/cpu/cpu0/cpufreq"));
	else if (perf == cpus)
		add(c, "cpu.governor", HC_OK, "", "performance on all %d CPUs", cpus);
	else
		add(c, "cpu.governor", HC_WARN,
		    "cpupower frequency-set -g performance (or tuned-adm profile latency-performance), at boot",
		    "%s%s%s on %d of %d CPUs: a shard that wakes to a request runs at a low clock until the governor "
		    "raises it (latency, and throughput below the profile's clock)", first, other[0] ? ", " : "",
		    other, cpus - perf, cpus);
}

static void check_idle(struct hc *c)
{
	char name[64], deep[64] = "", driver[64] = "";
	int64_t lat, dis, worst = -1;
	int states = 0;

	host_read(&c->h, driver, sizeof(driver), "sys/devices/system/cpu/cpuidle/current_driver");
	for (int s = 0; s < 16; s++) {
		if (host_read(&c->h, name, sizeof(name), "sys/devices/system/cpu/cpu0/cpuidle/state%d/name", s) < 0)
			break;
		states++;
		if (host_read_i64(&c->h, &lat, "sys/devices/system/cpu/cpu0/cpuidle/state%d/latency", s) < 0)
			continue;
		if (host_read_i64(&c->h, &dis, "sys/devices/system/cpu/cpu0/cpuidle/state%d/disable", s) == 0 && dis)
			continue;
		if (lat > worst) {
			worst = lat;
			snprintf(deep, sizeof(deep), "%s", name);
		}
	}
	if (!states)
		add(c, "cpu.idle", HC_UNKNOWN, "",
		    "no idle states in %s (cpuidle driver: %s; a VM idles as the hypervisor decides)",
		    shown(c, "sys/devices/system/cpu/cpu0/cpuidle"), driver[0] ? driver : "none");
	else if (worst > 10)
		add(c, "cpu.idle", HC_WARN,
		    "cpupower idle-set -D 10 (disables the states that take longer than 10 us to leave), or "
		    "intel_idle.max_cstate=1 processor.max_cstate=1 on the kernel command line",
		    "%d idle states; the deepest enabled, %s, takes %lld us to leave: a shard idle between requests "
		    "answers the next that much later (p99)", states, deep, (long long)worst);
	else
		add(c, "cpu.idle", HC_OK, "", "%d idle states, none enabled that takes over 10 us to leave (deepest: "
		    "%s, %lld us)", states, deep[0] ? deep : "-", (long long)(worst < 0 ? 0 : worst));
}

static void check_cores(struct hc *c)
{
	static bool set[HC_MAX_CPUS];
	char list[4096] = "";
	int iso;

	add(c, "cpu.shards", c->shards > c->online ? HC_WARN : HC_OK,
	    c->shards > c->online ? fmt("shards=%d (one a core) in the broker's config", c->online) : "",
	    "%d shard%s%s on %d online CPU%s%s", c->shards, c->shards == 1 ? "" : "s",
	    c->shards_auto ? " (shards=0: one a core)" : "", c->online, c->online == 1 ? "" : "s",
	    c->shards > c->online ? ": more shards than cores, so shards take turns on a core" : "");
	memset(set, 0, sizeof(set));
	if (host_read(&c->h, list, sizeof(list), "sys/devices/system/cpu/isolated") < 0) {
		add(c, "cpu.isolated", HC_UNKNOWN, "", "%s cannot be read",
		    shown(c, "sys/devices/system/cpu/isolated"));
		return;
	}
	iso = host_cpulist(list, set, HC_MAX_CPUS);
	/* the cores to isolate: 1..shards, core 0 left to the kernel */
	int hi = c->shards < c->online ? c->shards : c->online - 1;
	const char *range = hi <= 1 ? "1" : fmt("1-%d", hi);

	if (iso < 0)
		add(c, "cpu.isolated", HC_UNKNOWN, "", "%s holds '%s', not a CPU list",
		    shown(c, "sys/devices/system/cpu/isolated"), list);
	else if (iso >= c->shards)
		add(c, "cpu.isolated", HC_OK, "", "%d isolated core%s (%s) for %d shard%s: pin sluiced to them "
		    "(taskset, or CPUAffinity= in its unit)", iso, iso == 1 ? "" : "s", list, c->shards,
		    c->shards == 1 ? "" : "s");
	else
		add(c, "cpu.isolated", HC_WARN,
		    fmt("isolcpus=managed_irq,domain,%s nohz_full=%s rcu_nocbs=%s on the kernel command line "
			"(leave core 0 to the kernel), then CPUAffinity=%s in sluiced's unit", range, range, range,
			range),
		    "%d isolated core%s%s%s%s for %d shard%s: shards share their cores with the kernel's and other "
		    "processes' work, which shows in the p99", iso, iso == 1 ? "" : "s", iso ? " (" : "", iso ? list : "",
		    iso ? ")" : "", c->shards, c->shards == 1 ? "" : "s");
}

/* ---- NIC ------------------------------------------------------------------- */

static void check_nics(struct hc *c)
{
	struct host_nic nics[16];
	int n = host_nics(&c->h, nics, 16);

	if (n <= 0) {
		add(c, "nic.queues", HC_UNKNOWN, "", "no network interface backed by a device in %s%s",
		    shown(c, "sys/class/net"), n < 0 ? fmt(" (%s)", strerror(-n)) : "");
		add(c, "nic.irq", HC_UNKNOWN, "", "no NIC, so no queue IRQs to place");
		return;
	}
	for (int i = 0; i < n; i++) {
		const struct host_nic *nic = &nics[i];
		int q = nic->rx < nic->tx ? nic->rx : nic->tx, irq[64], nirq;
		char cpus[64][64];
		const char *what = fmt("%s (%s%s%s)", nic->name, nic->driver[0] ? nic->driver : "driver unknown",
				       nic->speed_mbps > 0 ? fmt(", %lld Mb/s", (long long)nic->speed_mbps) : "",
				       "");

		if (q >= c->shards)
			add(c, "nic.queues", HC_OK, "", "%s: %d RX and %d TX queues for %d shards", what, nic->rx, nic->tx,
			    c->shards);
		else
			add(c, "nic.queues", HC_WARN, fmt("ethtool -L %s combined %d (as many queue pairs as shards; "
							  "`ethtool -l %s` shows the most it takes)", nic->name,
							  c->shards, nic->name),
			    "%s: %d RX and %d TX queue%s for %d shards: receive-side scaling spreads the connections' "
			    "packets over %d core%s, and the shards on the others get theirs from another core's "
			    "softirq", what, nic->rx, nic->tx, nic->tx == 1 ? "" : "s", c->shards, q, q == 1 ? "" : "s");

		nirq = host_nic_irqs(&c->h, nic, irq, cpus, 64);
		if (nirq <= 0) {
			add(c, "nic.irq", HC_UNKNOWN, "", "%s: no IRQ named after it or its device (%s) in %s", nic->name,
			    nic->device, shown(c, "proc/interrupts"));
			continue;
		}
		bool same = true, single = true;
		char list[512] = "";
		size_t len = 0;

		for (int j = 0; j < nirq; j++) {
			bool one[HC_MAX_CPUS] = { false };

			single &= host_cpulist(cpus[j], one, HC_MAX_CPUS) == 1;   /* "?" (unreadable): not one */
			same &= !strcmp(cpus[j], cpus[0]);
			if (len < sizeof(list) - 40)
				len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d->%s", j ? " " : "", irq[j],
							cpus[j]);
		}
		if (nirq > 1 && same && single)
			add(c, "nic.irq", HC_WARN,
			    fmt("spread them, one queue's IRQ a core: for each IRQ N, echo CPU > "
				"/proc/irq/N/smp_affinity_list (or the driver's set_irq_affinity script; irqbalance "
				"--oneshot), keeping them off the shards' isolated cores"),
			    "%s: all %d queue IRQs on CPU %s (%s): that one core takes every packet's interrupt and "
			    "softirq", nic->name, nirq, cpus[0], list);
		else
			add(c, "nic.irq", HC_OK, "", "%s: %d queue IRQ%s (IRQ->CPUs: %s)", nic->name, nirq,
			    nirq == 1 ? "" : "s", list);
	}
}

/* ---- DPDK ------------------------------------------------------------------ */

/* bytes of hugepages reserved, of every size (sys/kernel/mm/hugepages/
 * hugepages-<N>kB/nr_hugepages), else meminfo's default size */
static int64_t hugepage_bytes(struct hc *c)
{
	char path[PATH_MAX];
	int64_t total = 0, nr, size;
	struct dirent *e;
	DIR *d = host_path(&c->h, "sys/kernel/mm/hugepages", path, sizeof(path)) == 0 ? opendir(path) : NULL;

	while (d && (e = readdir(d))) {
		long long kib;

		if (sscanf(e->d_name, "hugepages-%lldkB", &kib) == 1 &&
		    host_read_i64(&c->h, &nr, "sys/kernel/mm/hugepages/%s/nr_hugepages", e->d_name) == 0)
			total += nr * kib * 1024;
	}
	if (d)
		closedir(d);
	if (!total && host_meminfo(&c->h, "HugePages_Total", &nr) == 0 &&
	    host_meminfo(&c->h, "Hugepagesize", &size) == 0)
		total = nr * size * 1024;
	return total;
}

static void check_dpdk(struct hc *c)
{
	const char *eal = config_str(c->cfg, "dpdk.eal.args");
	char cmdline[4096] = "";
	int64_t huge = hugepage_bytes(c);
	bool no_huge = eal && strstr(eal, "--no-huge");
	int groups = 0;
	char path[PATH_MAX];

	if (!c->dpdk) {
		add(c, "dpdk.hugepages", HC_OK, "", "dpdk.enable=false: not needed (%lld MiB reserved)",
		    (long long)(huge >> 20));
		add(c, "dpdk.iommu", HC_OK, "", "dpdk.enable=false: not needed");
		return;
	}
	if (huge > 0)
		add(c, "dpdk.hugepages", HC_OK, "", "%lld MiB of hugepages reserved for the EAL", (long long)(huge >> 20));
	else if (no_huge)
		add(c, "dpdk.hugepages", HC_WARN, "echo 1024 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages "
		    "(hugepages=1024 on the kernel command line keeps them), then drop --no-huge",
		    "no hugepages, and dpdk.eal.args has --no-huge: the EAL runs on normal pages (TLB misses; a "
		    "physical NIC's DMA needs IOVA as VA through the IOMMU)");
	else
		add(c, "dpdk.hugepages", HC_FAIL, "echo 1024 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages "
		    "(2 GiB; hugepages=1024 on the kernel command line keeps them across reboots) and mount "
		    "hugetlbfs (/dev/hugepages)",
		    "dpdk.enable=true but no hugepages are reserved (%s, %s): the EAL cannot start, so the broker does "
		    "not", shown(c, "sys/kernel/mm/hugepages"), shown(c, "proc/meminfo"));

	if (host_path(&c->h, "sys/kernel/iommu_groups", path, sizeof(path)) == 0) {
		DIR *d = opendir(path);
		struct dirent *e;

		while (d && (e = readdir(d)))
			groups += e->d_name[0] != '.';
		if (d)
			closedir(d);
	}
	host_read(&c->h, cmdline, sizeof(cmdline), "proc/cmdline");
	if (groups)
		add(c, "dpdk.iommu", HC_OK, "", "%d IOMMU groups: vfio-pci can take the NIC", groups);
	else
		add(c, "dpdk.iommu", HC_WARN, "intel_iommu=on iommu=pt (AMD: amd_iommu=on iommu=pt) on the kernel "
		    "command line and reboot; without an IOMMU (a VM), vfio's enable_unsafe_noiommu_mode=1",
		    "no IOMMU groups in %s (kernel command line: %s): vfio-pci cannot bind a physical NIC safely",
		    shown(c, "sys/kernel/iommu_groups"), cmdline[0] ? cmdline : "unknown");
}

/* ---- the data disk ----------------------------------------------------------- */

/* the nearest existing directory at or above dir (real machine) */
static void existing_ancestor(const char *dir, char *out, size_t cap)
{
	struct stat st;

	snprintf(out, cap, "%s", dir);
	while (stat(out, &st) < 0) {
		char *slash = strrchr(out, '/');

		if (!slash || slash == out) {
			snprintf(out, cap, "/");
			return;
		}
		*slash = 0;
	}
}

/* Open a new file with O_DIRECT in dir and write one 4 KiB block: 0,
 * -EINVAL (the filesystem refuses O_DIRECT) or another -errno. */
static int odirect_probe(const char *dir)
{
	char path[PATH_MAX];
	void *buf = NULL;
	int fd, rc = 0;

	if (snprintf(path, sizeof(path), "%s/.sluicectl-host-check-XXXXXX", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = mkstemp(path);
	if (fd < 0)
		return -errno;
	close(fd);
	fd = open(path, O_WRONLY | O_DIRECT);
	if (fd < 0) {
		rc = -errno;
	} else {
		if (posix_memalign(&buf, 4096, 4096) == 0) {
			memset(buf, 0, 4096);
			if (pwrite(fd, buf, 4096, 0) != 4096)
				rc = -errno ? -errno : -EIO;
			free(buf);
		}
		close(fd);
	}
	unlink(path);
	return rc;
}

static void check_fs(struct hc *c, const char *dir, const struct host_mount *m)
{
	static const char *const refuse[] = { "tmpfs", "ramfs", "devtmpfs", "ecryptfs", "squashfs", "iso9660", NULL };
	static const char *const tested[] = { "ext4", "xfs", NULL };
	const char *name = "fs.odirect";
	bool bad = false, known = false;
	char probe_note[300] = "";
	int rc = 1;

	for (int i = 0; refuse[i]; i++)
		bad |= !strcmp(m->fstype, refuse[i]);
	for (int i = 0; tested[i]; i++)
		known |= !strcmp(m->fstype, tested[i]);
	if (c->real && !bad) {
		char at[PATH_MAX];

		existing_ancestor(dir, at, sizeof(at));
		rc = odirect_probe(at);
		if (rc == -EINVAL)
			snprintf(probe_note, sizeof(probe_note), "; a file opened in %.200s with O_DIRECT was refused (EINVAL)",
				 at);
		else if (rc < 0)
			snprintf(probe_note, sizeof(probe_note), "; O_DIRECT not tried: %.60s in %.200s", strerror(-rc), at);
		else
			snprintf(probe_note, sizeof(probe_note), "; a 4 KiB O_DIRECT write to a file in %.200s worked", at);
	}
	if (bad || rc == -EINVAL)
		add(c, name, HC_FAIL, "put log.dirs on an ext4 or XFS filesystem on the data disk (mkfs.xfs /dev/X; "
		    "mount -o noatime /dev/X /var/lib/sluice)",
		    "%s is on %s (%s mounted at %s)%s: the log opens its segments with O_DIRECT%s", dir, m->fstype,
		    m->source, m->point, probe_note,
		    !strcmp(m->fstype, "tmpfs") || !strcmp(m->fstype, "ramfs")
			    ? ", which this filesystem refuses (tmpfs before Linux 6.6), and memory is lost at reboot "
			      "with every acknowledged record"
			    : ", which this filesystem refuses");
	else if (host_opt_has(m->opts, "ro"))
		add(c, name, HC_FAIL, fmt("mount -o remount,rw %s", m->point),
		    "%s is on %s mounted read-only at %s: the broker cannot write", dir, m->fstype, m->point);
	else if (!strcmp(m->fstype, "ext4") && host_opt_has(m->opts, "data=journal"))
		add(c, name, HC_WARN, "mount it without data=journal (data=ordered, the default)",
		    "%s is on ext4 with data=journal at %s%s: ext4 then turns O_DIRECT writes into buffered ones "
		    "(every byte written twice, through the journal)", dir, m->point, probe_note);
	else if (!known)
		add(c, name, HC_WARN, "ext4 or XFS on a local disk is what Sluice is tested on",
		    "%s is on %s (%s at %s)%s: not ext4 or XFS; O_DIRECT and fdatasync's flush may not behave as "
		    "the log expects", dir, m->fstype, m->source, m->point, probe_note);
	else
		add(c, name, HC_OK, "", "%s is on %s (%s at %s, %s)%s", dir, m->fstype, m->source, m->point, m->opts,
		    probe_note);
}

static void check_device(struct hc *c, const struct host_mount *m, bool nobarrier)
{
	char blk[PATH_MAX], sched[256], cur[64], wc[64] = "", model[128] = "";
	int64_t rot = -1, fua = -1;
	int rc = m->major ? host_block_dir(&c->h, m->major, m->minor, blk, sizeof(blk)) : -ENODEV;
	const char *dur = durability_name[c->durability];

	if (rc < 0) {
		const char *why = fmt("no block device behind %s (%s, device %u:%u: %s)", m->point, m->fstype, m->major,
				      m->minor, strerror(-rc));

		add(c, "disk.scheduler", HC_UNKNOWN, "", "%s", why);
		add(c, "disk.durability", HC_UNKNOWN, "", "%s: what log.durability=%s promises depends on where the "
		    "writes land", why, dur);
		return;
	}
	host_read_i64(&c->h, &rot, "%s/queue/rotational", blk);
	host_read(&c->h, model, sizeof(model), "%s/device/model", blk);
	const char *dev = fmt("%s%s%s", strrchr(blk, '/') ? strrchr(blk, '/') + 1 : blk, model[0] ? " " : "", model);

	if (host_read(&c->h, sched, sizeof(sched), "%s/queue/scheduler", blk) < 0) {
		add(c, "disk.scheduler", HC_UNKNOWN, "", "%s: no %s", dev, shown(c, fmt("%s/queue/scheduler", blk)));
	} else {
		host_selected(sched, cur, sizeof(cur));
		bool good = rot == 1 ? strcmp(cur, "none") != 0 : (!strcmp(cur, "none") || !strcmp(cur, "mq-deadline") ||
								     !strcmp(cur, "kyber"));

		add(c, "disk.scheduler", good ? HC_OK : HC_WARN,
		    good ? "" : fmt("echo %s > /sys/%s/queue/scheduler (a udev rule keeps it)",
				    rot == 1 ? "mq-deadline" : "none", strchr(blk, '/') ? strchr(blk, '/') + 1 : blk),
		    "%s (%s): scheduler %s%s", dev, rot == 1 ? "rotational" : rot == 0 ? "solid state" : "rotation unknown",
		    cur, good ? "" : rot == 1 ? ": a disk that seeks needs its requests ordered"
					       : ": an SSD/NVMe wants none (or mq-deadline); this one costs CPU and "
						 "latency on each of the log's writes");
	}

	if (host_read(&c->h, wc, sizeof(wc), "%s/queue/write_cache", blk) < 0) {
		add(c, "disk.durability", HC_UNKNOWN, "", "%s: no %s: whether a flush is needed is not known", dev,
		    shown(c, fmt("%s/queue/write_cache", blk)));
		return;
	}
	host_read_i64(&c->h, &fua, "%s/queue/fua", blk);
	if (!strcmp(wc, "write through")) {
		add(c, "disk.durability", HC_OK, "",
		    "%s: write cache 'write through' (none volatile, or flushes turned off by writing that file): a "
		    "completed write is on the medium as far as the kernel knows, so log.durability=%s holds%s", dev, dur,
		    c->durability == 1 ? " without flushes" : "");
		return;
	}
	/* a volatile cache: what reaches it */
	if (nobarrier && c->durability == 1)
		add(c, "disk.durability", HC_FAIL, fmt("mount -o remount,barrier %s (drop nobarrier / barrier=0)",
						       m->point),
		    "%s: volatile write cache ('%s') and %s is mounted with %s: fdatasync and RWF_DSYNC send no "
		    "flush, so a write acknowledged under log.durability=sync sits in the cache and a power loss "
		    "loses it", dev, wc, m->point, host_opt_has(m->opts, "nobarrier") ? "nobarrier" : "barrier=0");
	else if (nobarrier)
		add(c, "disk.durability", HC_WARN, fmt("mount -o remount,barrier %s", m->point),
		    "%s: volatile write cache and %s mounted with nobarrier: no flush ever reaches the disk; "
		    "log.durability=%s promises no power-loss safety anyway, but a switch to sync would not hold",
		    dev, m->point, dur);
	else if (c->durability == 1 && fua != 1)
		add(c, "disk.durability", HC_WARN,
		    "a disk with power-loss protection (its cache is then not volatile: 'write through') or with "
		    "FUA; on a VM, a virtual disk whose host honours flushes (not cache=unsafe)",
		    "%s: volatile write cache ('%s') without FUA (queue/fua %lld): each RWF_DSYNC write of "
		    "log.durability=sync is followed by a flush of the whole cache, so synced writes are slow "
		    "(sync_write_us), and the promise holds only if the device honours the flush", dev, wc,
		    (long long)fua);
	else if (c->durability == 1)
		add(c, "disk.durability", HC_OK, "",
		    "%s: volatile write cache with FUA: log.durability=sync's RWF_DSYNC writes go to the medium "
		    "(FUA) before they are acknowledged: power-loss safe", dev);
	else
		add(c, "disk.durability", HC_OK, c->durability == 0 ? "log.durability=sync for power-loss safety" : "",
		    "%s: volatile write cache ('%s', FUA %s): log.durability=%s acknowledges %s; %s", dev, wc,
		    fua == 1 ? "yes" : fua == 0 ? "no" : "unknown", dur,
		    c->durability == 0 ? "a write the device took, which may sit in that cache"
				       : "a write still in the broker's memory",
		    c->durability == 0 ? "it survives a broker crash, not a power loss"
				       : "it survives neither a crash nor a power loss (as documented)");
}

static void check_disks(struct hc *c)
{
	for (int i = 0; i < c->ndirs; i++) {
		struct host_mount m;
		int rc = host_mount_of(&c->h, c->dirs[i], &m);

		if (rc < 0) {
			const char *why = fmt("no mount holds %s in %s (%s)", c->dirs[i], shown(c, "proc/self/mountinfo"),
					      strerror(-rc));

			add(c, "fs.odirect", HC_UNKNOWN, "", "%s", why);
			add(c, "disk.scheduler", HC_UNKNOWN, "", "%s", why);
			add(c, "disk.durability", HC_UNKNOWN, "", "%s", why);
			continue;
		}
		check_fs(c, c->dirs[i], &m);
		check_device(c, &m, host_opt_has(m.opts, "nobarrier") || host_opt_has(m.opts, "barrier=0"));
	}
}

/* ---- memory ------------------------------------------------------------------- */

static void check_memory(struct hc *c)
{
	char thp[128], cur[32];
	int64_t swap = 0, sw;

	if (host_read(&c->h, thp, sizeof(thp), "sys/kernel/mm/transparent_hugepage/enabled") < 0) {
		add(c, "mm.thp", HC_UNKNOWN, "", "no %s (a kernel without THP)",
		    shown(c, "sys/kernel/mm/transparent_hugepage/enabled"));
	} else {
		host_selected(thp, cur, sizeof(cur));
		if (!strcmp(cur, "always"))
			add(c, "mm.thp", HC_WARN, "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled "
			    "(transparent_hugepage=madvise on the kernel command line keeps it)",
			    "transparent huge pages 'always': khugepaged and compaction stall the shards' threads at "
			    "random (latency spikes of milliseconds)");
		else
			add(c, "mm.thp", HC_OK, "", "transparent huge pages '%s'", cur);
	}
	host_meminfo(&c->h, "SwapTotal", &swap);
	if (host_read_i64(&c->h, &sw, "proc/sys/vm/swappiness") < 0)
		add(c, "mm.swappiness", HC_UNKNOWN, "", "%s cannot be read", shown(c, "proc/sys/vm/swappiness"));
	else if (sw > 10 && swap > 0)
		add(c, "mm.swappiness", HC_WARN, "sysctl -w vm.swappiness=1 (and vm.swappiness=1 in "
		    "/etc/sysctl.d/60-sluice.conf)",
		    "vm.swappiness %lld with %lld MiB of swap: the kernel swaps the broker's tail memory out to keep "
		    "page cache, and a read of it then waits for the disk", (long long)sw, (long long)(swap >> 10));
	else
		add(c, "mm.swappiness", HC_OK, "", "vm.swappiness %lld, %lld MiB of swap%s", (long long)sw,
		    (long long)(swap >> 10), swap ? "" : " (none: swappiness does not matter)");
}

/* ---- limits ------------------------------------------------------------------- */

static void check_limits(struct hc *c)
{
	static const char *const names[] = { "sluiced", NULL };
	int which, pid = host_find_process(&c->h, names, &which);
	int64_t soft, hard, parts = 0, conns = config_int(c->cfg, "max.connections");
	const char *whose = pid > 0 ? fmt("the running sluiced's (pid %d)", pid)
			    : c->real ? "this shell's (a sluiced started by systemd has its unit's Limit*= instead)"
				      : "the tree's (proc/self/limits)";
	int rc;

	for (int i = 0; i < c->ndirs; i++) {
		char path[PATH_MAX];
		int n;

		if (c->real)
			snprintf(path, sizeof(path), "%s", c->dirs[i]);
		else
			host_path(&c->h, c->dirs[i], path, sizeof(path));
		if ((n = host_count_partitions(path)) > 0)
			parts += n;
	}
	rc = host_limit(&c->h, pid > 0 ? pid : 0, "Max open files", &soft, &hard);
	if (rc < 0) {
		add(c, "limits.nofile", HC_UNKNOWN, "", "%s cannot be read (%s)", shown(c, "proc/self/limits"),
		    strerror(-rc));
	} else {
		/* one a partition (its active segment), connections when bounded,
		 * and the broker's reserve for segments, files and sockets */
		int64_t bounded = conns < INT32_MAX ? conns : 0;
		int64_t need = parts + bounded + (soft < 0 ? 0 : fd_reserve(soft));
		const char *fix = "LimitNOFILE=1048576 in sluiced's unit (ulimit -n 1048576 in the shell that starts it; "
				  "nofile in /etc/security/limits.conf)";

		if (soft >= 0 && soft < need)
			add(c, "limits.nofile", HC_FAIL, fix,
			    "%s fd limit is %lld, below the %lld the broker needs: %lld partitions in log.dirs, %s, and "
			    "%lld kept in reserve: it cannot open them all", whose, (long long)soft, (long long)need,
			    (long long)parts, bounded ? fmt("max.connections %lld", (long long)bounded) : "no connections counted (max.connections unbounded)",
			    (long long)fd_reserve(soft));
		else if (soft >= 0 && soft < 65536)
			add(c, "limits.nofile", HC_WARN, fix,
			    "%s fd limit is %lld: room for %lld partitions and connections beyond the %lld partitions "
			    "there are now; the broker refuses topics beyond it (INVALID_PARTITIONS)", whose,
			    (long long)soft, (long long)(soft - need), (long long)parts);
		else
			add(c, "limits.nofile", HC_OK, "", "%s fd limit is %s (%lld partitions in log.dirs)", whose,
			    soft < 0 ? "unlimited" : fmt("%lld", (long long)soft), (long long)parts);
	}

	rc = host_limit(&c->h, pid > 0 ? pid : 0, "Max locked memory", &soft, &hard);
	if (rc < 0) {
		add(c, "limits.memlock", HC_UNKNOWN, "", "%s cannot be read (%s)", shown(c, "proc/self/limits"),
		    strerror(-rc));
		return;
	}
	if (!c->dpdk) {
		add(c, "limits.memlock", HC_OK, "", "%s locked-memory limit is %s; io_uring (Linux 5.12 on) and a "
		    "broker without DPDK lock none", whose, soft < 0 ? "unlimited" : fmt("%lld KiB", (long long)(soft >> 10)));
		return;
	}
	int64_t huge = hugepage_bytes(c), need = huge > (64 << 20) ? huge : (64 << 20);

	if (soft >= 0 && soft < need)
		add(c, "limits.memlock", HC_FAIL, "LimitMEMLOCK=infinity in sluiced's unit (ulimit -l unlimited; memlock "
		    "in /etc/security/limits.conf)",
		    "dpdk.enable=true and %s locked-memory limit is %lld KiB, below the %lld MiB the EAL pins (the "
		    "hugepages, at least 64 MiB): vfio's DMA mapping fails and the broker does not start", whose,
		    (long long)(soft >> 10), (long long)(need >> 20));
	else
		add(c, "limits.memlock", HC_OK, "", "dpdk.enable=true and %s locked-memory limit is %s", whose,
		    soft < 0 ? "unlimited" : fmt("%lld KiB", (long long)(soft >> 10)));
}

/* ---- the clock ---------------------------------------------------------------- */

static void check_clock(struct hc *c)
{
	static const char *const daemons[] = { "chronyd", "ntpd", "systemd-timesyn", "ptp4l", "phc2sys", "openntpd",
					       "timemaster", NULL };
	int which = -1, pid = host_find_process(&c->h, daemons, &which);
	const char *fix = "apt install chrony && systemctl enable --now chrony";
	const char *d = pid > 0 ? fmt("%s (pid %d)", daemons[which], pid) : "no time daemon (chronyd, ntpd, "
				  "systemd-timesyncd, ptp4l) running";

	if (c->real) {
		struct timex tx = { 0 };
		int st = adjtimex(&tx);

		if (st == TIME_ERROR || (tx.status & STA_UNSYNC))
			add(c, "clock.sync", HC_WARN, fix,
			    "the kernel's clock is not synchronised (adjtimex: STA_UNSYNC); %s: record timestamps "
			    "(LogAppendTime), time retention and ListOffsets by time drift from the other brokers' and "
			    "the clients'", d);
		else
			add(c, "clock.sync", HC_OK, "", "the kernel's clock is synchronised (estimated error %ld us); %s",
			    tx.esterror, d);
		return;
	}
	if (pid > 0)
		add(c, "clock.sync", HC_OK, "", "%s; the sync state itself is read only on the running machine "
		    "(not under --root)", d);
	else
		add(c, "clock.sync", HC_WARN, fix, "%s in %s: the clock drifts, and with it record timestamps and "
		    "time retention", d, shown(c, "proc"));
}

/* ---- the hardware profile ------------------------------------------------------ */

/* the host's own numbers where it tells them (the rest from the profile) */
static void host_numbers(struct hc *c, struct hw_profile *host)
{
	struct host_nic nics[16];
	int64_t kib, mhz;
	int n;

	memset(host, 0, sizeof(*host));
	snprintf(host->description, sizeof(host->description), "this host");
	host->v[HW_CORES] = c->online;
	host->has[HW_CORES] = c->online > 0;
	if (host_meminfo(&c->h, "MemTotal", &kib) == 0) {
		host->v[HW_MEMORY_GIB] = kib / 1048576.0;
		host->has[HW_MEMORY_GIB] = 1;
	}
	if (host_read_i64(&c->h, &mhz, "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") == 0) {
		host->v[HW_CLOCK_GHZ] = mhz / 1e6;
		host->has[HW_CLOCK_GHZ] = 1;
	}
	n = host_nics(&c->h, nics, 16);
	for (int i = 0; i < n; i++) {
		int q = nics[i].rx < nics[i].tx ? nics[i].rx : nics[i].tx;

		if (nics[i].speed_mbps > 0 && nics[i].speed_mbps / 1000.0 > host->v[HW_NIC_GBPS]) {
			host->v[HW_NIC_GBPS] = nics[i].speed_mbps / 1000.0;
			host->has[HW_NIC_GBPS] = 1;
		}
		if (q > host->v[HW_NIC_QUEUES]) {
			host->v[HW_NIC_QUEUES] = q;
			host->has[HW_NIC_QUEUES] = 1;
		}
	}
	/* the data disk's size: only on the running machine (a --root tree's
	 * files sit on whatever disk holds the tree) */
	if (c->ndirs && c->real) {
		char at[PATH_MAX];
		struct statvfs sv;

		existing_ancestor(c->dirs[0], at, sizeof(at));
		if (statvfs(at, &sv) == 0 && sv.f_blocks) {
			host->v[HW_DISK_GIB] = (double)sv.f_blocks * sv.f_frsize / 1073741824.0;
			host->has[HW_DISK_GIB] = 1;
		}
	}
}

/* With a suite run's costs (--results): the capacity planner's own answer
 * (bench/capacity.c) for servers like this host, at a rate that takes many
 * of them, so that what binds is what grows with the rate, CPU included. */
#define HC_PLAN_RATE 1e6

static void check_plan(struct hc *c, const struct hw_profile *host, int64_t repl, int64_t ret_ms)
{
	struct cap_workload w;
	struct cap_plan *p = calloc(1, sizeof(*p));
	char err[512], order[600] = "";
	size_t len = 0;
	bool done[CAP_NRES] = { false };

	if (!p) {
		add(c, "profile.plan", HC_UNKNOWN, "", "out of memory");
		return;
	}
	cap_workload_defaults(&w);
	w.rate = HC_PLAN_RATE;
	w.replication = (int)repl;
	w.sync = c->durability == 1;
	if (ret_ms > 0)
		w.retention_s = ret_ms / 1000.0;
	if (cap_plan(c->cal, host, &w, p, err, sizeof(err)) < 0) {
		add(c, "profile.plan", HC_UNKNOWN, "", "the capacity planner could not plan with %s: %s",
		    c->cal->source, err);
		free(p);
		return;
	}
	/* the resources by how much of them the plan uses, the binding first */
	for (int k = 0; k < CAP_NRES; k++) {
		int best = -1;

		for (int r = 0; r < CAP_NRES; r++)
			if (!done[r] && !isnan(p->use[r].util) && (best < 0 || p->use[r].util > p->use[best].util))
				best = r;
		if (best < 0)
			break;
		done[best] = true;
		if (len < sizeof(order) - 40)
			len += (size_t)snprintf(order + len, sizeof(order) - len, "%s%s %.*f %%", k ? ", " : "",
						cap_res_name[best], p->use[best].util < 0.01 ? 2 : 0,
						p->use[best].util * 100);
	}
	add(c, "profile.plan", HC_OK, "",
	    "%s binds first with the costs of %s: %.0fk records/s of %.0f bytes (replication factor %d, "
	    "retention %.0f h) take %d servers like this one, each using %s (sluicectl capacity plan "
	    "for your workload)",
	    cap_res_name[p->binding], c->cal->source, HC_PLAN_RATE / 1e3, w.record_bytes, w.replication,
	    w.retention_s / 3600, p->servers, order);
	free(p);
}

static void check_profile(struct hc *c)
{
	static const enum hw_key cmp[] = { HW_CORES, HW_CLOCK_GHZ, HW_MEMORY_GIB, HW_NIC_GBPS, HW_NIC_QUEUES,
					   HW_DISK_GIB };
	struct hw_profile host;
	char short_of[600] = "", *p = short_of;
	int64_t repl = config_int(c->cfg, "default.replication.factor");
	int64_t ret_ms = config_int(c->cfg, "log.retention.ms");
	double disk, nic, space_rate = NAN, best;
	const char *binds;

	if (!c->has_prof) {
		add(c, "profile", HC_UNKNOWN, "", "%s", c->prof_why);
		return;
	}
	host_numbers(c, &host);
	for (size_t i = 0; i < sizeof(cmp) / sizeof(cmp[0]); i++) {
		enum hw_key k = cmp[i];

		if (!host.has[k] || !c->prof.has[k] || host.v[k] >= 0.9 * c->prof.v[k])
			continue;
		p += snprintf(p, sizeof(short_of) - (size_t)(p - short_of), "%s%s %.3g (the profile %.3g)",
			      p == short_of ? "" : ", ", hw_key_name[k], host.v[k], c->prof.v[k]);
		if (p >= short_of + sizeof(short_of) - 60)
			break;
	}
	/* the measured rates the host cannot tell: the profile's */
	for (int k = 0; k < HW_NKEYS; k++)
		if (!host.has[k] && c->prof.has[k]) {
			host.v[k] = c->prof.v[k];
			host.has[k] = 1;
		}
	if (short_of[0])
		add(c, "profile", HC_WARN, "measure this host (make hwprobe writes hw-profiles/local.conf) and plan with "
		    "that (sluicectl capacity plan --profile hw-profiles/local.conf)",
		    "this host has less than %s (%s) says: %s; a capacity plan made with that profile overstates it",
		    c->prof_path, c->prof.description, short_of);
	else
		add(c, "profile", HC_OK, "", "this host has what %s (%s) says, or more, where it can tell "
		    "(cores, clock, memory, NIC, disk size)", c->prof_path, c->prof.description);

	/* Which binds first as the cluster's write rate grows (bench/capacity.c's
	 * resources and units): every produced byte is written to disk and
	 * received over the NIC replication-factor times across the cluster
	 * (and sent as often: the followers' copies and one consumer group), so
	 * a server's disk write and NIC carry the same bytes; disk space binds
	 * when the disk fills before log.retention.ms deletes. CPU needs a
	 * suite run's costs: sluicectl capacity plan. */
	disk = host.has[HW_DISK_WRITE_MBPS] ? host.v[HW_DISK_WRITE_MBPS] : NAN;
	nic = host.has[HW_NIC_GBPS] ? host.v[HW_NIC_GBPS] * 125.0 : NAN;
	if (host.has[HW_DISK_GIB] && ret_ms > 0)
		space_rate = host.v[HW_DISK_GIB] * 1073.741824 / (ret_ms / 1000.0);
	best = INFINITY;
	binds = NULL;
	if (!isnan(disk) && disk < best)
		best = disk, binds = "disk write";
	if (!isnan(nic) && nic < best)
		best = nic, binds = "nic in";
	if (!isnan(space_rate) && space_rate < best)
		best = space_rate, binds = "disk space";
	if (!binds) {
		add(c, "profile.binding", HC_UNKNOWN, "", "neither disk_write_mbps nor nic_gbps is known (of this host "
		    "or %s), nor disk space: nothing to compare", c->prof_path);
		return;
	}
	add(c, "profile.binding", HC_OK, "",
	    "%s binds first%s: a server takes at most %s MB/s of writes (its share of every replica: with "
	    "replication factor %lld a produced MB is %lld MB across the cluster); disk write allows %s MB/s, the "
	    "NIC %s MB/s, and the disk (%s GiB) holds log.retention.ms (%s) of %s MB/s.%s",
	    binds, c->cal ? " (of disk and NIC)" : "", best < 10 ? fmt("%.2f", best) : fmt("%.0f", best), (long long)repl, (long long)repl,
	    isnan(disk) ? "unknown" : fmt("%.0f", disk), isnan(nic) ? "unknown" : fmt("%.0f", nic),
	    host.has[HW_DISK_GIB] ? fmt("%.0f", host.v[HW_DISK_GIB]) : "unknown",
	    ret_ms > 0 ? fmt("%.0f h", ret_ms / 3.6e6) : "forever",
	    isnan(space_rate) ? "any" : space_rate < 10 ? fmt("%.2f", space_rate) : fmt("%.0f", space_rate),
	    c->cal ? "" : " CPU is not compared without a suite run's costs (--results)");
	if (c->cal)
		check_plan(c, &host, repl, ret_ms);
}

/* ---- the command --------------------------------------------------------------- */

/* --profile NAME|FILE, else hardware.profile, else hw-profiles/local.conf
 * of the checkout the program was built in, or of its installed share */
static int load_profile(struct hc *c, const char *arg)
{
	char exe[PATH_MAX], err[512];
	const char *cfgp = config_str(c->cfg, "hardware.profile");
	const char *want = arg ? arg : cfgp && *cfgp ? cfgp : "local";
	bool explicit = arg || (cfgp && *cfgp);
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char dir[PATH_MAX] = ".";
	int rc;

	if (n > 0) {
		exe[n] = 0;
		if (strrchr(exe, '/'))
			*strrchr(exe, '/') = 0;
		snprintf(dir, sizeof(dir), "%s", exe);
	}
	/* build/sluicectl and build/san/sluicectl in a checkout; an install's share */
	const char *cands[] = { want, fmt("%s/../hw-profiles/%s.conf", dir, want),
				fmt("%s/../../hw-profiles/%s.conf", dir, want),
				fmt("%s/../share/sluice/hw-profiles/%s.conf", dir, want),
				fmt("/usr/share/sluice/hw-profiles/%s.conf", want), NULL };

	for (int i = 0; cands[i]; i++) {
		if (access(cands[i], R_OK) < 0 || (i == 0 && !strchr(want, '/') && !strstr(want, ".conf")))
			continue;
		rc = hw_profile_load(cands[i], &c->prof, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "sluicectl: host check: profile: %s\n", err);
			return EXIT_USAGE;
		}
		if (!realpath(cands[i], c->prof_path))
			snprintf(c->prof_path, sizeof(c->prof_path), "%s", cands[i]);
		c->has_prof = true;
		return 0;
	}
	if (explicit) {
		fprintf(stderr, "sluicectl: host check: no hardware profile '%s' (a file, or a name of hw-profiles/: "
			"kafka-2014, commodity-2026, bare-metal-high-end, local)\n", want);
		return EXIT_USAGE;
	}
	snprintf(c->prof_why, sizeof(c->prof_why), "no hardware profile: no --profile, no hardware.profile in the "
		 "config, and no hw-profiles/local.conf (make hwprobe measures this host and writes it)");
	return 0;
}

static int setup(struct hc *c, struct ctl *ctl, const struct args *a)
{
	const char *vals[64], *v;
	char err[1024], list[4096], cwd[PATH_MAX];
	int n, rc;
	int64_t shards;

	if (config_create(&c->cfg) < 0)
		return ctl_fail(ctl, "out of memory");
	if ((v = opt_get(a, "config")) && config_load_file(c->cfg, v, err, sizeof(err)) < 0)
		return ctl_usage(ctl, "--config: %s", err);
	n = opt_all(a, "set", vals, 64);
	for (int i = 0; i < n; i++)
		if (config_set_arg(c->cfg, vals[i], err, sizeof(err)) < 0)
			return ctl_usage(ctl, "--set: %s", err);
	host_probe_init(&c->h, opt_get(a, "root"));
	c->real = !c->h.root[0];
	if (!c->real) {
		struct stat st;

		if (stat(c->h.root, &st) < 0 || !S_ISDIR(st.st_mode))
			return ctl_usage(ctl, "--root %s: not a directory", c->h.root);
	}
	c->durability = (int)config_int(c->cfg, "log.durability");
	c->dpdk = config_int(c->cfg, "dpdk.enable") != 0;
	if (host_read(&c->h, list, sizeof(list), "sys/devices/system/cpu/online") >= 0)
		c->online = host_cpulist(list, NULL, 0);
	if (c->online <= 0)
		c->online = c->real ? (int)sysconf(_SC_NPROCESSORS_ONLN) : 1;
	shards = config_int(c->cfg, "shards");
	c->shards_auto = shards == 0;
	c->shards = shards ? (int)shards : c->online;
	/* log.dirs, made absolute as sluiced (started here) would see them */
	snprintf(list, sizeof(list), "%s", config_str(c->cfg, "log.dirs"));
	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), "/");
	for (char *save = NULL, *d = strtok_r(list, ",", &save); d && c->ndirs < HC_MAX_DIRS;
	     d = strtok_r(NULL, ",", &save)) {
		char *dir = c->dirs[c->ndirs++];
		size_t len;

		while (*d == ' ')
			d++;
		if (d[0] != '/')
			len = (size_t)snprintf(dir, PATH_MAX, "%s/", cwd);
		else
			len = 0;
		if (len + strlen(d) >= PATH_MAX)
			return ctl_usage(ctl, "log.dirs: '%s' is too long a path", d);
		memcpy(dir + len, d[0] == '.' && d[1] == '/' ? d + 2 : d, strlen(d) + 1 - (d[0] == '.' && d[1] == '/' ? 2 : 0));
		len = strlen(dir);
		while (len > 1 && (dir[len - 1] == '/' || dir[len - 1] == ' '))
			dir[--len] = 0;
		if (c->real) {
			char real[PATH_MAX];

			if (realpath(dir, real))
				snprintf(dir, PATH_MAX, "%s", real);
		}
	}
	if ((rc = load_profile(c, opt_get(a, "profile"))))
		return rc;
	if ((v = opt_get(a, "results"))) {
		if (!(c->cal = malloc(sizeof(*c->cal))))
			return ctl_fail(ctl, "out of memory");
		if (cap_calib_load(v, c->cal, err, sizeof(err)) < 0)
			return ctl_usage(ctl, "--results: %s", err);
	}
	return 0;
}

static void report_json(const struct hc *c, int worst)
{
	json_obj_begin(NULL);
	json_str("root", c->real ? "/" : c->h.root);
	json_int("shards", c->shards);
	json_str("durability", durability_name[c->durability]);
	json_bool("dpdk", c->dpdk);
	json_arr_begin("log_dirs");
	for (int i = 0; i < c->ndirs; i++)
		json_str(NULL, c->dirs[i]);
	json_arr_end();
	json_str("profile", c->has_prof ? c->prof_path : NULL);
	json_arr_begin("findings");
	for (int i = 0; i < c->n; i++) {
		json_obj_begin(NULL);
		json_str("name", c->f[i].name);
		json_str("status", hc_status_name[c->f[i].status]);
		json_str("seen", c->f[i].seen);
		json_str("fix", c->f[i].fix[0] ? c->f[i].fix : NULL);
		json_obj_end();
	}
	json_arr_end();
	json_str("result", worst == HC_FAIL ? "fail" : "ok");
	json_obj_end();
	json_end();
}

static void report_text(const struct hc *c)
{
	int count[4] = { 0 };

	printf("host check of %s: %d shard%s, log.durability=%s, dpdk %s, log.dirs %s", c->real ? "this machine"
	       : c->h.root, c->shards, c->shards == 1 ? "" : "s", durability_name[c->durability], c->dpdk ? "on" : "off",
	       c->ndirs ? c->dirs[0] : "-");
	for (int i = 1; i < c->ndirs; i++)
		printf(",%s", c->dirs[i]);
	printf("\n");
	/* the failures first, then warnings, unknowns and what is fine */
	static const int order[] = { HC_FAIL, HC_WARN, HC_UNKNOWN, HC_OK };

	for (int o = 0; o < 4; o++)
		for (int i = 0; i < c->n; i++) {
			const struct hc_finding *f = &c->f[i];

			if (f->status != order[o])
				continue;
			count[f->status]++;
			printf("%-7s %-16s ", hc_status_name[f->status], f->name);
			wrap(stdout, 25, 25, f->seen);
			if (f->fix[0] && f->status != HC_OK) {
				printf("%-25s", "");
				wrap(stdout, 25, 30, fmt("fix: %s", f->fix));
			}
		}
	printf("%d fail, %d warn, %d unknown, %d ok: %s\n", count[HC_FAIL], count[HC_WARN], count[HC_UNKNOWN],
	       count[HC_OK], count[HC_FAIL] ? "something here breaks a promise of the broker (exit 1)"
					    : "nothing here breaks a promise of the broker");
}

static int cmd_host_check(struct ctl *ctl, const struct args *a)
{
	struct hc *c = calloc(1, sizeof(*c));
	int rc, worst = HC_OK;

	if (!c)
		return ctl_fail(ctl, "out of memory");
	if (a->npos) {
		free(c);
		return ctl_usage(ctl, "unexpected argument '%s'", a->pos[0]);
	}
	if ((rc = setup(c, ctl, a)) == 0) {
		check_governor(c);
		check_idle(c);
		check_cores(c);
		check_nics(c);
		check_dpdk(c);
		check_disks(c);
		check_memory(c);
		check_limits(c);
		check_clock(c);
		check_profile(c);
		for (int i = 0; i < c->n; i++)
			if (c->f[i].status == HC_FAIL)
				worst = HC_FAIL;
		if (ctl->json)
			report_json(c, worst);
		else
			report_text(c);
		rc = worst == HC_FAIL ? 1 : 0;
	}
	if (c->cfg)
		config_destroy(c->cfg);
	free(c->cal);
	free(c);
	return rc;
}

static const struct opt_spec check_opts[] = {
	{ "config", 0, "FILE", "the broker's config file (sluiced --config's): log.dirs, shards, log.durability, "
	  "dpdk.enable, max.connections, hardware.profile (default: the broker's defaults)" },
	{ "set", 0, "KEY=VALUE", "a config key on top of the file, as sluiced --set takes it (repeatable)" },
	{ "profile", 0, "NAME|FILE", "the hardware profile to hold the host against: a file, or a name in "
	  "hw-profiles/ (commodity-2026, local, ...) (default: hardware.profile, then hw-profiles/local.conf)" },
	{ "results", 0, "FILE", "a `sluice-bench suite` run's results.json: with its costs the capacity planner "
	  "says which resource binds first on servers like this one, CPU included (docs/capacity.md)" },
	{ "root", 0, "DIR", "read proc/ and sys/ (mountinfo, limits, ...) under DIR instead of / (for a copy or a "
	  "test's fake tree; the clock's sync state and the O_DIRECT write are then not tried)" },
	{ NULL, 0, NULL, NULL },
};

const struct cmd host_cmds[] = {
	{ "host", "check", "", "run on the server: what on this host will hurt the broker (CPU governor and idle "
	  "states, isolated cores, NIC queues and IRQs, hugepages and IOMMU for DPDK, the data disk's scheduler, "
	  "write cache and filesystem, THP, swappiness, fd and memlock limits, clock sync, the hardware profile), "
	  "each with its fix; no broker needed (exit 0 nothing broken, 1 a promise broken, 2 bad input)",
	  check_opts,
	  "sluicectl host check\n"
	  "sluicectl host check --config /etc/sluice/sluiced.properties --profile commodity-2026\n"
	  "sluicectl host check --set log.durability=sync --format json",
	  cmd_host_check },
};

const int host_ncmds = sizeof host_cmds / sizeof host_cmds[0];
