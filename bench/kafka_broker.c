/* bench/kafka_broker.c — the broker a librdkafka benchmark runs against
 * (bench/kafka.h): build/sluiced started, watched and stopped, the RSS of
 * a process, and the flag SIGINT/SIGTERM set that every benchmark loop
 * checks.
 *
 * Thread: broker_start, broker_stop and broker_busy_cycles from the
 * benchmark's main thread; broker_alive (and broker_log_tail through it)
 * from the thread that runs a load too (kafka_run.c); proc_rss_kb from any
 * thread; on_signal is the signal handler and only sets bench_interrupted.
 * Errors: -errno (broker_stop: -1 for a broker that did not stop cleanly;
 * broker_alive: 1 running, 0 gone).
 *
 * By default each run starts its own broker: build/sluiced next to this
 * binary, on a free 127.0.0.1 port, data in a fresh directory under /var/tmp
 * (or $SLUICE_TEST_DIR)
 * (removed at the end; kept, and its path printed, when the broker died or
 * did not stop cleanly), stopped with SIGTERM (a broker that does not exit
 * cleanly within 30 s is a failure). The cluster id the broker prints with
 * its "listening on" line is checked against the one the client sees, so
 * the run cannot silently talk to another broker on the same port.
 * `--bootstrap HOST:PORT` uses an external broker instead (no RSS/disk
 * figures unless --broker-pid names its process).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/kafka.h"

volatile sig_atomic_t bench_interrupted;

uint64_t proc_rss_kb(pid_t pid)
{
	char path[64], line[256];
	uint64_t kb = 0;
	FILE *f;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6)) {
			kb = strtoull(line + 6, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}

void on_signal(int sig)
{
	(void)sig;
	bench_interrupted = 1;
}

/* ---- the broker --------------------------------------------------------- */

void broker_log_tail(const struct broker *br)
{
	char cmd[400];

	fprintf(stderr, "kafka: last lines of %s/sluiced.log:\n", br->root);
	snprintf(cmd, sizeof(cmd), "tail -n 20 '%s/sluiced.log' >&2", br->root);
	if (system(cmd) < 0)
		return;
}

int broker_start(struct broker *br, int shards, const struct opts *o)
{
	char self[PATH_MAX], exe[PATH_MAX + 16], portbuf[300], shardbuf[16], logpath[400];
	char line[1024], *argv[64];
	ssize_t n;
	size_t have = 0;
	int pfd[2], port, argc = 0, logfd;
	uint64_t deadline;
	char *slash;

	memset(br, 0, sizeof(*br));
	br->out_fd = -1;
	br->shards = shards;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -errno;
	self[n] = 0;
	slash = strrchr(self, '/');
	*slash = 0;
	snprintf(exe, sizeof(exe), "%s/sluiced", self);
	if (access(exe, X_OK) < 0) {
		fprintf(stderr, "kafka: no broker at %s (make builds it)\n", exe);
		return -ENOENT;
	}
	snprintf(br->root, sizeof(br->root), "%s/sluice-bench-kafka-XXXXXX",
		 getenv("SLUICE_TEST_DIR") && *getenv("SLUICE_TEST_DIR") ? getenv("SLUICE_TEST_DIR") : "/var/tmp");
	if (!mkdtemp(br->root))
		return -errno;
	snprintf(br->data, sizeof(br->data), "%s/data", br->root);
	if ((port = bench_free_port(SOCK_STREAM)) < 0)
		return -EADDRNOTAVAIL;
	snprintf(br->bootstrap, sizeof(br->bootstrap), "%s:%d", o->listen_host ? o->listen_host : "127.0.0.1",
		 port);
	snprintf(portbuf, sizeof(portbuf), "%s", br->bootstrap);
	snprintf(shardbuf, sizeof(shardbuf), "%d", shards);
	snprintf(logpath, sizeof(logpath), "%s/sluiced.log", br->root);
	argv[argc++] = exe;
	argv[argc++] = "--data-dir";
	argv[argc++] = br->data;
	argv[argc++] = "--listen";
	argv[argc++] = portbuf;
	argv[argc++] = "--shards";
	argv[argc++] = shardbuf;
	for (int i = 0; i < o->nsets; i++) {
		argv[argc++] = "--set";
		argv[argc++] = (char *)o->sets[i];
	}
	for (int i = 0; i < o->nargs; i++)
		argv[argc++] = (char *)o->args[i];
	argv[argc] = NULL;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (logfd < 0)
		return -errno;
	br->pid = fork();
	if (br->pid < 0)
		return -errno;
	if (br->pid == 0) {
		dup2(pfd[1], 1);
		dup2(logfd, 2);
		if (o->netns) {
			char nspath[300];
			int nsfd;

			snprintf(nspath, sizeof(nspath), "/var/run/netns/%s", o->netns);
			nsfd = open(nspath, O_RDONLY | O_CLOEXEC);
			if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) < 0) {
				fprintf(stderr, "kafka: broker: network namespace %s: %s\n", nspath, strerror(errno));
				_exit(126);
			}
		}
		if (o->cgroup) {
			char cgpath[400];
			FILE *f;

			snprintf(cgpath, sizeof(cgpath), "%s/cgroup.procs", o->cgroup);
			f = fopen(cgpath, "w");
			if (!f || fprintf(f, "0\n") < 0 || fclose(f)) {
				fprintf(stderr, "kafka: broker: joining cgroup %s: %s\n", cgpath, strerror(errno));
				_exit(126);
			}
		}
		execv(exe, argv);
		_exit(127);
	}
	close(pfd[1]);
	close(logfd);
	br->out_fd = pfd[0];
	fprintf(stderr, "kafka: starting %s --data-dir %s --listen %s --shards %d%s\n", exe, br->data,
		portbuf, shards, o->nsets ? " --set ..." : "");
	deadline = bench_now_ns() + READY_TIMEOUT * 1000000000ull;
	for (;;) {
		struct pollfd p = { .fd = br->out_fd, .events = POLLIN };
		uint64_t now = bench_now_ns();
		char *nl, *c;

		if (now >= deadline) {
			fprintf(stderr, "kafka: broker not ready after %d s\n", READY_TIMEOUT);
			broker_log_tail(br);
			return -ETIMEDOUT;
		}
		if (poll(&p, 1, (int)((deadline - now) / 1000000) + 1) <= 0)
			continue;
		n = read(br->out_fd, line + have, sizeof(line) - 1 - have);
		if (n <= 0) {
			int st = 0;

			waitpid(br->pid, &st, 0);
			fprintf(stderr, "kafka: broker exited before it was ready (status 0x%x)\n", st);
			br->pid = 0;
			broker_log_tail(br);
			return -ECHILD;
		}
		have += (size_t)n;
		line[have] = 0;
		nl = strchr(line, '\n');
		if (!nl && have < sizeof(line) - 1)
			continue;
		if (!strstr(line, "listening on ")) {
			fprintf(stderr, "kafka: unexpected broker output: %s", line);
			have = 0;
			continue;
		}
		c = strstr(line, "cluster ");
		if (c)
			sscanf(c + 8, "%63[A-Za-z0-9_-]", br->cluster_id);
		fprintf(stderr, "kafka: %.*s\n", (int)(nl ? nl - line : (long)have), line);
		return 0;
	}
}

/* The shards' busy cycles so far (kafka.h). */
int broker_busy_cycles(struct broker *br, uint64_t *cycles)
{
	char line[2048];
	size_t have = 0;
	uint64_t deadline = bench_now_ns() + 5000000000ull;

	if (br->pid <= 0 || br->out_fd < 0 || kill(br->pid, SIGUSR1) < 0)
		return -ESRCH;
	while (bench_now_ns() < deadline) {
		struct pollfd p = { .fd = br->out_fd, .events = POLLIN };
		char *nl, *at;
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = read(br->out_fd, line + have, sizeof(line) - 1 - have);
		if (n <= 0)
			return -EPIPE;
		have += (size_t)n;
		line[have] = 0;
		while ((nl = strchr(line, '\n'))) {
			*nl = 0;
			if ((at = strstr(line, "sluiced: busy cycles "))) {
				*cycles = strtoull(at + 21, NULL, 10);
				return 0;
			}
			have -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, have + 1);
		}
		if (have >= sizeof(line) - 1)
			have = 0;   /* a line longer than any the broker prints: drop it */
	}
	return -ETIMEDOUT;
}

/* SIGTERM, wait; returns -1 if it did not exit cleanly in time. */
int broker_stop(struct broker *br)
{
	int st = 0, rc = 0;
	uint64_t deadline;

	if (br->pid > 0) {
		kill(br->pid, SIGTERM);
		deadline = bench_now_ns() + STOP_TIMEOUT * 1000000000ull;
		for (;;) {
			pid_t w = waitpid(br->pid, &st, WNOHANG);

			if (w == br->pid)
				break;
			if (bench_now_ns() > deadline) {
				fprintf(stderr, "kafka: broker pid %d did not exit %d s after SIGTERM; killing it\n",
					(int)br->pid, STOP_TIMEOUT);
				kill(br->pid, SIGKILL);
				waitpid(br->pid, &st, 0);
				rc = -1;
				break;
			}
			usleep(20000);
		}
		if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			fprintf(stderr, "kafka: broker exited with status 0x%x after SIGTERM\n", st);
			broker_log_tail(br);
			rc = -1;
		}
		br->pid = 0;
	}
	if (br->out_fd >= 0)
		close(br->out_fd);
	br->out_fd = -1;
	if (br->died)
		rc = -1;
	if (br->root[0] && !rc)
		bench_rmrf(br->root, "kafka");
	else if (br->root[0])
		fprintf(stderr, "kafka: kept %s for inspection\n", br->root);
	br->root[0] = 0;
	return rc;
}

/* Is the broker we started still running? */
int broker_alive(struct broker *br)
{
	int st;

	if (br->pid <= 0)
		return 1;
	if (waitpid(br->pid, &st, WNOHANG) == br->pid) {
		fprintf(stderr, "kafka: BROKER DIED (status 0x%x); run directory %s kept\n", st, br->root);
		broker_log_tail(br);
		br->pid = 0;
		br->died = 1;
		return 0;
	}
	return 1;
}
