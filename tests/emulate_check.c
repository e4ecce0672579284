/* tests/emulate_check.c — build/emulate-check [PROFILE]: bench/emulate.c
 * for real, without sluice-bench (tests/bench_emulate_smoke.sh runs it).
 *
 * With PROFILE (default hw-profiles/kafka-2014.conf: 1 Gb/s, 780 MB/s):
 *   1. emulate_cleanup_stale() removes a sluice-em-PID namespace whose PID
 *      has exited, and leaves this process's alone;
 *   2. TCP over loopback, unshaped, for 1 s: the rate this machine does
 *      without emulation (it must be at least twice the profile's, or the
 *      check below could not tell shaping from none: then it fails as
 *      inconclusive);
 *   3. emulate_setup, then TCP from here to a listener in the namespace and
 *      back, 1 s each: both must be below twice the profile's nic_gbps — a
 *      functional check that both veth ends are shaped, not a performance
 *      threshold — and the tbf must show in `tc -s qdisc` on both ends;
 *   4. when a cgroup was made: 512 MiB of O_DIRECT writes from a child in
 *      it and from one outside; printed, and the capped one must be below
 *      1.5 x disk_write_mbps when the uncapped one is above twice it (else
 *      inconclusive, said, not a failure: the disk is what it is);
 *   5. emulate_teardown (twice), with a process still in the cgroup: the
 *      namespace, the veth and the cgroup are gone;
 *   6. a setup whose network part fails (the veth's name taken) returns
 *      -errno with the command and its output in err, and leaves nothing.
 * Prints what it measured and em->notes. Exit 0, 1 on failure, 77 (SKIP)
 * when not root.
 *
 * Thread: main, and one receiver per flow; the namespace's sockets are made
 * by a thread that setns()es into it (a socket keeps the namespace it was
 * made in, so main can connect it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/emulate.h"

#define FLOW_SECONDS 1.0
#define DISK_BYTES   (512ull << 20)
#define DISK_BLOCK   (1u << 20)

static int failures;

static void fail(const char *what)
{
	printf("FAIL: %s\n", what);
	failures++;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Run argv, its stdout and stderr into out. Exit status, or -1. */
static int run(char *const argv[], char *out, size_t outlen)
{
	int pfd[2], st = 0;
	size_t have = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(pfd) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		close(pfd[0]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	while ((n = read(pfd[0], out + have, outlen - 1 - have)) > 0)
		have += (size_t)n;
	out[have] = 0;
	close(pfd[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- sockets in a namespace ---- */

struct mk {
	const char *netns;   /* NULL: this one */
	int fd;
};

static void *mk_thread(void *arg)
{
	struct mk *m = arg;
	char path[128];
	int nsfd;

	m->fd = -1;
	if (m->netns) {
		snprintf(path, sizeof(path), "/var/run/netns/%s", m->netns);
		nsfd = open(path, O_RDONLY | O_CLOEXEC);
		if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) < 0) {
			perror(path);
			return NULL;
		}
		close(nsfd);
	}
	m->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	return NULL;
}

/* A TCP socket in namespace netns (NULL: this one), or -1. */
static int socket_in(const char *netns)
{
	struct mk m = { .netns = netns, .fd = -1 };
	pthread_t t;

	if (pthread_create(&t, NULL, mk_thread, &m) != 0)
		return -1;
	pthread_join(t, NULL);
	return m.fd;
}

/* ---- one TCP flow, measured at the receiver ---- */

struct rx {
	int lfd;
	uint64_t bytes;
	double first, last;
};

static void *rx_thread(void *arg)
{
	static char buf[1 << 18];
	struct rx *r = arg;
	int fd = accept(r->lfd, NULL, NULL);
	ssize_t n;

	if (fd < 0)
		return NULL;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (!r->bytes)
			r->first = now_s();
		r->bytes += (uint64_t)n;
		r->last = now_s();
	}
	close(fd);
	return NULL;
}

/* Gb/s from a sender in tx_ns to a listener on ip in rx_ns; -1 on error. */
static double flow(const char *tx_ns, const char *rx_ns, const char *ip)
{
	static char buf[1 << 16];
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	struct rx r = { 0 };
	pthread_t t;
	double end;
	int cfd;

	r.lfd = socket_in(rx_ns);
	inet_pton(AF_INET, ip, &a.sin_addr);
	if (r.lfd < 0 || bind(r.lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(r.lfd, 1) < 0 ||
	    getsockname(r.lfd, (struct sockaddr *)&a, &alen) < 0) {
		perror("listener");
		return -1;
	}
	cfd = socket_in(tx_ns);
	if (cfd < 0 || pthread_create(&t, NULL, rx_thread, &r) != 0)
		return -1;
	if (connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		shutdown(r.lfd, SHUT_RDWR);
		pthread_join(t, NULL);
		return -1;
	}
	memset(buf, 'x', sizeof(buf));
	end = now_s() + FLOW_SECONDS;
	while (now_s() < end)
		if (send(cfd, buf, sizeof(buf), MSG_NOSIGNAL) < 0)
			break;
	close(cfd);
	pthread_join(t, NULL);
	close(r.lfd);
	if (r.last <= r.first)
		return -1;
	return (double)r.bytes * 8 / (r.last - r.first) / 1e9;
}

/* ---- checks ---- */

/* A namespace named after a pid that has exited goes; ours stays. */
static void check_stale(void)
{
	char name[64], path[128], out[512];
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	snprintf(name, sizeof(name), "sluice-em-%d", (int)pid);
	snprintf(path, sizeof(path), "/var/run/netns/%s", name);
	if (run((char *[]){ "ip", "netns", "add", name, NULL }, out, sizeof(out)) != 0) {
		printf("ip netns add %s: %s", name, out);
		fail("cannot make a stale namespace to clean up");
		return;
	}
	emulate_cleanup_stale();
	if (access(path, F_OK) == 0) {
		fail("emulate_cleanup_stale left a dead pid's namespace");
		run((char *[]){ "ip", "netns", "del", name, NULL }, out, sizeof(out));
	} else {
		printf("stale namespace %s removed\n", name);
	}
}

/* The tbf at the profile's rate on the veth end in netns (NULL: here). */
static void check_tc(const char *netns, double gbps)
{
	char out[4096], want[64], what[128];
	char *argv[] = { "tc", "-s", "qdisc", "show", NULL, NULL, NULL, NULL };
	int n = 4;

	if (netns) {
		memmove(argv + 2, argv, sizeof(argv[0]) * 4);
		argv[1] = "-n";
		argv[2] = (char *)netns;
		argv[0] = "tc";
		n = 6;
	}
	argv[n] = NULL;
	run(argv, out, sizeof(out));
	printf("--- tc -s qdisc show%s%s\n%s", netns ? " in " : "", netns ? netns : "", out);
	snprintf(want, sizeof(want), "rate %gGbit", gbps);
	if (!strstr(out, "qdisc tbf") || !strstr(out, want)) {
		snprintf(what, sizeof(what), "no tbf with '%s' %s", want, netns ? "in the namespace" : "here");
		fail(what);
	}
}

/* MB/s of O_DIRECT writes to path from a child, in cgroup (NULL: none). */
static double disk_rate(const char *path, const char *cgroup)
{
	int pfd[2], st = 0;
	double mbps = -1;
	pid_t pid;

	if (pipe(pfd) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		char procs[300];
		void *buf;
		double t0;
		int fd;

		if (cgroup) {
			FILE *f;

			snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgroup);
			f = fopen(procs, "w");
			if (!f || fprintf(f, "0\n") < 0 || fclose(f))
				_exit(1);
		}
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0600);
		if (fd < 0 || posix_memalign(&buf, 4096, DISK_BLOCK))
			_exit(1);
		memset(buf, 'd', DISK_BLOCK);
		t0 = now_s();
		for (uint64_t at = 0; at < DISK_BYTES; at += DISK_BLOCK)
			if (pwrite(fd, buf, DISK_BLOCK, (off_t)at) != DISK_BLOCK)
				_exit(1);
		mbps = (double)DISK_BYTES / (now_s() - t0) / 1e6;
		close(fd);
		if (write(pfd[1], &mbps, sizeof(mbps)) != sizeof(mbps))
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], &mbps, sizeof(mbps)) != sizeof(mbps))
		mbps = -1;
	close(pfd[0]);
	waitpid(pid, &st, 0);
	unlink(path);
	return mbps;
}

static void check_disk(const struct emulation *em, const char *dir /* < 300 bytes */)
{
	char path[320];
	double free_mbps, capped;

	snprintf(path, sizeof(path), "%s/odirect.test", dir);
	free_mbps = disk_rate(path, NULL);
	capped = disk_rate(path, em->cgroup);
	printf("O_DIRECT writes: %.0f MB/s uncapped, %.0f MB/s in %s (wbps %.0f MB/s)\n", free_mbps, capped,
	       em->cgroup, em->disk_write_mbps);
	if (free_mbps <= 0 || capped <= 0) {
		fail("O_DIRECT write test did not run");
		return;
	}
	if (em->disk_write_mbps <= 0)
		return;
	if (free_mbps < 2 * em->disk_write_mbps)
		printf("disk cap: inconclusive (this disk does not reach twice the cap)\n");
	else if (capped > 1.5 * em->disk_write_mbps)
		fail("the disk cap did not take effect for O_DIRECT writes");
	else
		printf("disk cap: holds\n");
}

/* A child in the cgroup, as a broker that has not exited would be: the
 * teardown must move it out to remove the cgroup. Its pid, or -1. */
static pid_t cgroup_sleeper(const char *cgroup)
{
	char procs[300];
	pid_t pid;

	snprintf(procs, sizeof(procs), "%.280s/cgroup.procs", cgroup);
	pid = fork();
	if (pid == 0) {
		FILE *f = fopen(procs, "w");

		if (!f || fprintf(f, "0\n") < 0 || fclose(f))
			_exit(1);
		pause();
		_exit(0);
	}
	nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 * 1000 }, NULL);
	return pid;
}

/* A network step that fails (the host veth's name taken): -errno, err
 * naming the command, and nothing of it left. */
static void check_error_path(const struct hw_profile *p, const char *data)
{
	char veth[32], peer[32], ns[64], path[128], err[1024], out[512];
	struct emulation em;
	int rc;

	snprintf(veth, sizeof(veth), "sem%dh", (int)getpid());
	snprintf(peer, sizeof(peer), "semx%d", (int)getpid());
	snprintf(ns, sizeof(ns), "sluice-em-%d", (int)getpid());
	if (run((char *[]){ "ip", "link", "add", veth, "type", "veth", "peer", "name", peer, NULL }, out,
		sizeof(out)) != 0) {
		printf("ip link add %s: %s", veth, out);
		fail("cannot take the veth's name to make setup fail");
		return;
	}
	rc = emulate_setup(p, data, &em, err, sizeof(err));
	printf("setup with %s taken: %d (%s): %s\n", veth, rc, rc < 0 ? strerror(-rc) : "ok", err);
	if (rc >= 0) {
		fail("emulate_setup succeeded with the veth's name taken");
		emulate_teardown(&em);
	} else if (!strstr(err, "ip link add") || !strstr(err, "exists")) {
		fail("the error does not name the failed command and its output");
	}
	snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
	if (access(path, F_OK) == 0)
		fail("a failed setup left its namespace");
	snprintf(path, sizeof(path), "/sys/class/net/%s", veth);
	if (access(path, F_OK) < 0)
		fail("a failed setup deleted a veth it did not make");
	run((char *[]){ "ip", "link", "del", veth, NULL }, out, sizeof(out));
	emulate_teardown(&em);
}

static void check_gone(const char *netns, const char *veth, const char *cgroup)
{
	char out[4096], path[300];

	run((char *[]){ "ip", "netns", "list", NULL }, out, sizeof(out));
	if (strstr(out, netns))
		fail("the namespace is still in `ip netns list` after teardown");
	snprintf(path, sizeof(path), "/sys/class/net/%s", veth);
	if (access(path, F_OK) == 0)
		fail("the veth is still there after teardown");
	if (cgroup[0] && access(cgroup, F_OK) == 0)
		fail("the cgroup is still there after teardown");
}

int main(int argc, char **argv)
{
	const char *conf = argc > 1 ? argv[1] : "hw-profiles/kafka-2014.conf";
	const char *base = getenv("SLUICE_TEST_DIR") && *getenv("SLUICE_TEST_DIR") ? getenv("SLUICE_TEST_DIR")
										     : "/var/tmp";
	char err[1024], tmp[256], data[300], netns[32], veth[16], cgroup[256];
	struct hw_profile p;
	struct emulation em;
	double gbps, lo, up, down;
	pid_t sleeper;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		printf("SKIP: emulate-check needs root (network namespaces, tc, cgroups)\n");
		return 77;
	}
	if (hw_profile_load(conf, &p, err, sizeof(err)) < 0) {
		printf("FAIL: %s\n", err);
		return 1;
	}
	gbps = hw_get(&p, HW_NIC_GBPS);
	snprintf(tmp, sizeof(tmp), "%s/sluice-emulate-check-XXXXXX", base);
	if (!mkdtemp(tmp)) {
		perror(tmp);
		return 1;
	}
	snprintf(data, sizeof(data), "%s/data", tmp);
	mkdir(data, 0755);

	check_stale();
	lo = flow(NULL, NULL, "127.0.0.1");
	printf("loopback, unshaped: %.2f Gb/s\n", lo);

	rc = emulate_setup(&p, data, &em, err, sizeof(err));
	if (rc < 0) {
		printf("FAIL: emulate_setup: %s (%s)\n", err, strerror(-rc));
		rmdir(data);
		rmdir(tmp);
		return 1;
	}
	printf("namespace %s: here %s (%s), broker %s, nic %.3g Gb/s, cgroup '%s', disk w %.0f r %.0f MB/s\n",
	       em.netns, em.host_ip, em.veth, em.broker_ip, em.nic_gbps, em.cgroup, em.disk_write_mbps,
	       em.disk_read_mbps);
	printf("notes: %s\n", em.notes[0] ? em.notes : "(none)");
	snprintf(netns, sizeof(netns), "%s", em.netns);
	snprintf(veth, sizeof(veth), "%s", em.veth);
	snprintf(cgroup, sizeof(cgroup), "%s", em.cgroup);

	up = flow(NULL, em.netns, em.broker_ip);
	down = flow(em.netns, NULL, em.host_ip);
	printf("shaped to %g Gb/s: here -> broker %.3f Gb/s, broker -> here %.3f Gb/s\n", gbps, up, down);
	if (gbps <= 0) {
		fail("the profile has no nic_gbps: nothing to check shaping against");
	} else {
		if (lo < 2 * gbps)
			fail("inconclusive: loopback does not reach twice the profile's rate");
		if (up <= 0 || down <= 0)
			fail("no data through the veth pair");
		if (up >= 2 * gbps)
			fail("here -> broker is not shaped (at or above twice the rate)");
		if (down >= 2 * gbps)
			fail("broker -> here is not shaped (at or above twice the rate)");
		check_tc(NULL, gbps);
		check_tc(em.netns, gbps);
	}
	if (em.cgroup[0])
		check_disk(&em, data);

	sleeper = em.cgroup[0] ? cgroup_sleeper(em.cgroup) : -1;
	emulate_teardown(&em);
	emulate_teardown(&em);
	check_gone(netns, veth, cgroup);
	if (sleeper > 0) {
		kill(sleeper, SIGKILL);
		waitpid(sleeper, NULL, 0);
	}
	check_error_path(&p, data);
	rmdir(data);
	rmdir(tmp);
	printf("emulate check: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
