/* bench/emulate.c — sluice-bench suite --emulate PROFILE: the broker's
 * network namespace, its shaped veth pair and its disk cgroup (see
 * emulate.h for what the suite gets).
 *
 * The network part runs iproute2 (ip, tc) as child processes, fork/execv
 * with an argument vector (no shell), their output captured for the error
 * message; it is what an operator would type, and easy to check by hand
 * with `ip netns exec` / `tc -s qdisc`. The disk part writes cgroupfs files
 * itself: cgroup v2 io.max when the io controller is in the v2 hierarchy,
 * else the v1 blkio throttle when blkio is mounted as a v1 hierarchy (the
 * hybrid layout, where v2 cannot have it), else nothing and a note.
 *
 * Thread: the suite's main thread (fork, waitpid, mount).
 * Errors: helpers return 0 or -errno; run() also a positive exit status.
 */
#include "bench/emulate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EM_PREFIX   "sluice-em-"
#define NETNS_DIR   "/var/run/netns"
#define CG2_PRIVATE "/run/" EM_PREFIX "%d.cgroup2"

/* snprintf that gcc does not second-guess: -Wformat-truncation cannot see
 * that paths and messages here are short, and a cut message is harmless. */
__attribute__((format(printf, 3, 4)))
static int fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	int n;

	va_start(ap, f);
	n = vsnprintf(buf, len, f, ap);
	va_end(ap);
	return n;
}

/* ---- child processes ---- */

/* iproute2 lives in /usr/sbin or /sbin, which a root shell's PATH may lack
 * under sudo or cron: look there first, then let execvp search PATH. */
static const char *tool(const char *name)
{
	static const char *const dirs[] = { "/usr/sbin", "/sbin", "/usr/bin", "/bin" };
	static char path[64];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		fmt(path, sizeof(path), "%s/%s", dirs[i], name);
		if (access(path, X_OK) == 0)
			return path;
	}
	return name;
}

/* Run argv (argv[0] a tool name) with stdout and stderr into out (trimmed,
 * NUL-terminated). 0 when it exits 0, its exit status (128 + signal when
 * killed), or -errno when it cannot be started. */
static int run(const char *const argv[], char *out, size_t outlen)
{
	char exe[64];
	int pfd[2], st = 0;
	size_t have = 0;
	pid_t pid;

	out[0] = 0;
	fmt(exe, sizeof(exe), "%s", tool(argv[0]));
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(pfd[0]);
		close(pfd[1]);
		return -e;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);

		if (nul >= 0)
			dup2(nul, 0);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		execvp(exe, (char *const *)argv);
		dprintf(2, "cannot run %s: %s", exe, strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		char tmp[512];
		ssize_t n = read(pfd[0], tmp, sizeof(tmp));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && have + 1 < outlen; i++)
			out[have++] = tmp[i] == '\n' ? ' ' : tmp[i];
	}
	close(pfd[0]);
	while (have > 0 && out[have - 1] == ' ')
		have--;
	out[have] = 0;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* iproute2 reports the kernel's error as text: map the usual ones back. */
static int errno_of(const char *out, int status)
{
	if (status < 0)
		return status;
	if (strstr(out, "Operation not permitted"))
		return -EPERM;
	if (strstr(out, "File exists"))
		return -EEXIST;
	if (strstr(out, "No such file or directory") || strstr(out, "Cannot find device"))
		return -ENOENT;
	if (strstr(out, "cannot run"))
		return -ENOENT;
	return -EIO;
}

/* Run argv; on failure fill err with the command line and its output and
 * return -errno. */
static int cmd(const char *const argv[], char *err, size_t errlen)
{
	char out[512], line[256];
	size_t at = 0;
	int rc = run(argv, out, sizeof(out));

	if (rc == 0)
		return 0;
	line[0] = 0;
	for (int i = 0; argv[i] && at < sizeof(line); i++)
		at += (size_t)fmt(line + at, sizeof(line) - at, "%s%s", i ? " " : "", argv[i]);
	if (rc < 0)
		fmt(err, errlen, "emulate: `%s` could not start: %s", line, strerror(-rc));
	else
		fmt(err, errlen, "emulate: `%s` failed (exit %d): %s", line, rc, out[0] ? out : "no output");
	return errno_of(out, rc);
}

/* Run argv, ignoring the outcome (teardown, stale cleanup). */
static void cmd_quiet(const char *const argv[])
{
	char out[256];

	(void)run(argv, out, sizeof(out));
}

/* ---- small file helpers ---- */

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	if (n < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	close(fd);
	return (size_t)n == strlen(text) ? 0 : -EIO;
}

/* The file's first len - 1 bytes, newlines turned to spaces and the end
 * trimmed. 0 or -errno. */
static int read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	buf[0] = 0;
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\n')
			buf[i] = ' ';
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = 0;
	return 0;
}

/* 1 if the space-separated list has the word. */
static int has_word(const char *list, const char *word, char sep)
{
	size_t wl = strlen(word);

	for (const char *p = list; *p;) {
		const char *e = strchr(p, sep);
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == wl && memcmp(p, word, wl) == 0)
			return 1;
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

static void note(struct emulation *em, const char *fmt, ...)
{
	size_t at = strlen(em->notes);
	va_list ap;

	if (at && at + 1 < sizeof(em->notes))
		em->notes[at++] = ' ';
	em->notes[at] = 0;
	va_start(ap, fmt);
	vsnprintf(em->notes + at, sizeof(em->notes) - at, fmt, ap);
	va_end(ap);
}

/* 1 while the process that named a leftover may still be running. */
static int pid_alive(int pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* The pid in "sluice-em-PID" + suffix, or 0 when name is not one. */
static int em_pid(const char *name, const char *suffix)
{
	char tail[32];
	int pid = 0, n = 0;

	if (strncmp(name, EM_PREFIX, strlen(EM_PREFIX)) != 0)
		return 0;
	if (sscanf(name + strlen(EM_PREFIX), "%d%n", &pid, &n) != 1 || pid <= 0)
		return 0;
	fmt(tail, sizeof(tail), "%s", name + strlen(EM_PREFIX) + n);
	return strcmp(tail, suffix) == 0 ? pid : 0;
}

/* ---- network: namespace, veth pair, tbf on both ends ---- */

/* tbf on dev (in namespace ns, or here when ns is NULL) at gbps.
 *
 * burst: tokens pile up to the bucket's size while the qdisc waits for its
 * watchdog timer and the softirq that dequeues; whatever would arrive past
 * the size is lost, so a bucket smaller than rate x that wake-up delay caps
 * the link below the rate, the more so the higher the rate (at 10 Gb/s,
 * 100 us of delay is 125 KB). It must also hold one whole GSO packet (64 KiB),
 * else tbf cuts each into MTU segments in software. Too large a bucket lets
 * an idle sender go out at veth speed (tens of Gb/s) for burst bytes, which
 * a real NIC would not. 2 ms of the rate, at least 128 KiB: 250 KB at
 * 1 Gb/s, 2.5 MB at 10 Gb/s; a 2 ms escape is invisible in a benchmark of
 * seconds, and 2 ms covers a busy 2-core VM's softirq delay.
 *
 * latency (the queue before tbf drops): 20 ms, a real switch port's buffer
 * order; shorter queues drop TCP's bursts and make it back off below the
 * rate.
 *
 * Offloads stay on: tbf charges a GSO packet its full length against the
 * bucket and segments one larger than the bucket, so TSO/GSO do not let
 * bytes past the rate; turning them off would only cost CPU on both sides.
 */
static int tbf_add(const char *ns, const char *dev, double gbps, char *err, size_t errlen)
{
	double bytes_s = gbps * 1e9 / 8;
	double burst = bytes_s * 0.002;
	char rate[32], bur[32];
	const char *argv[16];
	int n = 0;

	if (burst < 128 * 1024)
		burst = 128 * 1024;
	fmt(rate, sizeof(rate), "%.0fbit", gbps * 1e9);
	fmt(bur, sizeof(bur), "%.0fb", burst);
	argv[n++] = "tc";
	if (ns) {
		argv[n++] = "-n";
		argv[n++] = ns;
	}
	argv[n++] = "qdisc";
	argv[n++] = "add";
	argv[n++] = "dev";
	argv[n++] = dev;
	argv[n++] = "root";
	argv[n++] = "tbf";
	argv[n++] = "rate";
	argv[n++] = rate;
	argv[n++] = "burst";
	argv[n++] = bur;
	argv[n++] = "latency";
	argv[n++] = "20ms";
	argv[n] = NULL;
	return cmd(argv, err, errlen);
}

int emulate_shape_link(const char *ns, const char *dev, double gbps, char *err, size_t errlen)
{
	return tbf_add(ns, dev, gbps, err, errlen);
}

int emulate_run(const char *const argv[], char *out, size_t outlen)
{
	return run(argv, out, outlen);
}

/* 10.213.X.Y/30: one of 16384 /30s chosen by pid, host .Y+1, broker .Y+2.
 * A private range little used by hand; two suites whose pids are 16384
 * apart would share a subnet (each veth still routes its own /30 route:
 * the second `ip addr add` succeeds, its traffic may take the first's
 * veth) — not worth a search for a free subnet. */
static void pick_addrs(struct emulation *em, int pid)
{
	int n = pid % 16384, x = n / 64, y = (n % 64) * 4;

	fmt(em->host_ip, sizeof(em->host_ip), "10.213.%d.%d", x, y + 1);
	fmt(em->broker_ip, sizeof(em->broker_ip), "10.213.%d.%d", x, y + 2);
}

static int net_setup(const struct hw_profile *p, struct emulation *em, char *err, size_t errlen)
{
	int pid = (int)getpid(), rc;
	char peer[16], host_cidr[24], broker_cidr[24];

	fmt(peer, sizeof(peer), "sem%db", pid);
	pick_addrs(em, pid);
	fmt(host_cidr, sizeof(host_cidr), "%s/30", em->host_ip);
	fmt(broker_cidr, sizeof(broker_cidr), "%s/30", em->broker_ip);

	rc = cmd((const char *const[]){ "ip", "netns", "add", em->netns, NULL }, err, errlen);
	if (rc < 0) {
		em->netns[0] = 0;   /* not ours to delete (it may exist already) */
		return rc;
	}
	fmt(em->veth, sizeof(em->veth), "sem%dh", pid);
	rc = cmd((const char *const[]){ "ip", "link", "add", em->veth, "type", "veth", "peer", "name", peer,
					NULL }, err, errlen);
	if (rc < 0) {
		em->veth[0] = 0;
		return rc;
	}
	const char *const steps[][10] = {
		{ "ip", "link", "set", peer, "netns", em->netns, NULL },
		{ "ip", "addr", "add", host_cidr, "dev", em->veth, NULL },
		{ "ip", "link", "set", em->veth, "up", NULL },
		{ "ip", "-n", em->netns, "addr", "add", broker_cidr, "dev", peer, NULL },
		{ "ip", "-n", em->netns, "link", "set", peer, "up", NULL },
		{ "ip", "-n", em->netns, "link", "set", "lo", "up", NULL },
	};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if ((rc = cmd(steps[i], err, errlen)) < 0)
			return rc;

	if (!p->has[HW_NIC_GBPS] || hw_get(p, HW_NIC_GBPS) <= 0) {
		note(em, "network not shaped: the profile gives no nic_gbps.");
		return 0;
	}
	if ((rc = tbf_add(NULL, em->veth, hw_get(p, HW_NIC_GBPS), err, errlen)) < 0 ||
	    (rc = tbf_add(em->netns, peer, hw_get(p, HW_NIC_GBPS), err, errlen)) < 0)
		return rc;
	em->nic_gbps = hw_get(p, HW_NIC_GBPS);
	return 0;
}

/* ---- disk: the block device, a cgroup, its limits ---- */

/* The whole disk holding dir (or its nearest existing parent) into *dev,
 * or a note-ready reason in why and -errno. io.max and the v1 throttle
 * take a disk, not a partition. */
static int disk_of(const char *dir, dev_t *dev, char *why, size_t whylen)
{
	char path[PATH_MAX], sys[PATH_MAX], real[PATH_MAX], num[32];
	struct stat st;
	unsigned maj, min;

	fmt(path, sizeof(path), "%s", dir);
	while (stat(path, &st) < 0) {
		char *slash = strrchr(path, '/');

		if (errno != ENOENT || !slash || slash == path) {
			fmt(why, whylen, "cannot stat the data directory %s: %s", dir, strerror(errno));
			return -errno;
		}
		*slash = 0;
	}
	if (major(st.st_dev) == 0) {
		fmt(why, whylen,
		    "the data directory %s is on a filesystem without a block device (st_dev 0:%u: tmpfs, "
		    "overlayfs, btrfs or nfs)", dir, minor(st.st_dev));
		return -ENODEV;
	}
	fmt(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	if (!realpath(sys, real)) {
		fmt(why, whylen, "the data directory's device %u:%u is not in /sys/dev/block",
		    major(st.st_dev), minor(st.st_dev));
		return -ENODEV;
	}
	*dev = st.st_dev;
	fmt(sys, sizeof(sys), "%s/partition", real);
	if (access(sys, F_OK) < 0)
		return 0;
	/* a partition: its parent directory in sysfs is the disk */
	*strrchr(real, '/') = 0;
	fmt(sys, sizeof(sys), "%s/dev", real);
	if (read_file(sys, num, sizeof(num)) < 0 || sscanf(num, "%u:%u", &maj, &min) != 2) {
		fmt(why, whylen, "cannot read the disk of partition %u:%u (%s)", major(st.st_dev),
		    minor(st.st_dev), sys);
		return -ENODEV;
	}
	*dev = makedev(maj, min);
	return 0;
}

/* A cgroup mount from /proc/self/mountinfo into mnt: fstype "cgroup2", or
 * "cgroup" with opt among its super options. 0, or -ENOENT. */
static int find_cgroup_mount(const char *fstype, const char *opt, char *mnt, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[1024];
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (rc && fgets(line, sizeof(line), f)) {
		char point[512], type[64], src[256], sopts[512];
		char *dash = strstr(line, " - ");

		/* id parent maj:min root POINT opts [optional...] - TYPE SOURCE SOPTS */
		if (!dash || sscanf(line, "%*s %*s %*s %*s %511s", point) != 1 ||
		    sscanf(dash + 3, "%63s %255s %511s", type, src, sopts) != 3)
			continue;
		if (strcmp(type, fstype) != 0 || strchr(point, '\\'))
			continue;
		if (opt && !has_word(sopts, opt, ','))
			continue;
		fmt(mnt, len, "%s", point);
		rc = 0;
	}
	fclose(f);
	return rc;
}

/* A cgroup v2 hierarchy to use: one mounted, or one setup mounts at
 * /run/sluice-em-PID.cgroup2 (em->cg_mount, unmounted by teardown). */
static int cg2_root(struct emulation *em, char *root, size_t len, char *why, size_t whylen)
{
	char dir[64];

	if (find_cgroup_mount("cgroup2", NULL, root, len) == 0)
		return 0;
	fmt(dir, sizeof(dir), CG2_PRIVATE, (int)getpid());
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fmt(why, whylen, "no cgroup v2 is mounted and mkdir %s failed: %s", dir, strerror(errno));
		return -errno;
	}
	if (mount("none", dir, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		int e = errno;

		rmdir(dir);
		fmt(why, whylen, "no cgroup v2 is mounted and mounting one failed: %s", strerror(e));
		return -e;
	}
	fmt(em->cg_mount, sizeof(em->cg_mount), "%s", dir);
	fmt(root, len, "%s", dir);
	return 0;
}

/* "max" or the MB/s as bytes/s. */
static void bps(char *buf, size_t len, double mbps)
{
	if (mbps > 0)
		fmt(buf, len, "%.0f", mbps * 1e6);
	else
		fmt(buf, len, "max");
}

/* cgroup v2: +io in root's subtree_control, a child, its io.max. 0, or
 * -errno with why filled; -EOPNOTSUPP when io is not a v2 controller here
 * (why then lists those there are). */
static int disk_v2(struct emulation *em, const char *root, dev_t dev, double w, double r, char *why,
		   size_t whylen)
{
	char path[PATH_MAX], ctl[512], line[128], rb[32], wb[32];
	int rc;

	fmt(path, sizeof(path), "%s/cgroup.controllers", root);
	if ((rc = read_file(path, ctl, sizeof(ctl))) < 0) {
		fmt(why, whylen, "cannot read %s: %s", path, strerror(-rc));
		return rc;
	}
	if (!has_word(ctl, "io", ' ')) {
		fmt(why, whylen, "the io controller is not available in cgroup v2 here (%s: %s)", path,
		    ctl[0] ? ctl : "empty");
		return -EOPNOTSUPP;
	}
	/* +io stays enabled at the root afterwards: it only makes io.* files
	 * appear in children, which limits nothing by itself. */
	fmt(path, sizeof(path), "%s/cgroup.subtree_control", root);
	if ((rc = write_file(path, "+io")) < 0) {
		fmt(why, whylen, "enabling +io in %s failed: %s", path, strerror(-rc));
		return rc;
	}
	fmt(path, sizeof(path), "%s/%s%d", root, EM_PREFIX, (int)getpid());
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		fmt(why, whylen, "mkdir %s failed: %s", path, strerror(errno));
		return -errno;
	}
	fmt(em->cgroup, sizeof(em->cgroup), "%s", path);
	bps(rb, sizeof(rb), r);
	bps(wb, sizeof(wb), w);
	fmt(line, sizeof(line), "%u:%u rbps=%s wbps=%s", major(dev), minor(dev), rb, wb);
	fmt(path, sizeof(path), "%s/io.max", em->cgroup);
	if ((rc = write_file(path, line)) < 0) {
		fmt(why, whylen, "writing '%s' to %s failed: %s", line, path, strerror(-rc));
		return rc;
	}
	return 0;
}

/* cgroup v1 blkio: a child of the blkio hierarchy, its throttle files.
 * 0, or -errno with why filled. */
static int disk_v1(struct emulation *em, const char *root, dev_t dev, double w, double r, char *why,
		   size_t whylen)
{
	static const char *const file[2] = { "blkio.throttle.write_bps_device",
					     "blkio.throttle.read_bps_device" };
	double lim[2] = { w, r };
	char path[PATH_MAX], line[64];
	int rc;

	fmt(path, sizeof(path), "%s/%s%d", root, EM_PREFIX, (int)getpid());
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		fmt(why, whylen, "mkdir %s failed: %s", path, strerror(errno));
		return -errno;
	}
	fmt(em->cgroup, sizeof(em->cgroup), "%s", path);
	for (int i = 0; i < 2; i++) {
		if (lim[i] <= 0)
			continue;
		fmt(line, sizeof(line), "%u:%u %.0f", major(dev), minor(dev), lim[i] * 1e6);
		fmt(path, sizeof(path), "%s/%s", em->cgroup, file[i]);
		if ((rc = write_file(path, line)) < 0) {
			fmt(why, whylen, "writing '%s' to %s failed: %s", line, path, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static void cg_remove(const char *dir);

/* The disk part: never an error; em->cgroup and the limits, or a note. */
static void disk_setup(const struct hw_profile *p, const char *data_dir, struct emulation *em)
{
	double w = hw_get(p, HW_DISK_WRITE_MBPS), r = hw_get(p, HW_DISK_READ_MBPS);
	char why[512], why1[512], root[PATH_MAX], v1[PATH_MAX];
	dev_t dev = 0;
	int rc;

	if (w <= 0 && r <= 0) {
		note(em, "disk not capped: the profile gives no disk_write_mbps or disk_read_mbps.");
		return;
	}
	if (disk_of(data_dir, &dev, why, sizeof(why)) < 0) {
		note(em, "disk not capped: %s.", why);
		return;
	}
	rc = cg2_root(em, root, sizeof(root), why, sizeof(why));
	if (rc == 0)
		rc = disk_v2(em, root, dev, w, r, why, sizeof(why));
	if (rc == 0)
		goto capped;
	if (em->cgroup[0]) {
		cg_remove(em->cgroup);
		em->cgroup[0] = 0;
	}
	if (find_cgroup_mount("cgroup", "blkio", v1, sizeof(v1)) < 0) {
		note(em, "disk not capped: %s, and no cgroup v1 blkio hierarchy is mounted.", why);
		return;
	}
	if (disk_v1(em, v1, dev, w, r, why1, sizeof(why1)) < 0) {
		if (em->cgroup[0]) {
			cg_remove(em->cgroup);
			em->cgroup[0] = 0;
		}
		note(em, "disk not capped: %s; cgroup v1 blkio: %s.", why, why1);
		return;
	}
	note(em, "disk capped with cgroup v1 blkio throttling, not v2 io.max: %s, and blkio is a v1 "
	     "hierarchy at %s; v1 throttling limits O_DIRECT and read I/O on %u:%u (what the broker "
	     "does), not buffered writeback.", why, v1, major(dev), minor(dev));
capped:
	em->disk_write_mbps = w;
	em->disk_read_mbps = r;
	if (em->cg_mount[0] && strncmp(em->cgroup, em->cg_mount, strlen(em->cg_mount)) != 0) {
		/* mounted a v2 we did not use */
		umount2(em->cg_mount, MNT_DETACH);
		rmdir(em->cg_mount);
		em->cg_mount[0] = 0;
	}
}

/* ---- setup, teardown ---- */

int emulate_setup(const struct hw_profile *p, const char *data_dir, struct emulation *em, char *err,
		  size_t errlen)
{
	int rc;

	memset(em, 0, sizeof(*em));
	fmt(em->netns, sizeof(em->netns), "%s%d", EM_PREFIX, (int)getpid());
	rc = net_setup(p, em, err, errlen);
	if (rc < 0) {
		emulate_teardown(em);
		return rc;
	}
	em->up = 1;
	disk_setup(p, data_dir, em);
	if (em->cg_mount[0] && !em->cgroup[0]) {
		umount2(em->cg_mount, MNT_DETACH);
		rmdir(em->cg_mount);
		em->cg_mount[0] = 0;
	}
	return 0;
}

/* Move whatever is left in cgroup dir to its parent, then remove it (an
 * exiting task can keep it busy for a moment: a few tries). */
static void cg_remove(const char *dir)
{
	char path[PATH_MAX], parent[PATH_MAX], procs[4096], *slash, *save;

	fmt(path, sizeof(path), "%s/cgroup.procs", dir);
	fmt(parent, sizeof(parent), "%s", dir);
	if (!(slash = strrchr(parent, '/')))
		return;
	fmt(slash, sizeof(parent) - (size_t)(slash - parent), "/cgroup.procs");
	for (int tries = 0; tries < 50; tries++) {
		if (read_file(path, procs, sizeof(procs)) == 0) {
			for (char *s = strtok_r(procs, " ", &save); s; s = strtok_r(NULL, " ", &save))
				(void)write_file(parent, s);
		}
		if (rmdir(dir) == 0 || errno == ENOENT)
			return;
		nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
	}
}

void emulate_teardown(struct emulation *em)
{
	if (em->cgroup[0]) {
		cg_remove(em->cgroup);
		em->cgroup[0] = 0;
	}
	if (em->cg_mount[0]) {
		if (umount2(em->cg_mount, 0) < 0)
			umount2(em->cg_mount, MNT_DETACH);
		rmdir(em->cg_mount);
		em->cg_mount[0] = 0;
	}
	/* the veth first: deleting it here removes both ends at once, while
	 * the namespace's own cleanup (and so its end's) is deferred */
	if (em->veth[0]) {
		cmd_quiet((const char *const[]){ "ip", "link", "del", em->veth, NULL });
		em->veth[0] = 0;
	}
	if (em->netns[0]) {
		cmd_quiet((const char *const[]){ "ip", "netns", "del", em->netns, NULL });
		em->netns[0] = 0;
	}
	em->up = 0;
}

/* ---- leftovers of a killed suite ---- */

static void stale_netns(void)
{
	DIR *d = opendir(NETNS_DIR);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		int pid = em_pid(e->d_name, "");
		char veth[16];

		if (!pid || pid_alive(pid))
			continue;
		fmt(veth, sizeof(veth), "sem%dh", pid);
		cmd_quiet((const char *const[]){ "ip", "link", "del", veth, NULL });
		cmd_quiet((const char *const[]){ "ip", "netns", "del", e->d_name, NULL });
	}
	closedir(d);
}

static void stale_cgroups_in(const char *root)
{
	DIR *d = opendir(root);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		int pid = em_pid(e->d_name, "");

		if (!pid || pid_alive(pid))
			continue;
		fmt(path, sizeof(path), "%s/%s", root, e->d_name);
		cg_remove(path);
	}
	closedir(d);
}

/* The cgroups in every cgroup2 mount and v1 blkio mount (a killed suite's
 * private mount among them). */
static void stale_cgroups(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[1024], mounts[16][512];
	int n = 0;

	if (!f)
		return;
	while (n < 16 && fgets(line, sizeof(line), f)) {
		char point[512], type[64], src[256], sopts[512];
		char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %*s %511s", point) != 1 ||
		    sscanf(dash + 3, "%63s %255s %511s", type, src, sopts) != 3)
			continue;
		if (strcmp(type, "cgroup2") == 0 || (strcmp(type, "cgroup") == 0 && has_word(sopts, "blkio", ',')))
			fmt(mounts[n++], sizeof(mounts[0]), "%s", point);
	}
	fclose(f);
	for (int i = 0; i < n; i++)
		stale_cgroups_in(mounts[i]);
}

/* A killed suite's private cgroup2 mounts, once their cgroups are gone. */
static void stale_mounts(void)
{
	DIR *d = opendir("/run");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		int pid = em_pid(e->d_name, ".cgroup2");

		if (!pid || pid_alive(pid))
			continue;
		fmt(path, sizeof(path), "/run/%s", e->d_name);
		umount2(path, MNT_DETACH);   /* EINVAL when not mounted: fine */
		rmdir(path);
	}
	closedir(d);
}

void emulate_cleanup_stale(void)
{
	stale_netns();
	stale_cgroups();
	stale_mounts();
}
