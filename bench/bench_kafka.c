/* bench/bench_kafka.c — `sluice-bench produce|consume|e2e|idle`: the broker
 * driven through librdkafka, a real Kafka client over TCP.
 *
 * Thread: the benchmark's main thread drives the producer and serves its
 * delivery reports (rd_kafka_poll); e2e runs its consumer on one more
 * thread. librdkafka adds its own threads.
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
 *
 * produce  N records of --size bytes, round-robin over the partitions of a
 *          fresh topic, as fast as the client queues allow; each record's
 *          send time is its message opaque, its delivery report gives the
 *          ack latency. Time runs from the first send to the last report.
 *          --transactional N: a transactional producer (transactional.id,
 *          idempotent, acks=all) sends them in transactions of N records:
 *          begin, produce N, rd_kafka_commit_transaction (which flushes the
 *          transaction's records, serving their reports, then ends it with
 *          EndTxn); the commit latency is the time of that call. Time runs
 *          from the first send to the last commit.
 * consume  produce N records (reported on stderr), then read them all back
 *          with the legacy simple consumer (consume_start on every partition
 *          into one queue, consume_batch_queue, no group). Every record is
 *          checked: length, partition, contiguous offsets, no duplicates.
 * e2e      a consumer reads while the producer sends at --rate records/s;
 *          the payload carries the send time (the time the schedule says
 *          the record is due, so a late producer counts against latency);
 *          latency = receive time - send time on the same monotonic clock.
 *          The first second is warm-up and not counted.
 * idle     create --topics T x --partitions P (100 x 100) with the admin API,
 *          report broker RSS and disk reserved (st_blocks of the data dir),
 *          then run a produce (6 partitions) and report peak RSS during it.
 *
 * Progress once a second on stderr; results last on stdout as rows
 * "<bench> <metric> <value> [(target ...)]". MB = 10^6 bytes of record
 * values. Exit status 0 (figures below target are not failures), 1 on an
 * error (client error, lost or wrong records, broker crash), 2 bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/hist.h"
#include "bench/kafka.h"


volatile sig_atomic_t bench_interrupted;

/* ---- small helpers ------------------------------------------------------ */

static double rate_of(uint64_t n, double s)
{
	return s > 0 ? (double)n / s : 0;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

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

static uint64_t du_blocks, du_apparent;

static int du_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)path; (void)ftw;
	if (type == FTW_F) {
		du_blocks += (uint64_t)sb->st_blocks * 512;
		du_apparent += (uint64_t)sb->st_size;
	}
	return 0;
}

/* Bytes allocated on disk (st_blocks) under dir; *apparent the file sizes. */
static uint64_t du_bytes(const char *dir, uint64_t *apparent)
{
	du_blocks = du_apparent = 0;
	nftw(dir, du_one, 32, FTW_PHYS);
	if (apparent)
		*apparent = du_apparent;
	return du_blocks;
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

/* SIGTERM, wait; returns -1 if it did not exit cleanly in time. */
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

/* ---- clients ------------------------------------------------------------ */


static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	struct client_errs *e = opaque;

	(void)rk;
	if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || err == RD_KAFKA_RESP_ERR__FATAL ||
	    err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__TIMED_OUT) {
		if (!e->count++)
			snprintf(e->first, sizeof(e->first), "%s: %s", rd_kafka_err2name(err), reason);
		if (err == RD_KAFKA_RESP_ERR__FATAL || err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
			e->fatal = 1;
	}
	fprintf(stderr, "kafka: client error %s: %s\n", rd_kafka_err2name(err), reason);
}

int conf_set(rd_kafka_conf_t *c, const char *k, const char *v)
{
	char err[256];

	if (rd_kafka_conf_set(c, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "kafka: client config %s=%s: %s\n", k, v, err);
		return -1;
	}
	return 0;
}

rd_kafka_conf_t *base_conf(const char *bootstrap, struct client_errs *errs)
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();

	if (conf_set(c, "bootstrap.servers", bootstrap) < 0) {
		rd_kafka_conf_destroy(c);
		return NULL;
	}
	rd_kafka_conf_set_error_cb(c, error_cb);
	rd_kafka_conf_set_opaque(c, errs);
	return c;
}

/* The message opaque of the producer: the send time in ns. */
struct prod_ctx {
	struct client_errs errs;    /* first: the error callback's opaque too */
	struct hist *lat;
	uint64_t acked, failed, acked_bytes;
	rd_kafka_resp_err_t first_err;
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct prod_ctx *pc = opaque;

	(void)rk;
	if (m->err) {
		if (!pc->failed++)
			pc->first_err = m->err;
		return;
	}
	pc->acked++;
	pc->acked_bytes += m->len;
	if (pc->lat)
		hist_add(pc->lat, bench_now_ns() - (uint64_t)(uintptr_t)m->_private);
}

static rd_kafka_t *new_producer(const struct opts *o, const char *bootstrap, struct prod_ctx *pc,
				int linger_ms)
{
	static unsigned txn_seq;
	rd_kafka_conf_t *c = base_conf(bootstrap, &pc->errs);
	char acks[16], linger[16], err[256], txn_id[64];
	rd_kafka_t *rk;

	if (!c)
		return NULL;
	snprintf(acks, sizeof(acks), "%d", o->acks);
	snprintf(linger, sizeof(linger), "%d", linger_ms);
	/* a transactional id of this run's own: a broker kept across runs
	 * (--bootstrap) must not fence or resume another run's producer */
	snprintf(txn_id, sizeof(txn_id), "sluice-bench-%d-%" PRIu64 "-%u", (int)getpid(),
		 (uint64_t)(bench_now_ns() % 1000000000ull), txn_seq++);
	if (o->transactional && conf_set(c, "transactional.id", txn_id) < 0) {
		rd_kafka_conf_destroy(c);
		return NULL;
	}
	if (conf_set(c, "acks", acks) < 0 || conf_set(c, "linger.ms", linger) < 0 ||
	    conf_set(c, "batch.num.messages", "100000") < 0 ||
	    conf_set(c, "batch.size", "1000000") < 0 ||
	    conf_set(c, "queue.buffering.max.messages", "2000000") < 0 ||
	    conf_set(c, "queue.buffering.max.kbytes", "2097151") < 0 ||
	    conf_set(c, "compression.codec", o->compression) < 0 ||
	    conf_set(c, "enable.idempotence", o->idempotent || o->transactional ? "true" : "false") < 0 ||
	    conf_set(c, "message.timeout.ms", "60000") < 0) {
		rd_kafka_conf_destroy(c);
		return NULL;
	}
	rd_kafka_conf_set_dr_msg_cb(c, dr_cb);
	rd_kafka_conf_set_opaque(c, pc);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!rk)
		fprintf(stderr, "kafka: producer: %s\n", err);
	return rk;
}

/* Topic admin: create `n` topics "<prefix>-<i>" (or just prefix if n == 1
 * and single) with p partitions each, in requests of at most 20 topics,
 * and wait until metadata shows every partition with a leader. */
/* A client for admin requests (a producer handle, as librdkafka wants). */
static rd_kafka_t *admin_client(const char *bootstrap, struct client_errs *errs)
{
	rd_kafka_conf_t *c = base_conf(bootstrap, errs);
	rd_kafka_t *rk;
	char err[256];

	if (!c)
		return NULL;
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!rk)
		fprintf(stderr, "kafka: admin client: %s\n", err);
	return rk;
}

int create_topics(const char *bootstrap, const char *prefix, int n, int single, int p)
{
	struct client_errs errs = { 0 };
	rd_kafka_t *rk = admin_client(bootstrap, &errs);
	char err[256];
	rd_kafka_queue_t *q;
	int rc = 0;

	if (!rk)
		return -EINVAL;
	q = rd_kafka_queue_new(rk);
	for (int at = 0; at < n && !rc; at += 20) {
		int k = n - at < 20 ? n - at : 20;
		rd_kafka_NewTopic_t *nt[20];
		rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
		rd_kafka_event_t *ev;

		rd_kafka_AdminOptions_set_operation_timeout(ao, READY_TIMEOUT * 1000, err, sizeof(err));
		rd_kafka_AdminOptions_set_request_timeout(ao, READY_TIMEOUT * 1000, err, sizeof(err));
		for (int i = 0; i < k; i++) {
			char name[200];

			if (single)
				snprintf(name, sizeof(name), "%s", prefix);
			else
				snprintf(name, sizeof(name), "%s-%d", prefix, at + i);
			nt[i] = rd_kafka_NewTopic_new(name, p, 1, err, sizeof(err));
		}
		rd_kafka_CreateTopics(rk, nt, (size_t)k, ao, q);
		ev = rd_kafka_queue_poll(q, (READY_TIMEOUT + 5) * 1000);
		if (!ev) {
			fprintf(stderr, "kafka: CreateTopics: no result in %d s\n", READY_TIMEOUT + 5);
			rc = -ETIMEDOUT;
		} else if (rd_kafka_event_error(ev)) {
			fprintf(stderr, "kafka: CreateTopics: %s\n", rd_kafka_event_error_string(ev));
			rc = -EIO;
		} else {
			const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
			size_t cnt;
			const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(res, &cnt);

			for (size_t i = 0; i < cnt; i++)
				if (rd_kafka_topic_result_error(tr[i])) {
					fprintf(stderr, "kafka: CreateTopics %s: %s: %s\n",
						rd_kafka_topic_result_name(tr[i]),
						rd_kafka_err2name(rd_kafka_topic_result_error(tr[i])),
						rd_kafka_topic_result_error_string(tr[i]) ?
						rd_kafka_topic_result_error_string(tr[i]) : "");
					rc = -EIO;
				}
			if (cnt != (size_t)k) {
				fprintf(stderr, "kafka: CreateTopics: %zu results for %d topics\n", cnt, k);
				rc = -EIO;
			}
		}
		if (ev)
			rd_kafka_event_destroy(ev);
		rd_kafka_NewTopic_destroy_array(nt, (size_t)k);
		rd_kafka_AdminOptions_destroy(ao);
	}
	/* every partition of every topic has a leader in metadata */
	for (uint64_t deadline = bench_now_ns() + READY_TIMEOUT * 1000000000ull; !rc;) {
		const struct rd_kafka_metadata *md;
		int ok = 0;

		if (rd_kafka_metadata(rk, 1, NULL, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
			for (int i = 0; i < md->topic_cnt; i++) {
				const char *t = md->topics[i].topic;
				size_t pl = strlen(prefix);
				int good = md->topics[i].err == 0 && md->topics[i].partition_cnt == p;

				for (int j = 0; good && j < md->topics[i].partition_cnt; j++)
					good = md->topics[i].partitions[j].leader >= 0;
				if (good && !strncmp(t, prefix, pl) &&
				    (single ? t[pl] == 0 : t[pl] == '-'))
					ok++;
			}
			rd_kafka_metadata_destroy(md);
		}
		if (ok == n)
			break;
		if (bench_now_ns() > deadline) {
			fprintf(stderr, "kafka: %d of %d topics ready after %d s\n", ok, n, READY_TIMEOUT);
			rc = -ETIMEDOUT;
			break;
		}
		usleep(100000);
	}
	rd_kafka_queue_destroy(q);
	rd_kafka_destroy(rk);
	return rc;
}

/* The cluster id the client sees must be the one our broker printed. */
int delete_topic(const char *bootstrap, const char *name)
{
	struct client_errs errs = { 0 };
	rd_kafka_t *rk = admin_client(bootstrap, &errs);
	rd_kafka_DeleteTopic_t *dt;
	rd_kafka_AdminOptions_t *ao;
	rd_kafka_queue_t *q;
	rd_kafka_event_t *ev;
	char err[256];
	int rc = 0;

	if (!rk)
		return -EINVAL;
	q = rd_kafka_queue_new(rk);
	ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DELETETOPICS);
	rd_kafka_AdminOptions_set_operation_timeout(ao, READY_TIMEOUT * 1000, err, sizeof(err));
	rd_kafka_AdminOptions_set_request_timeout(ao, READY_TIMEOUT * 1000, err, sizeof(err));
	dt = rd_kafka_DeleteTopic_new(name);
	rd_kafka_DeleteTopics(rk, &dt, 1, ao, q);
	ev = rd_kafka_queue_poll(q, (READY_TIMEOUT + 5) * 1000);
	if (!ev) {
		fprintf(stderr, "kafka: DeleteTopics %s: no result in %d s\n", name, READY_TIMEOUT + 5);
		rc = -ETIMEDOUT;
	} else if (rd_kafka_event_error(ev)) {
		fprintf(stderr, "kafka: DeleteTopics %s: %s\n", name, rd_kafka_event_error_string(ev));
		rc = -EIO;
	} else {
		size_t cnt;
		const rd_kafka_topic_result_t **tr =
			rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &cnt);

		if (cnt != 1 || rd_kafka_topic_result_error(tr[0])) {
			fprintf(stderr, "kafka: DeleteTopics %s: %s\n", name,
				cnt == 1 ? rd_kafka_err2name(rd_kafka_topic_result_error(tr[0])) : "no result");
			rc = -EIO;
		}
	}
	if (ev)
		rd_kafka_event_destroy(ev);
	rd_kafka_DeleteTopic_destroy(dt);
	rd_kafka_AdminOptions_destroy(ao);
	rd_kafka_queue_destroy(q);
	rd_kafka_destroy(rk);
	return rc;
}

int check_cluster(rd_kafka_t *rk, const struct broker *br)
{
	char *id;
	int rc = 0;

	if (!br->cluster_id[0])
		return 0;
	id = rd_kafka_clusterid(rk, 10000);
	if (!id || strcmp(id, br->cluster_id)) {
		fprintf(stderr, "kafka: the broker at %s has cluster id %s, ours printed %s: another "
			"process shares the port\n", br->bootstrap, id ? id : "(none)", br->cluster_id);
		rc = -EADDRINUSE;
	}
	if (id)
		rd_kafka_mem_free(rk, id);
	return rc;
}

/* ---- payload ------------------------------------------------------------ */

/* Bytes 0..7: record index (little endian); 8..15: send time (e2e);
 * the rest a pattern of the index. */
static void fill_payload(uint8_t *buf, int size, uint64_t idx, uint64_t t_ns)
{
	memcpy(buf, &idx, sizeof(idx) < (size_t)size ? sizeof(idx) : (size_t)size);
	if (size >= 16)
		memcpy(buf + 8, &t_ns, 8);
}

/* ---- produce ------------------------------------------------------------ */

static void progress(const char *what, uint64_t done, uint64_t total, uint64_t t0,
		     uint64_t *last_done, uint64_t *last_t, const struct broker *br, uint64_t *peak_rss,
		     const char *extra)
{
	uint64_t now = bench_now_ns();
	uint64_t rss = proc_rss_kb(br->pid);
	char of[32] = "";

	if (rss > *peak_rss)
		*peak_rss = rss;
	/* a count so large it only bounds a timed run is not a goal */
	if (total < 1000000000)
		snprintf(of, sizeof(of), "/%" PRIu64, total);
	fprintf(stderr, "%s: %.0f s  %" PRIu64 "%s  %.0f records/s now, %.0f avg%s%s",
		what, (double)(now - t0) / 1e9, done, of,
		rate_of(done - *last_done, (double)(now - *last_t) / 1e9),
		rate_of(done, (double)(now - t0) / 1e9), extra ? "  " : "", extra ? extra : "");
	if (rss)
		fprintf(stderr, "  broker RSS %.0f MiB", (double)rss / 1024);
	fputc('\n', stderr);
	*last_done = done;
	*last_t = now;
}

/* A failed transaction API call: report it, free it; -ETIMEDOUT for a
 * timeout, -EIO otherwise. */
static int txn_failed(const char *label, const char *call, rd_kafka_error_t *e)
{
	int rc = rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__TIMED_OUT ? -ETIMEDOUT : -EIO;

	fprintf(stderr, "%s: %s: %s: %s%s%s\n", label, call, rd_kafka_error_name(e), rd_kafka_error_string(e),
		rd_kafka_error_is_fatal(e) ? " (fatal)" : "",
		rd_kafka_error_txn_requires_abort(e) ? " (transaction must be aborted)" : "");
	rd_kafka_error_destroy(e);
	return rc;
}

/* Commit the open transaction. rd_kafka_commit_transaction flushes the
 * transaction's records (serving their delivery reports), then ends it;
 * a retriable error is retried until STALL_TIMEOUT s after the first call.
 * The time from the first call to the successful return goes to r->commit. */
static int txn_commit(rd_kafka_t *rk, struct run *r, const char *label)
{
	uint64_t t0 = bench_now_ns(), end = t0 + STALL_TIMEOUT * 1000000000ull;

	for (;;) {
		uint64_t now = bench_now_ns();
		int left_ms = now < end ? (int)((end - now) / 1000000) + 1 : 1;
		rd_kafka_error_t *e = rd_kafka_commit_transaction(rk, left_ms);

		if (!e) {
			hist_add(&r->commit, bench_now_ns() - t0);
			r->txns++;
			return 0;
		}
		if (!rd_kafka_error_is_retriable(e) || bench_now_ns() >= end || bench_interrupted)
			return txn_failed(label, "commit_transaction", e);
		fprintf(stderr, "%s: commit_transaction: %s (retriable): retrying\n", label,
			rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
		r->commit_retries++;
	}
}

/* Produce o->records (or for o->seconds if set, whichever first) to topic;
 * with o->transactional, in transactions of that many records. */
int kafka_produce(const struct opts *o, struct broker *br, const char *topic, uint64_t records,
		  struct run *r, const char *label)
{
	struct prod_ctx pc = { .lat = &r->lat };
	rd_kafka_t *rk;
	rd_kafka_topic_t *rkt;
	uint8_t *buf = calloc(1, (size_t)o->size + 16);
	uint64_t t0, sent = 0, last_done = 0, last_t, next_tick, last_acked = 0, stall_t;
	uint64_t deadline = o->seconds > 0 ? (uint64_t)(o->seconds * 1e9) : UINT64_MAX;
	uint64_t txn = (uint64_t)o->transactional;
	int rc = 0, in_txn = 0;
	char txn_note[64] = "", what[48];
	volatile int *stop = r->stop;

	memset(r, 0, sizeof(*r));
	r->stop = stop;
	hist_init(&r->lat);
	hist_init(&r->commit);
	rk = new_producer(o, br->bootstrap, &pc, o->linger_ms >= 0 ? o->linger_ms : 5);
	if (!rk || !buf) {
		free(buf);
		return -EINVAL;
	}
	if ((rc = check_cluster(rk, br)) < 0)
		goto out;
	if (txn) {
		/* InitProducerId with the transactional id (FindCoordinator first) */
		rd_kafka_error_t *e = rd_kafka_init_transactions(rk, READY_TIMEOUT * 1000);

		if (e) {
			rc = txn_failed(label, "init_transactions", e);
			goto out;
		}
		snprintf(txn_note, sizeof(txn_note), ", transactions of %" PRIu64 " records", txn);
	}
	rkt = rd_kafka_topic_new(rk, topic, NULL);
	for (int i = 0; i < o->size; i++)
		buf[i] = (uint8_t)('a' + i % 26);
	if (o->seconds > 0 && records >= 1000000000)
		snprintf(what, sizeof(what), "records for %.1f s", o->seconds);
	else
		snprintf(what, sizeof(what), "%" PRIu64 " records", records);
	fprintf(stderr, "%s: %s x %d bytes to %s (%d partitions), acks=%d, compression=%s, linger.ms=%d%s\n",
		label, what, o->size, topic, o->partitions, o->acks, o->compression,
		o->linger_ms >= 0 ? o->linger_ms : 5, txn_note);
	t0 = last_t = stall_t = bench_now_ns();
	next_tick = t0 + 1000000000ull;
	deadline = deadline == UINT64_MAX ? UINT64_MAX : t0 + deadline;
	while (pc.acked + pc.failed < sent || sent < records) {
		uint64_t now;

		if (stop && *stop && sent < records && !in_txn)
			records = sent;         /* the caller ends the run: drain the acks */
		if (sent < records && o->produce_rate &&
		    sent >= (uint64_t)((double)(bench_now_ns() - t0) * (double)o->produce_rate / 1e9)) {
			/* paced (--rate for produce): ahead of the schedule */
			struct timespec ts = { 0, 100000 };

			rd_kafka_poll(rk, 0);
			nanosleep(&ts, NULL);
		} else if (sent < records && !bench_interrupted) {
			uint64_t t;

			/* a transaction begins with its first record: none is ever
			 * left open and empty */
			if (txn && !in_txn) {
				rd_kafka_error_t *e = rd_kafka_begin_transaction(rk);

				if (e) {
					rc = txn_failed(label, "begin_transaction", e);
					break;
				}
				in_txn = 1;
			}
			t = bench_now_ns();
			fill_payload(buf, o->size, sent, 0);
			if (rd_kafka_produce(rkt, (int32_t)(sent % (uint64_t)o->partitions),
					     RD_KAFKA_MSG_F_COPY, buf, (size_t)o->size, NULL, 0,
					     (void *)(uintptr_t)t) == -1) {
				rd_kafka_resp_err_t e = rd_kafka_last_error();

				if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
					fprintf(stderr, "%s: produce: %s\n", label, rd_kafka_err2str(e));
					rc = -EIO;
					break;
				}
				rd_kafka_poll(rk, 1);
			} else {
				sent++;
				if (txn && (sent % txn == 0 || sent == records)) {
					/* a failed commit stays open: aborted at out */
					if ((rc = txn_commit(rk, r, label)) < 0)
						break;
					in_txn = 0;
				} else if ((sent & 1023) == 0) {
					rd_kafka_poll(rk, 0);
				} else {
					continue;
				}
			}
		} else {
			rd_kafka_poll(rk, 50);
		}
		now = bench_now_ns();
		r->live = pc.acked;
		if (pc.acked + pc.failed != last_acked) {
			last_acked = pc.acked + pc.failed;
			stall_t = now;
		}
		if (now >= next_tick) {
			char extra[96];

			if (txn)
				snprintf(extra, sizeof(extra), "(%" PRIu64 " sent, %" PRIu64 " transactions committed)",
					 sent, r->txns);
			else
				snprintf(extra, sizeof(extra), "(%" PRIu64 " sent)", sent);
			progress(label, pc.acked, records, t0, &last_done, &last_t, br, &r->peak_rss_kb, extra);
			next_tick += 1000000000ull;
			if (!broker_alive(br)) {
				rc = -ECHILD;
				break;
			}
		}
		if (pc.failed) {
			fprintf(stderr, "%s: delivery failed: %s\n", label, rd_kafka_err2str(pc.first_err));
			rc = -EIO;
			break;
		}
		if (pc.errs.fatal) {
			fprintf(stderr, "%s: client: %s\n", label, pc.errs.first);
			rc = -EIO;
			break;
		}
		if (now - stall_t > STALL_TIMEOUT * 1000000000ull) {
			fprintf(stderr, "%s: no delivery report for %d s (%" PRIu64 " sent, %" PRIu64
				" acked): broker stalled\n", label, STALL_TIMEOUT, sent, pc.acked);
			rc = -ETIMEDOUT;
			break;
		}
		if (bench_interrupted) {
			rc = -EINTR;
			break;
		}
		if (now >= deadline && sent < records) {
			records = sent;
			if (in_txn) {
				if ((rc = txn_commit(rk, r, label)) < 0)
					break;
				in_txn = 0;
			}
		}
	}
	r->seconds = (double)(bench_now_ns() - t0) / 1e9;
	if (proc_rss_kb(br->pid) > r->peak_rss_kb)
		r->peak_rss_kb = proc_rss_kb(br->pid);
	r->records = pc.acked;
	r->bytes = pc.acked_bytes;
	r->errors = pc.failed;
	if (!rc && txn)
		fprintf(stderr, "%s: %" PRIu64 " records acknowledged in %.2f s, %" PRIu64 " transactions "
			"committed\n", label, pc.acked, r->seconds, r->txns);
	else if (!rc)
		fprintf(stderr, "%s: %" PRIu64 " records acknowledged in %.2f s\n", label, pc.acked, r->seconds);
	rd_kafka_topic_destroy(rkt);
out:
	if (rc && in_txn) {
		/* purges what is queued; waits at most 5 s for what is in flight */
		rd_kafka_error_t *e = rd_kafka_abort_transaction(rk, 5000);

		if (e)
			txn_failed(label, "abort_transaction", e);
	}
	if (rc)
		rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
	rd_kafka_flush(rk, 5000);
	rd_kafka_destroy(rk);
	free(buf);
	return rc;
}

/* ---- consume ------------------------------------------------------------ */

struct cons_check {
	int partitions;
	int size;
	int64_t *next_off;          /* per partition: the offset expected next */
	uint8_t *seen;              /* bitmap of record indexes */
	uint64_t nrecords;
	uint64_t bad;
	char first_bad[256];
};

static void cons_bad(struct cons_check *cc, const char *fmt, int32_t p, int64_t off, uint64_t idx)
{
	if (!cc->bad++)
		snprintf(cc->first_bad, sizeof(cc->first_bad), "partition %d offset %" PRId64 " index %"
			 PRIu64 ": %s", p, off, idx, fmt);
}

/* Check one record: size, partition = index mod P, contiguous offsets, no
 * duplicate index (only when indexes are < nrecords: the produce bench). */
static void cons_check_msg(struct cons_check *cc, const rd_kafka_message_t *m)
{
	uint64_t idx = 0;
	int32_t p = m->partition;

	if (p < 0 || p >= cc->partitions) {
		cons_bad(cc, "partition out of range", p, m->offset, 0);
		return;
	}
	if ((int)m->len != cc->size) {
		cons_bad(cc, "wrong length", p, m->offset, 0);
		return;
	}
	memcpy(&idx, m->payload, 8);
	if (m->offset != cc->next_off[p])
		cons_bad(cc, "offset not contiguous", p, m->offset, idx);
	cc->next_off[p] = m->offset + 1;
	if (cc->seen) {
		if (idx >= cc->nrecords || (int)(idx % (uint64_t)cc->partitions) != p)
			cons_bad(cc, "index does not belong here", p, m->offset, idx);
		else if (cc->seen[idx >> 3] & (1u << (idx & 7)))
			cons_bad(cc, "duplicate record", p, m->offset, idx);
		else
			cc->seen[idx >> 3] |= (uint8_t)(1u << (idx & 7));
	}
}

struct consumer {
	rd_kafka_t *rk;
	rd_kafka_topic_t *rkt;
	rd_kafka_queue_t *q;
	struct client_errs errs;
	int partitions;
	int part_mod, part_rem;     /* partitions p % part_mod == part_rem (mod 0: all) */
};

static int consumer_has(const struct consumer *c, int p)
{
	return c->part_mod <= 1 || p % c->part_mod == c->part_rem;
}

/* The topic's partition count from a metadata request (every partition
 * with a leader), or -errno. */
static int topic_partitions(rd_kafka_t *rk, rd_kafka_topic_t *rkt)
{
	const struct rd_kafka_metadata *md;
	rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
	int n = -EIO;

	if (err) {
		fprintf(stderr, "kafka: consumer: metadata: %s\n", rd_kafka_err2str(err));
		return -EIO;
	}
	if (md->topic_cnt == 1 && !md->topics[0].err) {
		n = md->topics[0].partition_cnt;
		for (int j = 0; j < md->topics[0].partition_cnt; j++)
			if (md->topics[0].partitions[j].leader < 0)
				n = -EAGAIN;
	}
	rd_kafka_metadata_destroy(md);
	return n;
}

static int consumer_open(struct consumer *c, const struct opts *o, const struct broker *br,
			 const char *topic, int64_t start)
{
	rd_kafka_topic_partition_list_t *offs;
	rd_kafka_conf_t *conf;
	char err[256];
	int rc;

	memset(c, 0, sizeof(*c));
	c->partitions = o->partitions;
	c->part_mod = o->part_mod;
	c->part_rem = o->part_rem;
	conf = base_conf(br->bootstrap, &c->errs);
	if (!conf || conf_set(conf, "enable.auto.commit", "false") < 0 ||
	    conf_set(conf, "enable.auto.offset.store", "false") < 0 ||
	    conf_set(conf, "fetch.wait.max.ms", "100") < 0 ||
	    conf_set(conf, "fetch.message.max.bytes", "4194304") < 0 ||
	    conf_set(conf, "fetch.max.bytes", "52428800") < 0 ||
	    conf_set(conf, "queued.min.messages", "1000000") < 0 ||
	    conf_set(conf, "queued.max.messages.kbytes", "262144") < 0 ||
	    conf_set(conf, "fetch.error.backoff.ms", "10") < 0 ||
	    conf_set(conf, "group.id", "sluice-bench") < 0) {
		if (conf)
			rd_kafka_conf_destroy(conf);
		return -EINVAL;
	}
	c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!c->rk) {
		fprintf(stderr, "kafka: consumer: %s\n", err);
		return -EINVAL;
	}
	c->rkt = rd_kafka_topic_new(c->rk, topic, NULL);
	/* Ask for the topic's metadata first, as a simple-consumer application
	 * does to learn its partitions: rd_kafka_metadata connects at once,
	 * where waiting in rd_kafka_clusterid waits for librdkafka's 1 s timer
	 * (sparse connections: nothing else asks for a connection yet). */
	if ((rc = topic_partitions(c->rk, c->rkt)) != o->partitions) {
		if (rc >= 0)
			fprintf(stderr, "kafka: consumer: topic %s has %d partitions, expected %d\n", topic,
				rc, o->partitions);
		else
			fprintf(stderr, "kafka: consumer: no metadata with a leader for every partition of "
				"%s\n", topic);
		return -EIO;
	}
	if (check_cluster(c->rk, br) < 0)
		return -EADDRINUSE;
	c->q = rd_kafka_queue_new(c->rk);
	/* Start at explicit offsets from one ListOffsets for the topic (-2 and
	 * -1, the logical BEGINNING and END, are also ListOffsets' timestamps
	 * for the log start and end). Given a logical offset, consume_start
	 * sends that ListOffsets itself, but librdkafka 2.0.2 retries it 500 ms
	 * later when the partition has not yet joined its broker thread ("no
	 * current leader for partition"): 4 starts of 30 here. */
	offs = rd_kafka_topic_partition_list_new(o->partitions);
	for (int p = 0; p < o->partitions; p++)
		if (consumer_has(c, p))
			rd_kafka_topic_partition_list_add(offs, topic, p)->offset = start;
	if (start == RD_KAFKA_OFFSET_BEGINNING || start == RD_KAFKA_OFFSET_END) {
		rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(c->rk, offs, 10000);

		for (int i = 0; !e && i < offs->cnt; i++)
			e = offs->elems[i].err ? offs->elems[i].err :
			    offs->elems[i].offset < 0 ? RD_KAFKA_RESP_ERR__NO_OFFSET : 0;
		if (e) {
			fprintf(stderr, "kafka: consumer: offsets of %s: %s\n", topic, rd_kafka_err2str(e));
			rd_kafka_topic_partition_list_destroy(offs);
			return -EIO;
		}
	}
	for (int i = 0; i < offs->cnt; i++)
		if (rd_kafka_consume_start_queue(c->rkt, offs->elems[i].partition, offs->elems[i].offset,
						 c->q) == -1) {
			fprintf(stderr, "kafka: consume_start %s [%d]: %s\n", topic, offs->elems[i].partition,
				rd_kafka_err2str(rd_kafka_last_error()));
			rd_kafka_topic_partition_list_destroy(offs);
			return -EIO;
		}
	rd_kafka_topic_partition_list_destroy(offs);
	return 0;
}

static void consumer_close(struct consumer *c)
{
	if (c->rkt) {
		for (int p = 0; p < c->partitions; p++)
			if (consumer_has(c, p))
				rd_kafka_consume_stop(c->rkt, p);
		rd_kafka_topic_destroy(c->rkt);
	}
	if (c->q)
		rd_kafka_queue_destroy(c->q);
	if (c->rk)
		rd_kafka_destroy(c->rk);
	memset(c, 0, sizeof(*c));
}

#define BATCH 10000

int kafka_consume(const struct opts *o, struct broker *br, const char *topic, uint64_t records,
		  struct run *r, const char *label)
{
	struct consumer c;
	struct cons_check cc = { .partitions = o->partitions, .size = o->size, .nrecords = records };
	rd_kafka_message_t **msgs = calloc(BATCH, sizeof(*msgs));
	uint64_t t0, got = 0, bytes = 0, last_done = 0, last_t, next_tick, stall_t, first_t = 0;
	volatile int *stop = r->stop;
	int rc;

	memset(r, 0, sizeof(*r));
	r->stop = stop;
	hist_init(&r->lat);
	/* A share of the partitions (o->part_mod): its records' indexes run
	 * up to about part_mod times its count. Unbounded (a run the caller
	 * stops): no duplicate bitmap, offsets are still checked. */
	if (o->part_mod > 1)
		cc.nrecords = records * (uint64_t)o->part_mod + (uint64_t)o->partitions;
	cc.next_off = calloc((size_t)o->partitions, sizeof(*cc.next_off));
	cc.seen = cc.nrecords <= KAFKA_CHECKED_MAX ? calloc(cc.nrecords / 8 + 1, 1) : NULL;
	if (!msgs || !cc.next_off || (!cc.seen && cc.nrecords <= KAFKA_CHECKED_MAX)) {
		rc = -ENOMEM;
		goto out0;
	}
	fprintf(stderr, "%s: reading %" PRIu64 " records from %s (%d partitions%s), simple consumer, "
		"one queue\n", label, records, topic, o->partitions, o->part_mod > 1 ? ", a share" : "");
	t0 = last_t = stall_t = bench_now_ns();
	rc = consumer_open(&c, o, br, topic, RD_KAFKA_OFFSET_BEGINNING);
	next_tick = t0 + 1000000000ull;
	while (!rc && got < records && !(stop && *stop)) {
		/* one record (waiting up to 100 ms), then what is already queued:
		 * a partial batch is never held back for its timeout */
		rd_kafka_message_t *first = rd_kafka_consume_queue(c.q, 100);
		ssize_t n = 0;
		uint64_t now = bench_now_ns();

		if (first) {
			if (!first_t) {
				first_t = now;
				fprintf(stderr, "%s: first record after %.3f s (connect, metadata, "
					"ListOffsets, first Fetch)\n", label, (double)(now - t0) / 1e9);
			}
			msgs[0] = first;
			n = rd_kafka_consume_batch_queue(c.q, 0, msgs + 1, BATCH - 1);
			n = (n < 0 ? 0 : n) + 1;
		}

		for (ssize_t i = 0; i < n; i++) {
			rd_kafka_message_t *m = msgs[i];

			if (m->err) {
				if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
					fprintf(stderr, "consume: %s [%d]: %s\n", topic, m->partition,
						rd_kafka_message_errstr(m));
					rc = -EIO;
				}
			} else {
				cons_check_msg(&cc, m);
				got++;
				bytes += m->len;
			}
			rd_kafka_message_destroy(m);
		}
		if (n > 0)
			stall_t = now;
		r->live = got;
		if (cc.bad) {
			fprintf(stderr, "consume: WRONG DATA: %s (%" PRIu64 " bad records so far)\n",
				cc.first_bad, cc.bad);
			rc = -EBADMSG;
		}
		if (now >= next_tick) {
			progress(label, got, records, t0, &last_done, &last_t, br, &r->peak_rss_kb, NULL);
			next_tick += 1000000000ull;
			if (!broker_alive(br))
				rc = -ECHILD;
		}
		if (c.errs.fatal) {
			fprintf(stderr, "consume: client: %s\n", c.errs.first);
			rc = -EIO;
		}
		if (now - stall_t > STALL_TIMEOUT * 1000000000ull) {
			fprintf(stderr, "consume: nothing received for %d s (%" PRIu64 " of %" PRIu64
				"): broker stalled\n", STALL_TIMEOUT, got, records);
			rc = -ETIMEDOUT;
		}
		if (bench_interrupted)
			rc = -EINTR;
	}
	r->seconds = (double)(bench_now_ns() - t0) / 1e9;
	if (proc_rss_kb(br->pid) > r->peak_rss_kb)
		r->peak_rss_kb = proc_rss_kb(br->pid);
	r->records = got;
	r->bytes = bytes;
	if (!rc)
		fprintf(stderr, "%s: %" PRIu64 " records in %.2f s, all checked (%.2f s from the first "
			"record)\n", label, got, r->seconds, first_t ? (double)(bench_now_ns() - first_t) / 1e9 : 0.0);
	consumer_close(&c);
out0:
	free(msgs);
	free(cc.next_off);
	free(cc.seen);
	return rc;
}

/* ---- e2e ---------------------------------------------------------------- */

struct e2e_reader {
	struct consumer c;
	struct hist lat;
	uint64_t warm_until;        /* records sent before this are not counted */
	uint64_t got, counted;
	volatile int stop;
	int rc;
	struct cons_check cc;
};

static void *e2e_reader_main(void *arg)
{
	struct e2e_reader *rd = arg;
	rd_kafka_message_t **msgs = calloc(BATCH, sizeof(*msgs));

	while (!rd->stop && msgs) {
		/* consume_batch_queue waits for a full batch or its timeout, which
		 * at a steady rate adds up to the whole timeout to every record:
		 * wait for one record, then take what else is already there */
		rd_kafka_message_t *first = rd_kafka_consume_queue(rd->c.q, 50);
		ssize_t n = 0;
		uint64_t now = bench_now_ns();

		if (first) {
			msgs[0] = first;
			n = rd_kafka_consume_batch_queue(rd->c.q, 0, msgs + 1, BATCH - 1);
			n = (n < 0 ? 0 : n) + 1;
		}

		for (ssize_t i = 0; i < n; i++) {
			rd_kafka_message_t *m = msgs[i];
			uint64_t ts;

			if (m->err) {
				if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && !rd->rc) {
					fprintf(stderr, "e2e: consumer [%d]: %s\n", m->partition,
						rd_kafka_message_errstr(m));
					rd->rc = -EIO;
				}
			} else if (m->len >= 16) {
				cons_check_msg(&rd->cc, m);
				memcpy(&ts, (const uint8_t *)m->payload + 8, 8);
				rd->got++;
				if (ts >= rd->warm_until) {
					hist_add(&rd->lat, now > ts ? now - ts : 0);
					rd->counted++;
				}
			}
			rd_kafka_message_destroy(m);
		}
	}
	free(msgs);
	return NULL;
}

int kafka_e2e(const struct opts *o, struct broker *br, const char *topic, struct run *r)
{
	struct prod_ctx pc = { 0 };
	struct e2e_reader *rd = calloc(1, sizeof(*rd));
	rd_kafka_t *rk = NULL;
	rd_kafka_topic_t *rkt = NULL;
	uint8_t *buf = calloc(1, (size_t)o->size + 16);
	double secs = o->seconds > 0 ? o->seconds : 10;
	uint64_t total = (uint64_t)((secs + 1) * (double)o->rate), sent = 0, t0, next_tick;
	uint64_t last_done = 0, last_t, end_wait;
	pthread_t th;
	int rc = 0, started = 0, linger = o->linger_ms >= 0 ? o->linger_ms : 1;

	memset(r, 0, sizeof(*r));
	hist_init(&r->lat);
	if (!rd || !buf) {
		free(rd);
		free(buf);
		return -ENOMEM;
	}
	hist_init(&rd->lat);
	rd->cc.partitions = o->partitions;
	rd->cc.size = o->size;
	rd->cc.next_off = calloc((size_t)o->partitions, sizeof(*rd->cc.next_off));
	if (o->size < 16) {
		fprintf(stderr, "e2e: --size must be at least 16 (index and timestamp)\n");
		rc = -EINVAL;
		goto out;
	}
	if ((rc = consumer_open(&rd->c, o, br, topic, RD_KAFKA_OFFSET_END)) < 0)
		goto out;
	rd->warm_until = UINT64_MAX;
	if (pthread_create(&th, NULL, e2e_reader_main, rd)) {
		rc = -EAGAIN;
		goto out;
	}
	started = 1;
	rk = new_producer(o, br->bootstrap, &pc, linger);
	if (!rk) {
		rc = -EINVAL;
		goto out;
	}
	if ((rc = check_cluster(rk, br)) < 0)
		goto out;
	rkt = rd_kafka_topic_new(rk, topic, NULL);
	/* let the consumer reach the end of every partition */
	usleep(1500000);
	for (int i = 0; i < o->size; i++)
		buf[i] = (uint8_t)('a' + i % 26);
	fprintf(stderr, "e2e: %" PRIu64 " records/s for %.0f s (+1 s warm-up), %d bytes, %d partitions, "
		"acks=%d, linger.ms=%d, compression=%s\n", o->rate, secs, o->size, o->partitions, o->acks,
		linger, o->compression);
	t0 = last_t = bench_now_ns();
	rd->warm_until = t0 + 1000000000ull;
	next_tick = t0 + 1000000000ull;
	while (sent < total && !bench_interrupted) {
		uint64_t now = bench_now_ns();
		/* record k is due at k / rate: it goes once that time has come */
		uint64_t due = (uint64_t)((double)(now - t0) * (double)o->rate / 1e9) + 1;

		if (due > total)
			due = total;
		while (sent < due) {
			/* the time this record was due: a late producer counts */
			uint64_t ts = t0 + (uint64_t)((double)sent * 1e9 / (double)o->rate);

			fill_payload(buf, o->size, sent, ts);
			if (rd_kafka_produce(rkt, (int32_t)(sent % (uint64_t)o->partitions),
					     RD_KAFKA_MSG_F_COPY, buf, (size_t)o->size, NULL, 0, NULL) == -1) {
				if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
					rc = -EIO;
					break;
				}
				rd_kafka_poll(rk, 1);
				continue;
			}
			sent++;
		}
		rd_kafka_poll(rk, 0);
		if (rc)
			break;
		if (now >= next_tick) {
			char extra[96];

			snprintf(extra, sizeof(extra), "(sent %" PRIu64 ", received %" PRIu64 ")", sent, rd->got);
			progress("e2e", rd->got, total, t0, &last_done, &last_t, br, &r->peak_rss_kb, extra);
			next_tick += 1000000000ull;
			if (!broker_alive(br)) {
				rc = -ECHILD;
				break;
			}
		}
		if (pc.failed || pc.errs.fatal || rd->rc || rd->cc.bad)
			break;
		{
			struct timespec ts = { 0, 50000 };  /* 50 us */

			nanosleep(&ts, NULL);
		}
	}
	r->seconds = (double)(bench_now_ns() - t0) / 1e9;
	/* wait for the tail */
	end_wait = bench_now_ns() + 10000000000ull;
	while (!rc && rd->got < sent && bench_now_ns() < end_wait && !pc.failed)
		rd_kafka_poll(rk, 10);
	if (pc.failed) {
		fprintf(stderr, "e2e: delivery failed: %s\n", rd_kafka_err2str(pc.first_err));
		rc = -EIO;
	}
	if (!rc && rd->cc.bad) {
		fprintf(stderr, "e2e: WRONG DATA: %s\n", rd->cc.first_bad);
		rc = -EBADMSG;
	}
	if (!rc && rd->rc)
		rc = rd->rc;
	if (!rc && rd->got != sent) {
		fprintf(stderr, "e2e: sent %" PRIu64 ", received %" PRIu64 " after 10 s\n", sent, rd->got);
		rc = -EIO;
	}
out:
	if (started) {
		rd->stop = 1;
		pthread_join(th, NULL);
	}
	r->records = rd->got;
	r->bytes = rd->got * (uint64_t)o->size;
	hist_merge(&r->lat, &rd->lat);
	if (!rc)
		fprintf(stderr, "e2e: %" PRIu64 " records sent and received, %" PRIu64 " after warm-up timed\n",
			sent, rd->counted);
	if (rkt)
		rd_kafka_topic_destroy(rkt);
	if (rk) {
		rd_kafka_flush(rk, 5000);
		rd_kafka_destroy(rk);
	}
	consumer_close(&rd->c);
	free(rd->cc.next_off);
	free(rd);
	free(buf);
	return rc;
}

/* ---- options ------------------------------------------------------------ */

static void usage(FILE *f, const char *cmd)
{
	fprintf(f,
		"usage: sluice-bench %s [options]\n"
		"\n"
		"Drives the broker through librdkafka over TCP. By default starts its own\n"
		"broker (sluiced next to sluice-bench, free port, data under /var/tmp,\n"
		"removed at the end). Progress on stderr, results on stdout.\n"
		"\n"
		"  produce   N records as fast as possible; records/s, MB/s, ack latency\n"
		"  consume   produce N, then read them all (simple consumer); records/s, MB/s\n"
		"  e2e       produce at --rate while consuming; end-to-end latency\n"
		"  idle      T topics x P partitions idle: broker RSS and disk; then RSS\n"
		"            during a produce run\n"
		"\n"
		"  --bootstrap HOST:PORT   use this broker instead of starting one\n"
		"  --broker-pid PID        with --bootstrap: the broker process, for RSS\n"
		"  --broker-dir DIR        with --bootstrap: its data dir, for disk use\n"
		"  --shards N              broker shards (default 0: one per core)\n"
		"  --set KEY=VALUE         extra broker setting (repeatable)\n"
		"  --records N             records (default 5000000; suffix K/M)\n"
		"  --size BYTES            record value size (default 100)\n"
		"  --partitions P          partitions of the topic (default 6; idle: 100)\n"
		"  --topics T              idle: topics (default 100)\n"
		"  --acks N                0, 1 or -1 (default 1)\n"
		"  --compression CODEC     none|gzip|snappy|lz4|zstd (default none)\n"
		"  --linger-ms MS          producer linger.ms (default 5; e2e 1)\n"
		"  --seconds S             produce: stop sending after S s; e2e: duration\n"
		"                          (default 10)\n"
		"  --rate R                e2e: records/s (default 200000)\n"
		"  --compare-shards        produce and consume: run with --shards 1 and 2\n"
		"  --idempotent            produce with enable.idempotence=true (acks=all)\n"
		"  --compare-idempotent    produce: plain then idempotent, twice, alternating,\n"
		"                          both with acks=all; records/s and their ratio\n"
		"                          and print both and the ratio\n"
		"  --transactional N       produce with a transactional producer (idempotent,\n"
		"                          acks=all) in transactions of N records: begin,\n"
		"                          produce N, commit; also commit latency (the time\n"
		"                          of each rd_kafka_commit_transaction, which flushes\n"
		"                          the transaction's records, then ends it)\n"
		"  --compare-transactional N\n"
		"                          produce: plain, idempotent and transactional (N\n"
		"                          records per transaction), twice, alternating, all\n"
		"                          with acks=all; records/s, the ratios to plain and\n"
		"                          the commit latency\n"
		"  --help                  this text\n", cmd);
}

int bad_option(const char *cmd, const char *opt, const char *why)
{
	fprintf(stderr, "sluice-bench %s: %s: %s\n", cmd, opt, why);
	fprintf(stderr, "`sluice-bench %s --help` for the options.\n", cmd);
	return 2;
}

int parse_count(const char *s, uint64_t *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	if (*end == 'k' || *end == 'K')
		v *= 1e3, end++;
	else if (*end == 'm' || *end == 'M')
		v *= 1e6, end++;
	else if (*end == 'g' || *end == 'G')
		v *= 1e9, end++;
	if (*end)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	uint64_t v;
	int parts_set = 0, acks_set = 0;

	o->records = 5000000;
	o->size = 100;
	o->partitions = 6;
	o->topics = 100;
	o->acks = 1;
	o->shards = 0;
	o->rate = 200000;
	o->compression = "none";
	o->linger_ms = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL, *eq = strchr(a, '=');
		char name[32];
		size_t nl = eq ? (size_t)(eq - a) : strlen(a);

		if (nl >= sizeof(name))
			return bad_option(o->cmd, a, "unknown option");
		memcpy(name, a, nl);
		name[nl] = 0;
		if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
			usage(stdout, o->cmd);
			return 0;
		}
		if (!strcmp(name, "--idempotent")) {
			o->idempotent = 1;
			o->acks = -1;
			continue;
		}
		if (!strcmp(name, "--compare-idempotent")) {
			o->compare_idempotent = 1;
			o->acks = -1;
			continue;
		}
		if (!strcmp(name, "--compare-shards")) {
			o->compare_shards = 1;
			continue;
		}
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return bad_option(o->cmd, name, "needs a value");
		if (!strcmp(name, "--bootstrap")) {
			o->bootstrap = val;
		} else if (!strcmp(name, "--broker-pid")) {
			o->broker_pid = atoi(val);
		} else if (!strcmp(name, "--broker-dir")) {
			o->broker_dir = val;
		} else if (!strcmp(name, "--set")) {
			if (!strchr(val, '=') || o->nsets >= 16)
				return bad_option(o->cmd, name, "expects KEY=VALUE (at most 16)");
			o->sets[o->nsets++] = val;
		} else if (!strcmp(name, "--records")) {
			if (parse_count(val, &o->records) < 0 || !o->records || o->records > 1000000000)
				return bad_option(o->cmd, name, "expects a count in [1, 1G]");
		} else if (!strcmp(name, "--transactional") || !strcmp(name, "--compare-transactional")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > 1000000)
				return bad_option(o->cmd, name, "expects records per transaction in [1, 1M]");
			if (name[2] == 't')
				o->transactional = (int)v;
			else
				o->compare_transactional = (int)v;
		} else if (!strcmp(name, "--size")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > 900000)
				return bad_option(o->cmd, name, "expects bytes in [1, 900000]");
			o->size = (int)v;
		} else if (!strcmp(name, "--partitions")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > MAX_PARTS)
				return bad_option(o->cmd, name, "expects a count in [1, 100000]");
			o->partitions = (int)v;
			parts_set = 1;
		} else if (!strcmp(name, "--topics")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > 10000)
				return bad_option(o->cmd, name, "expects a count in [1, 10000]");
			o->topics = (int)v;
		} else if (!strcmp(name, "--acks")) {
			if (strcmp(val, "0") && strcmp(val, "1") && strcmp(val, "-1") && strcmp(val, "all"))
				return bad_option(o->cmd, name, "expects 0, 1, -1 or all");
			o->acks = !strcmp(val, "all") ? -1 : atoi(val);
			acks_set = 1;
		} else if (!strcmp(name, "--shards")) {
			if (parse_count(val, &v) < 0 || v > 64)
				return bad_option(o->cmd, name, "expects 0..64");
			o->shards = (int)v;
		} else if (!strcmp(name, "--seconds")) {
			char *end;

			o->seconds = strtod(val, &end);
			if (end == val || *end || !(o->seconds > 0) || o->seconds > 3600)
				return bad_option(o->cmd, name, "expects seconds in (0, 3600]");
		} else if (!strcmp(name, "--rate")) {
			if (parse_count(val, &o->rate) < 0 || !o->rate || o->rate > 100000000)
				return bad_option(o->cmd, name, "expects records/s in [1, 100M]");
		} else if (!strcmp(name, "--compression")) {
			if (strcmp(val, "none") && strcmp(val, "gzip") && strcmp(val, "snappy") &&
			    strcmp(val, "lz4") && strcmp(val, "zstd"))
				return bad_option(o->cmd, name, "expects none, gzip, snappy, lz4 or zstd");
			o->compression = val;
		} else if (!strcmp(name, "--linger-ms")) {
			if (parse_count(val, &v) < 0 || v > 10000)
				return bad_option(o->cmd, name, "expects 0..10000");
			o->linger_ms = (int)v;
		} else {
			return bad_option(o->cmd, a, "unknown option");
		}
	}
	if (o->mode == M_IDLE && !parts_set)
		o->partitions = 100;
	if (o->compare_shards && (o->bootstrap || (o->mode != M_PRODUCE && o->mode != M_CONSUME)))
		return bad_option(o->cmd, "--compare-shards", "only for produce and consume, with our own broker");
	if (o->transactional || o->compare_transactional) {
		const char *opt = o->transactional ? "--transactional" : "--compare-transactional";

		if (o->mode != M_PRODUCE)
			return bad_option(o->cmd, opt, "only for produce");
		if (o->transactional && o->compare_transactional)
			return bad_option(o->cmd, opt, "not with --compare-transactional (it runs transactional)");
		if (o->compare_idempotent)
			return bad_option(o->cmd, opt, "not with --compare-idempotent");
		if (o->compare_shards)
			return bad_option(o->cmd, opt, "not with --compare-shards");
		if (o->compare_transactional && o->idempotent)
			return bad_option(o->cmd, opt, "not with --idempotent (it runs plain, idempotent "
					  "and transactional)");
		if (acks_set && o->acks != -1)
			return bad_option(o->cmd, "--acks", o->transactional ?
					  "--transactional needs acks=all (-1)" :
					  "--compare-transactional runs with acks=all (-1)");
		o->acks = -1;
	}
	if (o->mode == M_E2E && o->size < 16)
		return bad_option(o->cmd, "--size", "e2e needs at least 16 bytes");
	if (o->mode != M_E2E && o->size < 8)
		return bad_option(o->cmd, "--size", "needs at least 8 bytes (the record index)");
	return -1;
}

/* ---- driver ------------------------------------------------------------- */

static int open_broker(const struct opts *o, struct broker *br, int shards)
{
	if (o->bootstrap) {
		memset(br, 0, sizeof(*br));
		br->out_fd = -1;
		br->pid = 0;
		snprintf(br->bootstrap, sizeof(br->bootstrap), "%s", o->bootstrap);
		br->shards = -1;
		return 0;
	}
	return broker_start(br, shards, o);
}

static pid_t rss_pid(const struct opts *o, const struct broker *br)
{
	return o->bootstrap ? o->broker_pid : br->pid;
}

static void print_header(const struct opts *o, const struct broker *br, const char *extra)
{
	char shards[400];

	if (br->shards < 0)
		snprintf(shards, sizeof(shards), "external broker %s", br->bootstrap);
	else
		snprintf(shards, sizeof(shards), "shards=%d%s", br->shards, br->shards ? "" : " (one per core)");
	printf("# sluice-bench %s: %d-byte records, %d partitions, acks=%d, compression=%s, %s%s%s; "
	       "MB = 10^6 bytes of record values; latency in ms\n", o->cmd, o->size, o->partitions, o->acks,
	       o->compression, shards, extra ? ", " : "", extra ? extra : "");
}

static void print_target(double v, double target, int at_most)
{
	if (target <= 0) {
		putchar('\n');
		return;
	}
	printf("  (target %s %.10g: %s)\n", at_most ? "<=" : ">=", target,
	       (at_most ? v <= target : v >= target) ? "ok" : "missed");
}

static void print_rate_rows(const char *b, const struct run *r, double target)
{
	printf("%s records %" PRIu64 "\n", b, r->records);
	printf("%s seconds %.3f\n", b, r->seconds);
	printf("%s records_per_s %.0f", b, rate_of(r->records, r->seconds));
	print_target(rate_of(r->records, r->seconds), target, 0);
	printf("%s MB_per_s %.1f\n", b, rate_of(r->bytes, r->seconds) / 1e6);
}

static void print_lat_rows(const char *b, const char *what, const struct hist *h, double p99_target)
{
	printf("%s %s_p50_ms %.3f\n", b, what, ms(hist_percentile(h, 50)));
	printf("%s %s_p99_ms %.3f", b, what, ms(hist_percentile(h, 99)));
	print_target(ms(hist_percentile(h, 99)), p99_target, 1);
	printf("%s %s_p99.9_ms %.3f\n", b, what, ms(hist_percentile(h, 99.9)));
	printf("%s %s_max_ms %.3f\n", b, what, ms(h->max));
}

/* One broker: produce (and consume) N records. */
static int produce_consume(const struct opts *o, int shards, int consume, struct run *pr, struct run *cr,
			   struct broker *br)
{
	int rc, rc2;

	if ((rc = open_broker(o, br, shards)) < 0)
		return rc;
	{
		char topic[64];

		snprintf(topic, sizeof(topic), "bench-%d-%d", (int)getpid(), (int)(bench_now_ns() % 100000));
		if (!(rc = create_topics(br->bootstrap, topic, 1, 1, o->partitions)))
			rc = kafka_produce(o, br, topic, o->records, pr, consume ? "consume: pre-produce" : "produce");
		if (!rc && consume)
			rc = kafka_consume(o, br, topic, pr->records, cr, "consume");
	}
	if (!o->bootstrap) {
		rc2 = broker_stop(br);
		if (!rc && rc2)
			rc = -EIO;
	}
	return rc;
}

static struct run runs[4];
static struct hist commit_all;      /* --compare-transactional: both rounds */

/* --compare-transactional N: plain, idempotent, transactional, twice. */
static int compare_transactional(const struct opts *o)
{
	static const char *const name[3] = { "plain", "idempotent", "transactional" };
	struct broker br;
	struct opts v = *o;
	double rate[2][3];
	uint64_t txns = 0, retries = 0;
	char extra[160];

	hist_init(&commit_all);
	for (int round = 0; round < 2; round++)
		for (int k = 0; k < 3; k++) {
			struct run *pr = &runs[k];

			v.idempotent = k == 1;
			v.transactional = k == 2 ? o->compare_transactional : 0;
			fprintf(stderr, "kafka: --compare-transactional: round %d, %s\n", round + 1, name[k]);
			if (produce_consume(&v, o->shards, 0, pr, &runs[3], &br) < 0)
				return 1;
			rate[round][k] = rate_of(pr->records, pr->seconds);
			if (k == 2) {
				hist_merge(&commit_all, &pr->commit);
				txns += pr->txns;
				retries += pr->commit_retries;
			}
		}
	snprintf(extra, sizeof(extra), "--compare-transactional %d (acks=all; plain, idempotent and "
		 "transactional alternating, 2 rounds)", o->compare_transactional);
	print_header(o, &br, extra);
	printf("%-30s %12s %12s %13s %10s %10s\n", "metric", "plain", "idempotent", "transactional",
	       "idem/plain", "txn/plain");
	for (int round = 0; round <= 2; round++) {
		/* rounds 1 and 2, then their mean */
		double a = round < 2 ? rate[round][0] : (rate[0][0] + rate[1][0]) / 2;
		double b = round < 2 ? rate[round][1] : (rate[0][1] + rate[1][1]) / 2;
		double c = round < 2 ? rate[round][2] : (rate[0][2] + rate[1][2]) / 2;
		char row[40];

		if (round < 2)
			snprintf(row, sizeof(row), "produce_records_per_s_round%d", round + 1);
		else
			snprintf(row, sizeof(row), "produce_records_per_s_mean");
		printf("%-30s %12.0f %12.0f %13.0f %10.3f %10.3f\n", row, a, b, c, a > 0 ? b / a : 0,
		       a > 0 ? c / a : 0);
	}
	printf("produce records_per_transaction %d\n", o->compare_transactional);
	printf("produce transactions %" PRIu64 "\n", txns);
	printf("produce commit_retries %" PRIu64 "\n", retries);
	print_lat_rows("produce", "commit", &commit_all, 0);
	return 0;
}

static int cmd_produce_consume(const struct opts *o)
{
	struct broker br;
	int consume = o->mode == M_CONSUME;
	const char *b = consume ? "consume" : "produce";
	double target = consume ? 2000000 : 1000000;
	int rc;

	if (o->compare_transactional)
		return compare_transactional(o);
	if (o->compare_idempotent) {
		/* plain, idempotent, plain, idempotent: the machine drifts */
		struct opts v = *o;
		double rate[2][2];

		if (consume || o->compare_shards)
			return bad_option(o->cmd, "--compare-idempotent", "only for produce, alone");
		for (int round = 0; round < 2; round++)
			for (int idem = 0; idem < 2; idem++) {
				struct run *pr = &runs[idem], *cr = &runs[2];

				v.idempotent = idem;
				fprintf(stderr, "kafka: --compare-idempotent: round %d, %s\n", round + 1,
					idem ? "idempotent" : "plain");
				if ((rc = produce_consume(&v, o->shards, 0, pr, cr, &br)) < 0)
					return 1;
				rate[round][idem] = rate_of(pr->records, pr->seconds);
			}
		print_header(o, &br, "--compare-idempotent (acks=all; plain and idempotent alternating, 2 rounds)");
		printf("%-30s %12s %12s %8s\n", "metric", "plain", "idempotent", "ratio");
		for (int round = 0; round < 2; round++)
			printf("produce_records_per_s_round%d  %12.0f %12.0f %8.3f\n", round + 1, rate[round][0],
			       rate[round][1], rate[round][0] > 0 ? rate[round][1] / rate[round][0] : 0);
		{
			double a = rate[0][0] + rate[1][0], b = rate[0][1] + rate[1][1];

			printf("produce_records_per_s_mean     %12.0f %12.0f %8.3f  (target >= 0.97: %s)\n", a / 2, b / 2,
			       a > 0 ? b / a : 0, a > 0 && b / a >= 0.97 ? "met" : "missed");
		}
		return 0;
	}
	if (!o->compare_shards) {
		struct run *pr = &runs[0], *cr = &runs[1];

		char extra[96];

		if ((rc = produce_consume(o, o->shards, consume, pr, cr, &br)) < 0)
			return 1;
		snprintf(extra, sizeof(extra), "transactional, %d records per transaction", o->transactional);
		print_header(o, &br, o->transactional ? extra : NULL);
		if (rss_pid(o, &br) || !o->bootstrap)
			printf("%s broker_peak_rss_MiB %.0f\n", b,
			       (double)(consume ? cr->peak_rss_kb : pr->peak_rss_kb) / 1024);
		if (consume) {
			print_rate_rows(b, cr, target);
		} else {
			print_rate_rows(b, pr, target);
			print_lat_rows(b, "ack", &pr->lat, 0);
			if (o->transactional) {
				printf("%s records_per_transaction %d\n", b, o->transactional);
				printf("%s transactions %" PRIu64 "\n", b, pr->txns);
				printf("%s commit_retries %" PRIu64 "\n", b, pr->commit_retries);
				print_lat_rows(b, "commit", &pr->commit, 0);
			}
		}
		return 0;
	}
	/* --compare-shards: produce and consume with 1 and 2 shards */
	for (int s = 1; s <= 2; s++) {
		fprintf(stderr, "kafka: --compare-shards: shards=%d\n", s);
		if ((rc = produce_consume(o, s, 1, &runs[2 * (s - 1)], &runs[2 * (s - 1) + 1], &br)) < 0)
			return 1;
	}
	br.shards = 1;
	print_header(o, &br, "--compare-shards (produce, then consume the same records, per broker)");
	printf("%-22s %12s %12s %8s\n", "metric", "shards=1", "shards=2", "ratio");
	{
		struct { const char *name; double a, b; } rows[] = {
			{ "produce_records_per_s", rate_of(runs[0].records, runs[0].seconds),
			  rate_of(runs[2].records, runs[2].seconds) },
			{ "produce_MB_per_s", rate_of(runs[0].bytes, runs[0].seconds) / 1e6,
			  rate_of(runs[2].bytes, runs[2].seconds) / 1e6 },
			{ "produce_ack_p99_ms", ms(hist_percentile(&runs[0].lat, 99)),
			  ms(hist_percentile(&runs[2].lat, 99)) },
			{ "consume_records_per_s", rate_of(runs[1].records, runs[1].seconds),
			  rate_of(runs[3].records, runs[3].seconds) },
			{ "consume_MB_per_s", rate_of(runs[1].bytes, runs[1].seconds) / 1e6,
			  rate_of(runs[3].bytes, runs[3].seconds) / 1e6 },
			{ "broker_peak_rss_MiB", (double)runs[0].peak_rss_kb / 1024,
			  (double)runs[2].peak_rss_kb / 1024 },
		};
		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
			printf("%-22s %12.1f %12.1f %8.2f\n", rows[i].name, rows[i].a, rows[i].b,
			       rows[i].a > 0 ? rows[i].b / rows[i].a : 0);
	}
	return 0;
}

static int cmd_e2e(const struct opts *o)
{
	struct broker br;
	struct run *r = &runs[0];
	char topic[64], extra[64];
	int rc, rc2;

	if ((rc = open_broker(o, &br, o->shards)) < 0)
		return 1;
	snprintf(topic, sizeof(topic), "e2e-%d-%d", (int)getpid(), (int)(bench_now_ns() % 100000));
	if (!(rc = create_topics(br.bootstrap, topic, 1, 1, o->partitions)))
		rc = kafka_e2e(o, &br, topic, r);
	if (!o->bootstrap && (rc2 = broker_stop(&br)) && !rc)
		rc = rc2;
	if (rc)
		return 1;
	snprintf(extra, sizeof(extra), "rate %" PRIu64 " records/s, linger.ms=%d", o->rate,
		 o->linger_ms >= 0 ? o->linger_ms : 1);
	print_header(o, &br, extra);
	if (!o->bootstrap || o->broker_pid)
		printf("e2e broker_peak_rss_MiB %.0f\n", (double)r->peak_rss_kb / 1024);
	printf("e2e records %" PRIu64 "\n", r->records);
	printf("e2e records_per_s %.0f\n", rate_of(r->records, r->seconds));
	printf("e2e timed_records %" PRIu64 "\n", r->lat.count);
	print_lat_rows("e2e", "latency", &r->lat, 5.0);
	return 0;
}

static int cmd_idle(const struct opts *o)
{
	struct broker br;
	struct run *pr = &runs[0];
	struct opts po = *o;
	uint64_t rss0, rss1 = 0, disk0, disk1 = 0, app1 = 0;
	const char *dir;
	int rc, rc2, nparts = o->topics * o->partitions;
	char prefix[64], topic[64];

	if ((rc = open_broker(o, &br, o->shards)) < 0)
		return 1;
	dir = o->bootstrap ? o->broker_dir : br.data;
	usleep(500000);
	rss0 = proc_rss_kb(rss_pid(o, &br));
	disk0 = dir ? du_bytes(dir, NULL) : 0;
	fprintf(stderr, "idle: broker RSS %.1f MiB, disk %.1f MiB before; creating %d topics x %d partitions\n",
		(double)rss0 / 1024, (double)disk0 / 1048576, o->topics, o->partitions);
	snprintf(prefix, sizeof(prefix), "idle-%d", (int)getpid());
	rc = create_topics(br.bootstrap, prefix, o->topics, 0, o->partitions);
	if (!rc) {
		fprintf(stderr, "idle: %d partitions created; letting them settle for 5 s\n", nparts);
		for (int i = 0; i < 5 && !bench_interrupted; i++) {
			sleep(1);
			fprintf(stderr, "idle: broker RSS %.1f MiB\n", (double)proc_rss_kb(rss_pid(o, &br)) / 1024);
		}
		rss1 = proc_rss_kb(rss_pid(o, &br));
		disk1 = dir ? du_bytes(dir, &app1) : 0;
		if (!broker_alive(&br))
			rc = -ECHILD;
	}
	if (!rc) {
		/* RSS while a produce runs next to the idle partitions */
		po.partitions = 6;
		snprintf(topic, sizeof(topic), "idle-produce-%d", (int)getpid());
		if (!(rc = create_topics(br.bootstrap, topic, 1, 1, 6)))
			rc = kafka_produce(&po, &br, topic, o->records, pr, "idle: produce");
	}
	if (!o->bootstrap && (rc2 = broker_stop(&br)) && !rc)
		rc = rc2;
	if (rc)
		return 1;
	print_header(o, &br, NULL);
	printf("idle partitions %d\n", nparts);
	printf("idle broker_rss_before_MiB %.1f\n", (double)rss0 / 1024);
	printf("idle broker_rss_MiB %.1f", (double)rss1 / 1024);
	print_target((double)rss1 / 1024, 1024, 1);
	printf("idle disk_reserved_GiB %.3f", (double)disk1 / (1 << 30));
	print_target((double)disk1 / (1 << 30), 10, 1);
	printf("idle disk_apparent_GiB %.3f\n", (double)app1 / (1 << 30));
	printf("idle disk_reserved_per_partition_KiB %.1f\n", (double)disk1 / 1024 / nparts);
	printf("idle rss_per_partition_KiB %.1f\n", (double)(rss1 - rss0) / nparts);
	printf("idle produce_records_per_s %.0f\n", rate_of(pr->records, pr->seconds));
	printf("idle produce_broker_peak_rss_MiB %.1f\n", (double)pr->peak_rss_kb / 1024);
	return 0;
}

static int bench_kafka(enum mode mode, const char *cmd, int argc, char **argv)
{
	struct opts o;
	struct sigaction sa = { .sa_handler = on_signal };
	int rc;

	memset(&o, 0, sizeof(o));
	o.mode = mode;
	o.cmd = cmd;
	if ((rc = parse_opts(argc, argv, &o)) >= 0)
		return rc;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	switch (mode) {
	case M_PRODUCE:
	case M_CONSUME:
		return cmd_produce_consume(&o);
	case M_E2E:
		return cmd_e2e(&o);
	case M_IDLE:
		return cmd_idle(&o);
	}
	return 2;
}

int bench_produce(int argc, char **argv)
{
	return bench_kafka(M_PRODUCE, "produce", argc, argv);
}

int bench_consume(int argc, char **argv)
{
	return bench_kafka(M_CONSUME, "consume", argc, argv);
}

int bench_e2e(int argc, char **argv)
{
	return bench_kafka(M_E2E, "e2e", argc, argv);
}

int bench_idle(int argc, char **argv)
{
	return bench_kafka(M_IDLE, "idle", argc, argv);
}
