/* tests/integration/test_native_dpdk.c — libsluice_native's DPDK transport
 * (dataplane/native/native_client_dpdk.c) against a real build/sluiced,
 * over net_tap: the client's EAL creates a tap interface, the test gives
 * its kernel side an address (198.19.X.1/24) and starts the broker with
 * native.listen on it (the broker's kernel UDP socket); the client is
 * 198.19.X.2/24 on the DPDK port (its own ARP, IPv4, UDP). Topics are
 * created through Kafka's API (librdkafka, loopback TCP).
 *
 *  stream: the test starts the EAL (the client's dpdk_eal_args NULL: the
 *          application's EAL). 200,000 records to 2 partitions, every
 *          delivery report at the offset it landed at, everything fetched
 *          back natively over DPDK and compared byte for byte; a port
 *          that does not exist is named in the error.
 *  faults: the same over DPDK through the client's fault wrapper (1%
 *          loss, 1% duplication, 2% reordering, both ways): every record
 *          reported once at its offset, read back (through the faults)
 *          exactly once and in order, and the log holds no more (its high
 *          watermark).
 *  own-eal: the library starts the EAL from dpdk_eal_args (a helper
 *          thread configures the tap's kernel side once it appears and
 *          starts the broker while sluice_connect says HELLO); records
 *          there and back; sluice_close closes the port (the interface
 *          goes), stops the EAL and removes its runtime directory; a
 *          second connect is refused, saying why.
 *
 * The EAL starts once per process: each scenario runs in a child of its
 * own (a tap interface, a broker, a temporary directory each; all removed
 * at the end, by the parent when a child dies). Not Criterion: a plain
 * program. Output: "ok - ..." / "FAIL - ..." lines, "native_dpdk:" lines
 * (rates and counters, informational) and a summary. Where it cannot run
 * (not root, no /dev/net/tun, the EAL refuses) it prints "SKIPPED: <why>"
 * and exits 0: reported, never a silent pass. An argument (stream,
 * faults, own-eal) runs one scenario. SLUICE_FAULT_SEED sets the fault
 * seed (default 11).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "tests/integration/plain_check.h"
#include "dataplane/dpdk_port.h"
#include "dataplane/native/sluice_native.h"

#ifndef SLUICED_PATH
#define SLUICED_PATH "build/sluiced"
#endif

#define SKIP_EXIT 77
#define STREAM_N 200000
#define MEMIF_N 1000000              /* the million, both ends on DPDK */
#define FAULT_N 40000
#define OWN_N 5000
#define PARTS 2
#define FETCH_BYTES (256u << 10)      /* an answer of ~180 datagrams: well inside the tap's queue */


static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}


/* ================================================================ the rig */

/* One scenario's names (from the child's pid), tap and broker. */
struct rig {
	const char *scenario;
	char iface[IFNAMSIZ];
	char prefix[64], runtime[128];
	char kip[32];                 /* the tap's kernel side: the broker */
	char cip[40];                 /* the client's dpdk_address */
	char dir[128], data[160], log[160];
	char bootstrap[64], native[64];
	int tcp_port, udp_port, reserve_fd;
	pid_t broker;
	char eal_args[512];
	int memif;                    /* the broker on DPDK too: net_memif between it and the client */
	char broker_eal_kv[512], dpdk_listen_kv[64], broker_runtime[140];
};

static void rig_names(struct rig *r, const char *scenario, int pid)
{
	const char *base = getenv("SLUICE_TEST_DIR");
	int x = 1 + pid % 250;

	memset(r, 0, sizeof(*r));
	r->scenario = scenario;
	r->reserve_fd = -1;
	snprintf(r->iface, sizeof(r->iface), "slnd%d", pid % 1000000);
	snprintf(r->prefix, sizeof(r->prefix), "sluice-itest-ndpdk-%d", pid);
	snprintf(r->runtime, sizeof(r->runtime), "/var/run/dpdk/%s", r->prefix);
	snprintf(r->kip, sizeof(r->kip), "198.19.%d.1", x);
	snprintf(r->cip, sizeof(r->cip), "198.19.%d.2/24", x);
	snprintf(r->dir, sizeof(r->dir), "%s/sluice-itest-ndpdk-%d", base && *base ? base : "/var/tmp", pid);
	snprintf(r->data, sizeof(r->data), "%s/data", r->dir);
	snprintf(r->log, sizeof(r->log), "%s/broker.log", r->dir);
	snprintf(r->eal_args, sizeof(r->eal_args),
		 "--no-huge -m 256 --no-pci --no-shconf --no-telemetry -l 0 --file-prefix=%s "
		 "--vdev=net_tap0,iface=%s", r->prefix, r->iface);
	snprintf(r->broker_runtime, sizeof(r->broker_runtime), "%s-b", r->runtime);
}

/* The memif rig: the broker runs DPDK on a net_memif server port (the
 * socket in its directory) and answers on kip:9093 with its own stack; the
 * client is the memif client. No tap, no kernel network. */
static void rig_names_memif(struct rig *r, const char *scenario, int pid)
{
	rig_names(r, scenario, pid);
	r->memif = 1;
	r->udp_port = 9093;
	snprintf(r->eal_args, sizeof(r->eal_args),
		 "--no-huge -m 256 --no-pci --no-shconf --no-telemetry -l 0 --file-prefix=%s "
		 "--vdev=net_memif0,role=client,socket=%s/memif.sock", r->prefix, r->dir);
	snprintf(r->broker_eal_kv, sizeof(r->broker_eal_kv),
		 "dpdk.eal.args=--no-huge -m 256 --no-pci --no-telemetry --file-prefix=%s-b "
		 "--vdev=net_memif0,role=server,socket=%s/memif.sock", r->prefix, r->dir);
	snprintf(r->dpdk_listen_kv, sizeof(r->dpdk_listen_kv), "dpdk.listen=%s:%d", r->kip, r->udp_port);
}

/* What a dead child may have left: its interface, runtime and temporary
 * directories. */
static void rig_leftovers(int pid)
{
	struct rig r;
	char cmd[300];

	rig_names(&r, "", pid);
	if (if_nametoindex(r.iface))
		sh("ip link del %s", r.iface);
	rmdir(r.runtime);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r.broker_runtime);
	if (system(cmd) != 0)
		printf("note: %s failed\n", cmd);
	if (!getenv("SLUICE_KEEP_TEST_DIR")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r.dir);
		if (system(cmd) != 0)
			printf("note: %s failed\n", cmd);
	}
}

static void write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);

	if (fd >= 0) {
		if (write(fd, s, strlen(s)) < 0)
			printf("note: writing %s: %s\n", path, strerror(errno));
		close(fd);
	}
}

/* The tap's kernel side: an address, no IPv6 chatter, a long queue, up. */
static int rig_kernel(struct rig *r)
{
	char p[128];

	snprintf(p, sizeof(p), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", r->iface);
	write_file(p, "1");
	if (sh("ip addr add %s/24 dev %s", r->kip, r->iface) || sh("ip link set dev %s txqueuelen 5000", r->iface) ||
	    sh("ip link set dev %s up", r->iface))
		return -1;
	return 0;
}

/* A free port on addr for type (bound, read, closed). */
static int free_port(const char *addr, int type)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = inet_addr(addr) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &al) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* The Kafka port, kept ours while the broker lives (tests/integration/
 * harness.c's trick: SO_REUSEPORT + SO_REUSEADDR, never listening). */
static int reserve_tcp(struct rig *r)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		close(fd);
		return -1;
	}
	r->reserve_fd = fd;
	r->tcp_port = ntohs(a.sin_port);
	snprintf(r->bootstrap, sizeof(r->bootstrap), "127.0.0.1:%d", r->tcp_port);
	return 0;
}

static void rig_dump_log(const struct rig *r)
{
	char cmd[300];

	printf("broker log (tail):\n");
	fflush(stdout);
	snprintf(cmd, sizeof(cmd), "tail -n 20 '%s'", r->log);
	if (system(cmd) != 0)
		printf("(no broker log)\n");
}

/* build/sluiced on 127.0.0.1 (Kafka) and the tap's kernel address
 * (native); ready at its "listening on" line. 0 or -1 (said why). */
static int rig_broker(struct rig *r)
{
	char listen[64], native_kv[96], line[1024];
	const char *argv[20];
	int n = 0, pfd[2], logfd;
	FILE *out;
	pid_t pid;

	if (mkdir(r->dir, 0700) < 0 && errno != EEXIST) {
		check(0, "%s: mkdir %s: %s", r->scenario, r->dir, strerror(errno));
		return -1;
	}
	if (!r->udp_port)
		r->udp_port = free_port(r->kip, SOCK_DGRAM);

	if (reserve_tcp(r) < 0 || r->udp_port <= 0) {
		check(0, "%s: no free port (tcp %d, udp on %s %d)", r->scenario, r->tcp_port, r->kip, r->udp_port);
		return -1;
	}
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", r->tcp_port);
	snprintf(r->native, sizeof(r->native), "%s:%d", r->kip, r->udp_port);
	snprintf(native_kv, sizeof(native_kv), "native.listen=%s", r->native);
	argv[n++] = SLUICED_PATH;
	argv[n++] = "--data-dir";
	argv[n++] = r->data;
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--shards";
	argv[n++] = "2";
	if (r->memif) {
		/* the broker's own EAL and stack on the memif server port */
		argv[n++] = "--set";
		argv[n++] = "dpdk.enable=true";
		argv[n++] = "--set";
		argv[n++] = r->broker_eal_kv;
		argv[n++] = "--set";
		argv[n++] = r->dpdk_listen_kv;
		argv[n++] = "--set";
		argv[n++] = "dpdk.poll.sleep.us=20";
	} else {
		argv[n++] = "--set";
		argv[n++] = native_kv;
	}
	argv[n] = NULL;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	logfd = open(r->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		cpu_set_t all;

		/* dies with the thread that started it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* the EAL pinned the client's thread to its lcore: not the broker */
		CPU_ZERO(&all);
		for (int c = 0; c < CPU_SETSIZE; c++)
			CPU_SET(c, &all);
		sched_setaffinity(0, sizeof(all), &all);
		dup2(pfd[1], 1);
		if (logfd >= 0)
			dup2(logfd, 2);
		/* DPDK opens the tap's descriptor without O_CLOEXEC: a broker
		 * holding it would keep the interface after the port closed */
		close_range(3, ~0u, 0);
		execv(argv[0], (char *const *)argv);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	if (logfd >= 0)
		close(logfd);
	if (pid < 0) {
		close(pfd[0]);
		check(0, "%s: fork: %s", r->scenario, strerror(errno));
		return -1;
	}
	r->broker = pid;
	out = fdopen(pfd[0], "r");
	if (out)
		setvbuf(out, NULL, _IONBF, 0);   /* nothing read ahead of what poll sees */
	line[0] = 0;
	/* its ready line, for at most 60 s: a broker that neither gets ready
	 * nor exits is a failure with its log, not a hang until the alarm */
	for (double end = now_s() + 60; out && now_s() < end;) {
		struct pollfd pf = { .fd = pfd[0], .events = POLLIN };

		if (poll(&pf, 1, 1000) <= 0)
			continue;
		if (!fgets(line, sizeof(line), out) || strstr(line, "listening on "))
			break;
		line[0] = 0;
	}
	if (out)
		fclose(out);
	if (!strstr(line, "listening on ")) {
		int st = 0;

		if (waitpid(pid, &st, WNOHANG) == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			check(0, "%s: sluiced printed no ready line in 60 s (killed)", r->scenario);
		} else {
			check(0, "%s: sluiced did not start (status %#x)", r->scenario, st);
		}
		r->broker = 0;
		rig_dump_log(r);
		return -1;
	}
	return 0;
}

/* SIGTERM; a clean exit within 20 s is a pass. */
static void rig_broker_stop(struct rig *r)
{
	int st = 0;
	pid_t w = 0;

	if (!r->broker)
		return;
	kill(r->broker, SIGTERM);
	for (int i = 0; i < 2000 && (w = waitpid(r->broker, &st, WNOHANG)) == 0; i++)
		usleep(10000);
	if (w == 0) {
		kill(r->broker, SIGKILL);
		waitpid(r->broker, &st, 0);
	}
	check(w == r->broker && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the broker exits cleanly on SIGTERM "
	      "(status %#x)", r->scenario, st);
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		rig_dump_log(r);
	r->broker = 0;
	if (r->reserve_fd >= 0)
		close(r->reserve_fd);
	r->reserve_fd = -1;
}

/* CreateTopics through librdkafka (Kafka's API over loopback TCP). */
static int rig_topic(struct rig *r, const char *topic, int parts)
{
	char err[512];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	rd_kafka_t *rk;
	rd_kafka_NewTopic_t *nt;
	rd_kafka_AdminOptions_t *opt;
	rd_kafka_queue_t *q;
	rd_kafka_event_t *ev = NULL;
	int rc = -1;

	if (rd_kafka_conf_set(conf, "bootstrap.servers", r->bootstrap, err, sizeof(err)) != RD_KAFKA_CONF_OK ||
	    rd_kafka_conf_set(conf, "log_level", "3", err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		check(0, "%s: librdkafka conf: %s", r->scenario, err);
		rd_kafka_conf_destroy(conf);
		return -1;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!rk) {
		check(0, "%s: librdkafka: %s", r->scenario, err);
		return -1;
	}
	nt = rd_kafka_NewTopic_new(topic, parts, 1, err, sizeof(err));
	opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
	rd_kafka_AdminOptions_set_operation_timeout(opt, 10000, err, sizeof(err));
	q = rd_kafka_queue_new(rk);
	rd_kafka_CreateTopics(rk, &nt, 1, opt, q);
	for (int i = 0; i < 20 && !ev; i++)
		ev = rd_kafka_queue_poll(q, 1000);
	if (ev && rd_kafka_event_type(ev) == RD_KAFKA_EVENT_CREATETOPICS_RESULT && !rd_kafka_event_error(ev)) {
		size_t n;
		const rd_kafka_topic_result_t **tr =
			rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);

		rc = n == 1 && rd_kafka_topic_result_error(tr[0]) == 0 ? 0 : -1;
		if (rc < 0)
			check(0, "%s: CreateTopics %s: %s", r->scenario, topic,
			      n ? rd_kafka_topic_result_error_string(tr[0]) : "no result");
	} else {
		check(0, "%s: CreateTopics %s: %s", r->scenario, topic, ev ? rd_kafka_event_error_string(ev) : "timeout");
	}
	if (ev)
		rd_kafka_event_destroy(ev);
	rd_kafka_queue_destroy(q);
	rd_kafka_AdminOptions_destroy(opt);
	rd_kafka_NewTopic_destroy(nt);
	rd_kafka_destroy(rk);
	return rc;
}

/* ================================================================ the workload */

/* Record i: partition i % PARTS at offset i / PARTS (a fresh topic), key
 * "k<i>", a value of 8 to 64 bytes that follows from i. */
static size_t rec_key(long i, char *k)
{
	return (size_t)snprintf(k, 24, "k%ld", i);
}

static size_t rec_value(long i, uint8_t *v)
{
	size_t n = 8 + (size_t)(i % 57);
	uint32_t a = (uint32_t)(i % PARTS), b = (uint32_t)(i / PARTS);

	memcpy(v, &a, 4);
	memcpy(v + 4, &b, 4);
	for (size_t j = 8; j < n; j++)
		v[j] = (uint8_t)(i * 13 + (long)j);
	return n;
}

struct run {
	long n;
	int64_t *offset;              /* reported offset by record */
	int *err;                     /* 1: not reported yet */
	long reports, bad;            /* bad: an error, a second or foreign report */
	int first_err;
};

static void on_delivery(void *ctx, void *opaque, int err, int64_t offset)
{
	struct run *r = ctx;
	long i = (long)(uintptr_t)opaque;

	if (i < 0 || i >= r->n || r->err[i] != 1) {
		r->bad++;
		return;
	}
	r->err[i] = err;
	r->offset[i] = offset;
	r->reports++;
	if (err && !r->bad++)
		r->first_err = err;
}

static int run_init(struct run *r, long n)
{
	memset(r, 0, sizeof(*r));
	r->n = n;
	r->offset = calloc((size_t)n, sizeof(*r->offset));
	r->err = malloc((size_t)n * sizeof(*r->err));
	if (!r->offset || !r->err)
		return -1;
	for (long i = 0; i < n; i++)
		r->err[i] = 1;
	return 0;
}

static void run_free(struct run *r)
{
	free(r->offset);
	free(r->err);
}

static void base_config(struct sluice_config *cfg, const struct rig *r, struct run *run)
{
	sluice_config_init(cfg);
	cfg->client_id = "test_native_dpdk";
	cfg->transport = SLUICE_TRANSPORT_DPDK;
	cfg->dpdk_device = "net_tap0";
	cfg->dpdk_address = r->cip;
	cfg->connect_timeout_ms = 10000;
	cfg->delivery_timeout_ms = 30000;
	cfg->delivery = on_delivery;
	cfg->delivery_ctx = run;
}

/* Until a native FETCH of every partition answers without error (the new
 * topic reached every shard). */
static int wait_topic(struct sluice_client *c, const char *topic)
{
	struct sluice_fetch_result res;
	double end = now_s() + 10;

	for (int p = 0; p < PARTS; p++)
		for (;;) {
			int rc = sluice_fetch(c, topic, p, 0, 1024, 0, 2000, &res);

			if (rc >= 0 && res.err == 0)
				break;
			if (now_s() > end) {
				check(0, "%s/%d not visible natively: %d, error %d (%s)", topic, p, rc, rc >= 0 ? res.err : 0,
				      sluice_last_error(c));
				return -1;
			}
			usleep(20000);
		}
	return 0;
}

/* Every record, then flush; checks every report. Returns records/s or -1. */
static double produce_all(const char *who, struct sluice_client *c, struct run *r, const char *topic)
{
	double t0 = now_s(), secs;
	long wrong = 0, first_wrong = -1;
	uint8_t v[64];
	char k[24];

	for (long i = 0; i < r->n; i++) {
		size_t kl = rec_key(i, k), vl = rec_value(i, v);
		int rc;

		while ((rc = sluice_produce(c, topic, (int32_t)(i % PARTS), k, kl, v, vl, (void *)(uintptr_t)i)) ==
		       -ENOBUFS)
			if (sluice_poll(c, 5) < 0)
				break;
		if (rc < 0) {
			check(0, "%s: produce %ld: %d (%s)", who, i, rc, sluice_last_error(c));
			return -1;
		}
		if ((i & 1023) == 0)
			sluice_poll(c, 0);
	}
	if (sluice_flush(c, 30000) < 0) {
		check(0, "%s: flush: %zu records still out (%s)", who, sluice_outq_len(c), sluice_last_error(c));
		return -1;
	}
	secs = now_s() - t0;
	for (long i = 0; i < r->n; i++)
		if (r->err[i] != 0 || r->offset[i] != i / PARTS) {
			if (!wrong++)
				first_wrong = i;
		}
	check(r->reports == r->n && !r->bad && !wrong, "%s: %ld records produced over DPDK, %ld reports, every one "
	      "at its offset (%ld wrong, first: record %ld err %d offset %lld; %ld bad reports, first error %s)", who,
	      r->n, r->reports, wrong, first_wrong, first_wrong >= 0 ? r->err[first_wrong] : 0,
	      first_wrong >= 0 ? (long long)r->offset[first_wrong] : 0LL, r->bad, sluice_err_name(r->first_err));
	return wrong || r->bad ? -1 : (double)r->n / secs;
}

/* Both partitions from 0 to the end over c: offsets contiguous, each
 * record the one produced there (key and value byte for byte), nothing
 * twice, nothing missing, the high watermark where the records end. */
static int read_back(const char *who, struct sluice_client *c, long n, const char *topic, double *rate)
{
	struct sluice_fetch_result res;
	long total = 0, bad = 0, fetches = 0;
	char problem[256] = "";
	double t0 = now_s();
	uint8_t v[64];
	char k[24];

	for (int p = 0; p < PARTS; p++) {
		long want = (n - p + PARTS - 1) / PARTS;
		int64_t off = 0;

		for (;;) {
			int rc = sluice_fetch(c, topic, p, off, FETCH_BYTES, 0, 10000, &res);

			fetches++;
			if (rc < 0 || res.err) {
				snprintf(problem, sizeof(problem), "fetch %s/%d at %lld: %d, error %d (%s)", topic, p,
					 (long long)off, rc, rc < 0 ? 0 : res.err, sluice_last_error(c));
				bad++;
				break;
			}
			if (res.count == 0)
				break;
			for (size_t j = 0; j < res.count; j++) {
				const struct sluice_record *rec = &res.records[j];
				long i = (long)(off + (int64_t)j) * PARTS + p;
				size_t kl = rec_key(i, k), vl = rec_value(i, v);

				if (rec->offset != off + (int64_t)j || rec->offset >= want || rec->key_len != (int32_t)kl ||
				    rec->value_len != (int32_t)vl || memcmp(rec->key, k, kl) || memcmp(rec->value, v, vl)) {
					if (!bad++)
						snprintf(problem, sizeof(problem), "%s/%d offset %lld: not record %ld "
							 "(key %.*s, %d value bytes)", topic, p, (long long)rec->offset, i,
							 rec->key_len > 0 ? rec->key_len : 0,
							 rec->key ? (const char *)rec->key : "", rec->value_len);
				}
			}
			total += (long)res.count;
			off = res.next_offset;
		}
		if (!bad && (off != want || res.high_watermark != want)) {
			bad++;
			snprintf(problem, sizeof(problem), "%s/%d: read to %lld, high watermark %lld, %ld produced", topic,
				 p, (long long)off, (long long)res.high_watermark, want);
		}
	}
	*rate = (double)total / (now_s() - t0);
	check(!bad && total == n, "%s: %ld of %ld records fetched back over DPDK (%ld fetches of at most %u bytes), "
	      "each in place and byte for byte, none twice, high watermark at the end%s%s", who, total, n, fetches,
	      FETCH_BYTES, problem[0] ? ": " : "", problem);
	return bad || total != n ? -1 : 0;
}

static void print_stats(const char *who, struct sluice_client *c)
{
	struct sluice_stats st;

	sluice_stats(c, &st);
	printf("native_dpdk: %s: datagrams sent %llu received %llu, max datagram %u, batches %llu resent %llu, "
	       "tx_dropped %llu, rtt %u us, fetch retries %llu; faults: dropped %llu duplicated %llu reordered %llu\n",
	       who, (unsigned long long)st.datagrams_sent, (unsigned long long)st.datagrams_received,
	       st.max_datagram, (unsigned long long)st.batches_sent, (unsigned long long)st.batch_resends,
	       (unsigned long long)st.tx_dropped, st.rtt_us, (unsigned long long)st.fetch_retries,
	       (unsigned long long)st.fault_dropped, (unsigned long long)st.fault_duplicated,
	       (unsigned long long)st.fault_reordered);
}

/* ================================================================ scenarios */

static int connect_client(struct rig *r, const struct sluice_config *cfg, struct sluice_client **c)
{
	char err[512];
	int rc = sluice_connect(r->native, cfg, c, err, sizeof(err));

	check(rc == 0, "%s: sluice_connect over DPDK (%s on %s) to %s%s%s", r->scenario, cfg->dpdk_address,
	      cfg->dpdk_device, r->native, rc ? ": " : "", rc ? err : "");
	if (rc < 0)
		rig_dump_log(r);
	return rc;
}

/* The test's EAL (the client's dpdk_eal_args NULL), the kernel side, the
 * broker, the topic. 0, SKIP_EXIT, or -1. */
static int rig_up(struct rig *r, const char *topic)
{
	char err[512];

	if (dpdk_eal_start(r->eal_args, err, sizeof(err)) < 0) {
		printf("SKIPPED: %s: the EAL could not start: %s\n", r->scenario, err);
		rmdir(r->runtime);
		return SKIP_EXIT;
	}
	if (rig_kernel(r) < 0) {
		check(0, "%s: configuring %s's kernel side", r->scenario, r->iface);
		return -1;
	}
	if (rig_broker(r) < 0 || rig_topic(r, topic, PARTS) < 0)
		return -1;
	return 0;
}

/* 1 once the interface is gone, waiting up to 5 s: the kernel unregisters
 * it when the last reference (a socket's cached route) lets go. */
static int iface_gone(const char *iface)
{
	for (int i = 0; i < 500 && if_nametoindex(iface); i++)
		usleep(10000);
	return if_nametoindex(iface) == 0;
}

/* The EAL stopped (by the test or the library): the interface went with
 * the port, the runtime directory is removed. */
static void rig_down(struct rig *r, int eal_ours)
{
	struct stat st;
	int gone;

	rig_broker_stop(r);
	if (eal_ours) {
		dpdk_eal_stop();
		rmdir(r->runtime);
	}
	gone = iface_gone(r->iface);
	check(gone, "%s: tap interface %s removed with the port", r->scenario, r->iface);
	if (!gone)
		sh("ip link del %s", r->iface);
	check(stat(r->runtime, &st) < 0, "%s: EAL runtime directory %s removed", r->scenario, r->runtime);
}

static int stream_scenario(void)
{
	struct rig r;
	struct run run;
	struct sluice_config cfg;
	struct sluice_client *c = NULL;
	const char *topic = "ndpdk-stream";
	double prate, frate;
	int rc;

	rig_names(&r, "stream", getpid());
	rc = rig_up(&r, topic);
	if (rc == SKIP_EXIT)
		return rc;
	if (run_init(&run, STREAM_N) < 0)
		return 1;
	if (rc == 0) {
		char err[512];

		/* a port that is not there: named, with the ports there are */
		base_config(&cfg, &r, &run);
		cfg.dpdk_device = "net_nosuch0";
		rc = sluice_connect(r.native, &cfg, &c, err, sizeof(err));
		check(rc == -ENODEV && strstr(err, "net_nosuch0") && strstr(err, "net_tap0"),
		      "stream: a port that does not exist is named: %d %s", rc, err);
		base_config(&cfg, &r, &run);
		rc = connect_client(&r, &cfg, &c);
	}
	if (rc == 0) {
		struct sluice_stats st;

		sluice_stats(c, &st);
		check(sluice_fd(c) == -1 && st.max_datagram == 1472, "stream: no descriptor (fd %d), datagrams of %u "
		      "bytes (the tap's 1500-byte MTU)", sluice_fd(c), st.max_datagram);
		rc = wait_topic(c, topic);
	}
	if (rc == 0 && (prate = produce_all("stream", c, &run, topic)) > 0 &&
	    read_back("stream", c, STREAM_N, topic, &frate) == 0)
		printf("native_dpdk: stream: %.0f records/s produced, %.0f records/s fetched (tap, busy-polling client "
		       "and broker share 2 cores: informational)\n", prate, frate);
	if (c) {
		print_stats("stream", c);
		sluice_close(c);
	}
	run_free(&run);
	rig_down(&r, 1);
	printf("native_dpdk stream: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

static int faults_scenario(void)
{
	struct rig r;
	struct run run;
	struct sluice_config cfg;
	struct sluice_client *c = NULL;
	const char *topic = "ndpdk-faults", *seed_s = getenv("SLUICE_FAULT_SEED");
	uint64_t seed = seed_s ? strtoull(seed_s, NULL, 10) : 11;
	double rate;
	int rc;

	rig_names(&r, "faults", getpid());
	rc = rig_up(&r, topic);
	if (rc == SKIP_EXIT)
		return rc;
	if (run_init(&run, FAULT_N) < 0)
		return 1;
	if (rc == 0) {
		base_config(&cfg, &r, &run);
		cfg.fault.loss_pct = 1;
		cfg.fault.dup_pct = 1;
		cfg.fault.reorder_pct = 2;
		cfg.fault.reorder_window = 8;
		cfg.fault.seed = seed;
		printf("native_dpdk: faults: seed %llu (SLUICE_FAULT_SEED), 1%% loss, 1%% duplication, 2%% "
		       "reordering, both ways\n", (unsigned long long)seed);
		rc = connect_client(&r, &cfg, &c);
	}
	if (rc == 0)
		rc = wait_topic(c, topic);
	if (rc == 0 && produce_all("faults", c, &run, topic) > 0 && read_back("faults", c, FAULT_N, topic, &rate) == 0) {
		struct sluice_stats st;

		sluice_stats(c, &st);
		check(st.fault_dropped && st.fault_duplicated && st.fault_reordered && st.batch_resends,
		      "faults: the faults happened (%llu dropped, %llu duplicated, %llu reordered, %llu batches resent) "
		      "and every record is in the log exactly once, in order", (unsigned long long)st.fault_dropped,
		      (unsigned long long)st.fault_duplicated, (unsigned long long)st.fault_reordered,
		      (unsigned long long)st.batch_resends);
	}
	if (c) {
		print_stats("faults", c);
		sluice_close(c);
	}
	run_free(&run);
	rig_down(&r, 1);
	printf("native_dpdk faults: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* own-eal: the helper thread waits for the tap the library's EAL creates,
 * configures it, starts the broker and the topic, and keeps the broker
 * (PR_SET_PDEATHSIG follows the thread that forked it) until told. */
struct helper {
	struct rig *r;
	const char *topic;
	int ready;                    /* 1 up, -1 failed (release/acquire) */
	int stop;
};

static void *helper_main(void *arg)
{
	struct helper *h = arg;
	struct rig *r = h->r;
	double end = now_s() + 20;
	int rc = -1;

	while (!if_nametoindex(r->iface) && now_s() < end && !__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE))
		usleep(10000);
	if (__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) {
		/* the client gave up (no EAL): nothing to start */
	} else if (!if_nametoindex(r->iface)) {
		check(0, "own-eal: interface %s did not appear", r->iface);
	} else if (rig_kernel(r) < 0) {
		check(0, "own-eal: configuring %s's kernel side", r->iface);
	} else if (rig_broker(r) == 0 && rig_topic(r, h->topic, PARTS) == 0) {
		rc = 1;
	}
	__atomic_store_n(&h->ready, rc, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE))
		usleep(10000);
	rig_broker_stop(r);
	return NULL;
}

static int own_eal_scenario(void)
{
	struct rig r;
	struct run run;
	struct sluice_config cfg;
	struct sluice_client *c = NULL;
	struct helper h;
	pthread_t thr;
	struct stat sb;
	char err[512];
	double rate;
	int rc, ready;

	rig_names(&r, "own-eal", getpid());
	if (run_init(&run, OWN_N) < 0)
		return 1;
	/* the broker's address must be known before its interface exists:
	 * a UDP port free on this machine, on the address to come */
	r.udp_port = free_port("0.0.0.0", SOCK_DGRAM);
	snprintf(r.native, sizeof(r.native), "%s:%d", r.kip, r.udp_port);
	h = (struct helper){ .r = &r, .topic = "ndpdk-own" };
	if (pthread_create(&thr, NULL, helper_main, &h) != 0) {
		check(0, "own-eal: pthread_create");
		return 1;
	}
	base_config(&cfg, &r, &run);
	cfg.dpdk_eal_args = r.eal_args;
	cfg.connect_timeout_ms = 20000;
	rc = sluice_connect(r.native, &cfg, &c, err, sizeof(err));
	if (rc < 0 && !strncmp(err, "dpdk_eal_args: ", 15)) {
		/* the EAL did not start: a skip, as in the other scenarios */
		printf("SKIPPED: own-eal: the EAL could not start: %s\n", err);
		__atomic_store_n(&h.stop, 1, __ATOMIC_RELEASE);
		pthread_join(thr, NULL);
		run_free(&run);
		return SKIP_EXIT;
	}
	check(rc == 0, "own-eal: sluice_connect started the EAL (%s), opened the port and said HELLO to %s%s%s",
	      r.eal_args, r.native, rc ? ": " : "", rc ? err : "");
	while (!(ready = __atomic_load_n(&h.ready, __ATOMIC_ACQUIRE)))
		usleep(10000);
	if (rc < 0)
		rig_dump_log(&r);
	if (rc == 0 && ready == 1)
		rc = wait_topic(c, h.topic);
	if (rc == 0 && ready == 1 && produce_all("own-eal", c, &run, h.topic) > 0)
		read_back("own-eal", c, OWN_N, h.topic, &rate);
	if (c) {
		print_stats("own-eal", c);
		sluice_close(c);
		/* the last client of the library's EAL: port closed, EAL stopped */
		check(iface_gone(r.iface), "own-eal: sluice_close closed the port (interface %s gone)",
		      r.iface);
		check(stat(r.runtime, &sb) < 0, "own-eal: the library stopped its EAL and removed %s", r.runtime);
		c = NULL;
		base_config(&cfg, &r, &run);
		cfg.dpdk_eal_args = r.eal_args;
		rc = sluice_connect(r.native, &cfg, &c, err, sizeof(err));
		check(rc == -EALREADY && !c && strstr(err, "cannot start it twice"),
		      "own-eal: a second EAL in the process is refused: %d %s", rc, err);
		cfg.dpdk_eal_args = NULL;
		rc = sluice_connect(r.native, &cfg, &c, err, sizeof(err));
		check(rc == -EALREADY && !c, "own-eal: so is using the stopped one: %d %s", rc, err);
	}
	__atomic_store_n(&h.stop, 1, __ATOMIC_RELEASE);
	pthread_join(thr, NULL);
	run_free(&run);
	printf("native_dpdk own-eal: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* Records kcat (librdkafka over the broker's Kafka TCP listener) reads
 * from topic, each checked: record i at partition i % PARTS, offset
 * i / PARTS, key "k<i>". -1 on the first one out of place (said). */
static long rdkafka_count(const struct rig *r, const char *topic)
{
	char cmd[300], line[128];
	long n = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "kcat -C -q -b %s -t %s -o beginning -e -f '%%p %%o %%k\\n'", r->bootstrap, topic);
	if (!(f = popen(cmd, "r")))
		return -1;
	while (fgets(line, sizeof(line), f)) {
		long p, off, i;
		char key[32], want[24];

		if (sscanf(line, "%ld %ld %31s", &p, &off, key) != 3 || (i = off * PARTS + p, rec_key(i, want), strcmp(key, want))) {
			check(0, "%s: kcat read '%.60s' where record %ld belongs", r->scenario, line, off * PARTS + p);
			pclose(f);
			return -1;
		}
		n++;
	}
	if (pclose(f) != 0) {
		check(0, "%s: %s failed", r->scenario, cmd);
		return -1;
	}
	return n;
}

/* Both ends on DPDK: the broker's shards poll a net_memif server port,
 * the client is the memif client in this process. Records there and back
 * natively, and the same records through Kafka's TCP (librdkafka): the
 * broker's DPDK path and its TCP path write one log. */
static int memif_scenario(void)
{
	struct rig r;
	struct run run;
	struct sluice_config cfg;
	struct sluice_client *c = NULL;
	const char *topic = "ndpdk-memif";
	long sent = 0;
	double prate = 0, frate = 0;
	char err[512];
	int rc = 0;

	rig_names_memif(&r, "memif", getpid());
	if (run_init(&run, MEMIF_N) < 0)
		return 1;
	if (rig_broker(&r) < 0) {
		run_free(&run);
		return 1;
	}
	if (dpdk_eal_start(r.eal_args, err, sizeof(err)) < 0) {
		printf("SKIPPED: memif: the EAL could not start: %s\n", err);
		rig_broker_stop(&r);
		run_free(&run);
		return SKIP_EXIT;
	}
	if (rig_topic(&r, topic, PARTS) < 0)
		rc = -1;
	if (rc == 0) {
		base_config(&cfg, &r, &run);
		cfg.dpdk_device = "net_memif0";
		/* memif joins pair i to pair i: open every pair the broker's
		 * port has (2 shards: a client and a replication pair each) */
		cfg.dpdk_queues = 4;
		rc = connect_client(&r, &cfg, &c);
	}
	if (rc == 0)
		rc = wait_topic(c, topic);
	if (rc == 0 && (prate = produce_all("memif", c, &run, topic)) > 0 &&
	    read_back("memif", c, MEMIF_N, topic, &frate) == 0)
		printf("native_dpdk: memif: %.0f records/s produced, %.0f records/s fetched (broker and client both "
		       "on DPDK over net_memif, 2 shared cores: informational)\n", prate, frate);
	if (rc == 0)
		check(rdkafka_count(&r, topic) == MEMIF_N, "memif: kcat over TCP reads the %d records, each in its place",
		      MEMIF_N);
	if (c) {
		struct sluice_stats st;

		sluice_stats(c, &st);
		sent = (long)st.datagrams_sent;
		print_stats("memif", c);
		sluice_close(c);
	}
	run_free(&run);
	rig_broker_stop(&r);
	dpdk_eal_stop();
	rmdir(r.runtime);
	{
		char line[2048];
		FILE *f = fopen(r.log, "r");
		long frames = 0;

		while (f && fgets(line, sizeof(line), f)) {
			const char *d = strstr(line, "; dpdk: ");

			if (d)
				frames += strtol(d + 8, NULL, 10);
			if (strstr(line, "native shard") || strstr(line, "busy cycles"))
				printf("native_dpdk: memif broker: %.*s\n", (int)strcspn(line, ";\n"), line);
		}
		if (f)
			fclose(f);
		check(frames > 0, "memif: the broker's shards took %ld frames from their DPDK queues", frames);
		/* each frame once: a pair the client did not open must not be
		 * read as another copy of pair 0 (ARP adds a few frames) */
		check(frames <= sent + 16, "memif: the broker took %ld frames for the %ld datagrams the client sent",
		      frames, sent);
	}
	printf("native_dpdk memif: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* ================================================================ main */

static int run_child(int (*fn)(void), pid_t *out)
{
	pid_t p;

	fflush(stdout);
	p = fork();
	if (p == 0) {
		alarm(120);
		exit(fn());
	}
	*out = p;
	return p > 0 ? 0 : -errno;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} scenarios[] = { { "stream", stream_scenario }, { "faults", faults_scenario }, { "own-eal", own_eal_scenario },
			{ "memif", memif_scenario } };
	const char *only = argc > 1 ? argv[1] : "all";
	int fails = 0, skipped = 0, ran = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		printf("SKIPPED: native_dpdk: needs root (net_tap creates a kernel interface; the EAL maps memory)\n");
		return 0;
	}
	if (access("/dev/net/tun", R_OK | W_OK) != 0) {
		printf("SKIPPED: native_dpdk: /dev/net/tun: %s\n", strerror(errno));
		return 0;
	}
	if (access(SLUICED_PATH, X_OK) != 0) {
		printf("FAIL - %s: %s (build it first)\n", SLUICED_PATH, strerror(errno));
		return 1;
	}
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		pid_t p;
		int st, rc;

		if (strcmp(only, "all") && strcmp(only, scenarios[i].name))
			continue;
		ran++;
		if (run_child(scenarios[i].fn, &p) < 0 || waitpid(p, &st, 0) != p) {
			fails++;
			continue;
		}
		rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
		if (!WIFEXITED(st))
			printf("FAIL - %s: child killed by signal %d\n", scenarios[i].name, WTERMSIG(st));
		skipped += rc == SKIP_EXIT;
		fails += rc != 0 && rc != SKIP_EXIT;
		rig_leftovers(p);
	}
	if (!ran) {
		printf("FAIL - no scenario named '%s' (stream, faults, own-eal, memif)\n", only);
		return 1;
	}
	printf("native_dpdk: %s%s\n", fails ? "FAILED" : "passed", skipped ? " (some scenarios SKIPPED, see above)" : "");
	return fails ? 1 : 0;
}
