/* bench/bench_native.c — `sluice-bench native`: the native datagram
 * protocol (libsluice_native over DPDK net_memif, or over the kernel's UDP
 * with --transport udp) against Kafka's TCP (librdkafka) in the same run,
 * at the same durability and shard count.
 *
 * Thread: the benchmark's main thread drives each client and serves its
 * delivery reports (sluice_poll / rd_kafka_poll); librdkafka adds its own
 * threads.
 *
 * Each path gets a fresh broker (build/sluiced, as kafka_broker.c starts
 * it: free TCP port, temporary data directory, removed at the end) with
 * `--set log.durability=<--durability>` and a fresh topic of --partitions
 * partitions created through Kafka's API. Then --records records of 100
 * bytes, round-robin over the partitions:
 *
 *   native  memif: this program starts one EAL with a net_memif client
 *           port per native path (sockets under /tmp); that path's broker
 *           runs `dpdk.enable` on the memif server port, its shard
 *           busy-polling (dpdk.poll.sleep.us=0), and the client opens every
 *           queue pair the broker's port has (memif joins pair i to pair
 *           i). udp: `native.listen` on loopback, sendmmsg/recvmmsg.
 *           acks=-1, batch_bytes --batch-bytes (16 KiB and 64 KiB with
 *           --compare). The client is an idempotent producer; the broker
 *           acknowledges a batch once it is durable per log.durability.
 *   tcp     librdkafka, enable.idempotence=true, acks=all, linger.ms=5,
 *           batch.size 1 MB (kafka_run.c's produce settings): acknowledged
 *           by the same rule.
 *
 * Time runs from the first produce call to the last delivery report. Ack
 * latency = delivery report time - produce call time (the clock read once
 * per 16 calls on both paths). Broker CPU = utime+stime of the broker
 * process (/proc/PID/stat) over the run — with a busy-polling shard that is
 * wall time, so the figure to compare is broker cycles per record: the
 * shards' busy TSC cycles (loop turns that did work), read with SIGUSR1
 * before and after. Every record must be acknowledged without error (else
 * exit 1). With a hardware profile (--profile, default
 * hw-profiles/local.conf from `make hwprobe`) the record bytes/s are also
 * given as a share of its memif_gbps.
 *
 * batch_resends counts batches the client sent again (its resend timer
 * fired before the acknowledgement came), throttled the broker's
 * THROTTLING_QUOTA_EXCEEDED answers (beyond credits).
 *
 * Results last on stdout: a table, then rows
 * "native <metric> <value> <path>" for scripts.
 */
#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/hist.h"
#include "bench/kafka.h"
#include "control/hw_profile.h"
#include "dataplane/dpdk_port.h"
#include "dataplane/native/sluice_native.h"

#define REC_SIZE     100
#define MAX_PATHS    3

struct nopts {
	uint64_t records;
	int partitions;
	uint32_t batch_bytes;
	int compare;
	int shards;
	int memif;                    /* --transport memif (default) or udp */
	const char *durability;
	const char *profile;          /* --profile: where memif_gbps comes from */
	const char *sets[12];
	int nsets;
};

/* The memif rig: the bench's EAL (client side, one net_memif port per
 * native path) and each native path's broker on the server side. */
#define MEMIF_PATHS 2
static char memif_sock[MEMIF_PATHS][128];
static char eal_prefix[64];
static int eal_up;

struct path_result {
	char name[32];
	uint64_t records, bytes;
	double seconds;
	double cpu_s;
	struct hist lat;
	uint64_t resends, tx_dropped, throttled;
	uint64_t cycles;              /* the broker's busy cycles over the run (0: not read) */
};

static struct path_result results[MAX_PATHS];

/* ---- helpers ------------------------------------------------------------ */

static double rate(uint64_t n, double s)
{
	return s > 0 ? (double)n / s : 0;
}

/* utime+stime of pid in seconds, -1 if unreadable */
static double proc_cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	/* after ")": state (3), then fields 4..13, utime (14), stime (15) */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A fresh broker with the native listener and the durability asked for,
 * and a fresh topic; native gets "127.0.0.1:PORT". */
static int start_broker(const struct nopts *no, struct broker *br, char *native, size_t nlen, char *topic,
			size_t tlen, int memif)
{
	static char listen_kv[64], dur_kv[64], eal_kv[400];
	struct opts o;
	int port = memif >= 0 ? 9093 : bench_free_port(SOCK_DGRAM), rc;

	if (port < 0)
		return -EADDRNOTAVAIL;
	memset(&o, 0, sizeof(o));
	o.cmd = "native";
	snprintf(dur_kv, sizeof(dur_kv), "log.durability=%s", no->durability);
	if (memif >= 0) {
		/* the broker's shards on the memif server port, busy-polling */
		snprintf(native, nlen, "10.203.%d.1:%d", memif, port);
		snprintf(listen_kv, sizeof(listen_kv), "dpdk.listen=%s", native);
		snprintf(eal_kv, sizeof(eal_kv),
			 "dpdk.eal.args=--no-huge -m 512 --no-pci --no-telemetry --file-prefix=%s-b%d "
			 "--vdev=net_memif0,role=server,socket=%s",
			 eal_prefix, memif, memif_sock[memif]);
		o.sets[o.nsets++] = "dpdk.enable=true";
		o.sets[o.nsets++] = eal_kv;
		o.sets[o.nsets++] = "dpdk.poll.sleep.us=0";
	} else {
		snprintf(native, nlen, "127.0.0.1:%d", port);
		snprintf(listen_kv, sizeof(listen_kv), "native.listen=%s", native);
	}
	o.sets[o.nsets++] = listen_kv;
	o.sets[o.nsets++] = dur_kv;
	for (int i = 0; i < no->nsets; i++)
		o.sets[o.nsets++] = no->sets[i];
	if ((rc = broker_start(br, no->shards, &o)) < 0)
		return rc;
	snprintf(topic, tlen, "native-bench-%d-%d", (int)getpid(), (int)(bench_now_ns() % 100000));
	if ((rc = create_topics(br->bootstrap, topic, 1, 1, no->partitions)) < 0) {
		broker_stop(br);
		return rc;
	}
	return 0;
}

static void progress(const char *label, uint64_t acked, uint64_t records, uint64_t t0)
{
	double s = (double)(bench_now_ns() - t0) / 1e9;

	fprintf(stderr, "%s: %" PRIu64 "/%" PRIu64 " acknowledged, %.2f s, %.0f records/s\n", label, acked,
		records, s, rate(acked, s));
}

/* ---- native ------------------------------------------------------------- */

/* The clock read once per 16 calls: a produce or delivery call per
 * record would otherwise spend a good part of the client's time reading
 * the clock (records 16 apart are produced or reported microseconds
 * apart; the latencies measured are hundreds of microseconds and more).
 * Both paths use it. */
struct coarse_clock {
	uint64_t now;
	unsigned n;
};

static uint64_t coarse_now(struct coarse_clock *k)
{
	if ((k->n++ & 15) == 0)
		k->now = bench_now_ns();
	return k->now;
}

struct native_ctx {
	struct coarse_clock clock;
	struct hist *lat;
	uint64_t acked, failed;
	int first_err;
};

static void native_delivery(void *ctx, void *opaque, int err, int64_t offset)
{
	struct native_ctx *nc = ctx;

	(void)offset;
	if (err) {
		if (!nc->failed++)
			nc->first_err = err;
		return;
	}
	nc->acked++;
	hist_add(nc->lat, coarse_now(&nc->clock) - (uint64_t)(uintptr_t)opaque);
}

/* Until a native FETCH of every partition answers without error (the
 * topic just created reached every shard's metadata). */
static int wait_topic_native(struct sluice_client *c, const char *topic, int parts)
{
	struct sluice_fetch_result res;
	uint64_t end = bench_now_ns() + READY_TIMEOUT * 1000000000ull;

	for (int p = 0; p < parts; p++)
		for (;;) {
			int rc = sluice_fetch(c, topic, p, 0, 1024, SLUICE_READ_UNCOMMITTED, 2000, &res);

			if (rc >= 0 && res.err == 0)
				break;
			if (bench_now_ns() > end) {
				fprintf(stderr, "native: %s/%d not visible natively after %d s: %s\n", topic, p,
					READY_TIMEOUT, rc < 0 ? sluice_err_name(rc) : sluice_err_name(res.err));
				return -ETIMEDOUT;
			}
			usleep(20000);
		}
	return 0;
}

static int run_native(const struct nopts *no, uint32_t batch_bytes, int memif, struct path_result *r)
{
	char dev[32], addr[40];
	uint64_t cyc0 = 0, cyc1 = 0;
	struct broker br;
	struct sluice_config cfg;
	struct sluice_client *c = NULL;
	struct sluice_stats st;
	struct native_ctx nc = { .lat = &r->lat };
	struct coarse_clock pclock = { 0 };
	char native[64], topic[64], err[256], label[48];
	uint8_t buf[REC_SIZE];
	uint64_t t0, next_tick, stall_t, last_acked = 0;
	double cpu0;
	int rc, rc2;

	snprintf(label, sizeof(label), "native %s batch=%u", no->memif ? "memif" : "udp", batch_bytes);
	if ((rc = start_broker(no, &br, native, sizeof(native), topic, sizeof(topic), no->memif ? memif : -1)) < 0)
		return rc;
	sluice_config_init(&cfg);
	cfg.client_id = "sluice-bench";
	cfg.transport = SLUICE_TRANSPORT_UDP;
	if (no->memif) {
		/* the bench's EAL (dpdk_eal_args NULL: the application's) */
		snprintf(dev, sizeof(dev), "net_memif%d", memif);
		snprintf(addr, sizeof(addr), "10.203.%d.2/24", memif);
		cfg.transport = SLUICE_TRANSPORT_DPDK;
		cfg.dpdk_device = dev;
		cfg.dpdk_address = addr;
		/* memif joins pair i to pair i: every pair of the broker's port
		 * (a client and a replication pair per shard) */
		cfg.dpdk_queues = (uint16_t)(2 * (no->shards ? no->shards : 1));
	}
	cfg.acks = -1;
	cfg.batch_bytes = batch_bytes;
	cfg.delivery = native_delivery;
	cfg.delivery_ctx = &nc;
	if ((rc = sluice_connect(native, &cfg, &c, err, sizeof(err))) < 0) {
		fprintf(stderr, "%s: sluice_connect %s: %s\n", label, native, err);
		goto out;
	}
	if ((rc = wait_topic_native(c, topic, no->partitions)) < 0)
		goto out;
	for (int i = 0; i < REC_SIZE; i++)
		buf[i] = (uint8_t)('a' + i % 26);
	fprintf(stderr, "%s: %" PRIu64 " records x %d bytes to %s (%d partitions) over %s at %s, "
		"acks=-1, log.durability=%s\n", label, no->records, REC_SIZE, topic, no->partitions,
		no->memif ? "DPDK net_memif (both ends)" : "the kernel's UDP", native, no->durability);
	if (broker_busy_cycles(&br, &cyc0) < 0)
		fprintf(stderr, "%s: the broker's busy cycles could not be read (SIGUSR1)\n", label);
	cpu0 = proc_cpu_s(br.pid);
	t0 = stall_t = bench_now_ns();
	next_tick = t0 + 1000000000ull;
	for (uint64_t i = 0; i < no->records && !bench_interrupted; i++) {
		memcpy(buf, &i, sizeof(i));
		while ((rc = sluice_produce(c, topic, (int32_t)(i % (uint64_t)no->partitions), NULL, 0, buf, REC_SIZE,
					    (void *)(uintptr_t)coarse_now(&pclock))) == -ENOBUFS)
			if ((rc = sluice_poll(c, 1)) < 0)
				break;
		if (rc < 0) {
			fprintf(stderr, "%s: produce: %s (%s)\n", label, sluice_err_name(rc), sluice_last_error(c));
			goto out;
		}
		if ((i & 1023) == 1023) {
			uint64_t now;

			if ((rc = sluice_poll(c, 0)) < 0) {
				fprintf(stderr, "%s: poll: %s (%s)\n", label, sluice_err_name(rc), sluice_last_error(c));
				goto out;
			}
			now = bench_now_ns();
			if (nc.acked != last_acked) {
				last_acked = nc.acked;
				stall_t = now;
			} else if (now - stall_t > STALL_TIMEOUT * 1000000000ull) {
				fprintf(stderr, "%s: no acknowledgement for %d s\n", label, STALL_TIMEOUT);
				rc = -ETIMEDOUT;
				goto out;
			}
			if (now >= next_tick) {
				progress(label, nc.acked, no->records, t0);
				next_tick += 1000000000ull;
				if (!broker_alive(&br)) {
					rc = -ECHILD;
					goto out;
				}
			}
		}
		if (nc.failed)
			break;
	}
	rc = bench_interrupted ? -EINTR : 0;
	if (!rc && !nc.failed && (rc = sluice_flush(c, STALL_TIMEOUT * 1000)) < 0)
		fprintf(stderr, "%s: flush: %zu records still out (%s)\n", label, sluice_outq_len(c),
			sluice_last_error(c));
	r->seconds = (double)(bench_now_ns() - t0) / 1e9;
	r->cpu_s = proc_cpu_s(br.pid) - cpu0;
	if (cyc0 && broker_busy_cycles(&br, &cyc1) == 0)
		r->cycles = cyc1 - cyc0;
	if (!rc && nc.failed) {
		fprintf(stderr, "%s: %" PRIu64 " records failed, the first with %s (%s)\n", label, nc.failed,
			sluice_err_name(nc.first_err), sluice_last_error(c));
		rc = -EIO;
	}
	if (!rc && nc.acked != no->records) {
		fprintf(stderr, "%s: %" PRIu64 " acknowledged of %" PRIu64 "\n", label, nc.acked, no->records);
		rc = -EIO;
	}
	r->records = nc.acked;
	r->bytes = nc.acked * REC_SIZE;
	sluice_stats(c, &st);
	r->resends = st.batch_resends;
	r->tx_dropped = st.tx_dropped;
	r->throttled = st.throttled;
	if (!rc)
		fprintf(stderr, "%s: %" PRIu64 " records acknowledged in %.2f s (%" PRIu64 " batches, %" PRIu64
			" resends, %" PRIu64 " datagrams the socket refused, %" PRIu64 " throttled; credits %u)\n",
			label, nc.acked, r->seconds, st.batches_acked, st.batch_resends, st.tx_dropped, st.throttled,
			st.credits);
out:
	sluice_close(c);
	rc2 = broker_stop(&br);
	return rc ? rc : rc2 ? -EIO : 0;
}

/* ---- librdkafka over TCP ----------------------------------------------- */

struct tcp_ctx {
	struct client_errs errs;    /* first: the error callback's opaque too */
	struct coarse_clock clock;
	struct hist *lat;
	uint64_t acked, failed;
	rd_kafka_resp_err_t first_err;
};

static void tcp_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct tcp_ctx *tc = opaque;

	(void)rk;
	if (m->err) {
		if (!tc->failed++)
			tc->first_err = m->err;
		return;
	}
	tc->acked++;
	hist_add(tc->lat, coarse_now(&tc->clock) - (uint64_t)(uintptr_t)m->_private);
}

static int run_tcp(const struct nopts *no, struct path_result *r)
{
	const char *label = "tcp librdkafka";
	struct broker br;
	struct tcp_ctx tc = { .lat = &r->lat };
	struct coarse_clock pclock = { 0 };
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk = NULL;
	rd_kafka_topic_t *rkt = NULL;
	char native[64], topic[64], err[256];
	uint8_t buf[REC_SIZE];
	uint64_t sent = 0, t0, next_tick, stall_t, last_acked = 0, cyc0 = 0, cyc1 = 0;
	double cpu0;
	int rc, rc2;

	if ((rc = start_broker(no, &br, native, sizeof(native), topic, sizeof(topic), -1)) < 0)
		return rc;
	conf = base_conf(br.bootstrap, &tc.errs);
	if (!conf || conf_set(conf, "acks", "all") < 0 || conf_set(conf, "enable.idempotence", "true") < 0 ||
	    conf_set(conf, "linger.ms", "5") < 0 || conf_set(conf, "batch.num.messages", "100000") < 0 ||
	    conf_set(conf, "batch.size", "1000000") < 0 ||
	    conf_set(conf, "queue.buffering.max.messages", "2000000") < 0 ||
	    conf_set(conf, "queue.buffering.max.kbytes", "2097151") < 0 ||
	    conf_set(conf, "message.timeout.ms", "60000") < 0) {
		if (conf)
			rd_kafka_conf_destroy(conf);
		rc = -EINVAL;
		goto out;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, tcp_dr);
	rd_kafka_conf_set_opaque(conf, &tc);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "%s: producer: %s\n", label, err);
		rc = -EINVAL;
		goto out;
	}
	if ((rc = check_cluster(rk, &br)) < 0)
		goto out;
	rkt = rd_kafka_topic_new(rk, topic, NULL);
	for (int i = 0; i < REC_SIZE; i++)
		buf[i] = (uint8_t)('a' + i % 26);
	fprintf(stderr, "%s: %" PRIu64 " records x %d bytes to %s (%d partitions) over TCP at %s, idempotent, "
		"acks=all, linger.ms=5, log.durability=%s\n", label, no->records, REC_SIZE, topic, no->partitions,
		br.bootstrap, no->durability);
	if (broker_busy_cycles(&br, &cyc0) < 0)
		fprintf(stderr, "%s: the broker's busy cycles could not be read (SIGUSR1)\n", label);
	cpu0 = proc_cpu_s(br.pid);
	t0 = stall_t = bench_now_ns();
	next_tick = t0 + 1000000000ull;
	while (tc.acked + tc.failed < no->records) {
		uint64_t now;

		if (sent < no->records && !bench_interrupted) {
			memcpy(buf, &sent, sizeof(sent));
			if (rd_kafka_produce(rkt, (int32_t)(sent % (uint64_t)no->partitions), RD_KAFKA_MSG_F_COPY, buf,
					     REC_SIZE, NULL, 0, (void *)(uintptr_t)coarse_now(&pclock)) == -1) {
				rd_kafka_resp_err_t e = rd_kafka_last_error();

				if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
					fprintf(stderr, "%s: produce: %s\n", label, rd_kafka_err2str(e));
					rc = -EIO;
					break;
				}
				rd_kafka_poll(rk, 1);
			} else if ((++sent & 1023) == 0) {
				rd_kafka_poll(rk, 0);
			} else {
				continue;
			}
		} else {
			rd_kafka_poll(rk, 50);
		}
		now = bench_now_ns();
		if (tc.acked + tc.failed != last_acked) {
			last_acked = tc.acked + tc.failed;
			stall_t = now;
		} else if (now - stall_t > STALL_TIMEOUT * 1000000000ull) {
			fprintf(stderr, "%s: no delivery report for %d s\n", label, STALL_TIMEOUT);
			rc = -ETIMEDOUT;
			break;
		}
		if (now >= next_tick) {
			progress(label, tc.acked, no->records, t0);
			next_tick += 1000000000ull;
			if (!broker_alive(&br)) {
				rc = -ECHILD;
				break;
			}
		}
		if (tc.failed) {
			fprintf(stderr, "%s: delivery failed: %s\n", label, rd_kafka_err2str(tc.first_err));
			rc = -EIO;
			break;
		}
		if (tc.errs.fatal) {
			fprintf(stderr, "%s: client: %s\n", label, tc.errs.first);
			rc = -EIO;
			break;
		}
		if (bench_interrupted) {
			rc = -EINTR;
			break;
		}
	}
	r->seconds = (double)(bench_now_ns() - t0) / 1e9;
	r->cpu_s = proc_cpu_s(br.pid) - cpu0;
	if (cyc0 && broker_busy_cycles(&br, &cyc1) == 0)
		r->cycles = cyc1 - cyc0;
	r->records = tc.acked;
	r->bytes = tc.acked * REC_SIZE;
	if (!rc)
		fprintf(stderr, "%s: %" PRIu64 " records acknowledged in %.2f s\n", label, tc.acked, r->seconds);
out:
	if (rkt)
		rd_kafka_topic_destroy(rkt);
	if (rk) {
		if (rc)
			rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_flush(rk, 5000);
		rd_kafka_destroy(rk);
	}
	rc2 = broker_stop(&br);
	return rc ? rc : rc2 ? -EIO : 0;
}

/* ---- options and driver ------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-bench native [options]\n"
		"\n"
		"Produces N 100-byte records with libsluice_native over DPDK net_memif (the\n"
		"broker's shards and this program each on one end, kernel bypass on both;\n"
		"needs root) or over the kernel's UDP (--transport udp), then the same\n"
		"records with librdkafka over TCP (idempotent, acks=all), each against a\n"
		"fresh broker of its own (sluiced next to sluice-bench, free ports, data\n"
		"under /var/tmp, removed at the end) at the same log.durability and shards.\n"
		"Reports records/s, MB/s, ack latency p50/p99, broker CPU seconds, broker\n"
		"busy cycles per record (TSC cycles in shard loop turns that did work: idle\n"
		"polling left out), native/TCP records/s, and with a hardware profile the\n"
		"share of the raw memif bandwidth scripts/hwprobe measured.\n"
		"\n"
		"  --transport T           memif (default) or udp\n"
		"  --profile FILE          memif_gbps from FILE (default hw-profiles/local.conf\n"
		"                          when it exists; make hwprobe writes it)\n"
		"  --records N             records per path (default 2000000; suffix K/M)\n"
		"  --partitions P          partitions of the topic (default 6)\n"
		"  --batch-bytes B         native batch size (default 16384; 1024..16777216)\n"
		"  --compare               native with 16 KiB and with 64 KiB batches\n"
		"                          (not with --batch-bytes)\n"
		"  --durability D          the broker's log.durability: write|sync|memory\n"
		"                          (default write)\n"
		"  --shards N              broker shards (default: 1 with memif, whose\n"
		"                          busy-polling shard and client take a core each;\n"
		"                          0 with udp: one per core)\n"
		"  --set KEY=VALUE         extra broker setting (repeatable, at most 10)\n"
		"  --help                  this text\n");
}

static int parse_nopts(int argc, char **argv, struct nopts *no)
{
	const char *cmd = "native";
	uint64_t v;
	int batch_set = 0;

	no->records = 2000000;
	no->partitions = 6;
	no->batch_bytes = 16384;
	no->durability = "write";
	no->memif = 1;
	no->shards = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL, *eq = strchr(a, '=');
		char name[32];
		size_t nl = eq ? (size_t)(eq - a) : strlen(a);

		if (nl >= sizeof(name))
			return bad_option(cmd, a, "unknown option");
		memcpy(name, a, nl);
		name[nl] = 0;
		if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(name, "--compare")) {
			if (eq)
				return bad_option(cmd, name, "takes no value");
			no->compare = 1;
			continue;
		}
		if (strcmp(name, "--records") && strcmp(name, "--partitions") && strcmp(name, "--batch-bytes") &&
		    strcmp(name, "--durability") && strcmp(name, "--shards") && strcmp(name, "--set") &&
		    strcmp(name, "--transport") && strcmp(name, "--profile"))
			return bad_option(cmd, a, "unknown option");
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return bad_option(cmd, name, "needs a value");
		if (!strcmp(name, "--records")) {
			if (parse_count(val, &no->records) < 0 || !no->records || no->records > 1000000000)
				return bad_option(cmd, name, "expects a count in [1, 1G]");
		} else if (!strcmp(name, "--partitions")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > 10000)
				return bad_option(cmd, name, "expects a count in [1, 10000]");
			no->partitions = (int)v;
		} else if (!strcmp(name, "--batch-bytes")) {
			if (parse_count(val, &v) < 0 || v < 1024 || v > (16u << 20))
				return bad_option(cmd, name, "expects bytes in [1024, 16777216]");
			no->batch_bytes = (uint32_t)v;
			batch_set = 1;
		} else if (!strcmp(name, "--durability")) {
			if (strcmp(val, "write") && strcmp(val, "sync") && strcmp(val, "memory"))
				return bad_option(cmd, name, "expects write, sync or memory");
			no->durability = val;
		} else if (!strcmp(name, "--transport")) {
			if (strcmp(val, "memif") && strcmp(val, "udp"))
				return bad_option(cmd, name, "expects memif or udp");
			no->memif = !strcmp(val, "memif");
		} else if (!strcmp(name, "--profile")) {
			no->profile = val;
		} else if (!strcmp(name, "--shards")) {
			if (parse_count(val, &v) < 0 || v > 64)
				return bad_option(cmd, name, "expects 0..64");
			no->shards = (int)v;
		} else {   /* --set */
			if (!strchr(val, '=') || no->nsets >= 10)
				return bad_option(cmd, name, "expects KEY=VALUE (at most 10)");
			if (!strncmp(val, "native.listen=", 14) || !strncmp(val, "log.durability=", 15) ||
			    !strncmp(val, "dpdk.", 5))
				return bad_option(cmd, name, "native.listen and dpdk.* are chosen by the bench; "
						  "log.durability is --durability");
			no->sets[no->nsets++] = val;
		}
	}
	if (no->compare && batch_set)
		return bad_option(cmd, "--compare", "not with --batch-bytes (it runs 16384 and 65536)");
	if (no->shards < 0)
		no->shards = no->memif ? 1 : 0;
	return -1;
}

/* memif_gbps of a hardware profile (control/hw_profile.h), or 0 when the file
 * or the key is missing (said when the file was named explicitly). */
static double profile_memif_gbps(const char *path, int explicit_path)
{
	struct hw_profile hp;
	char err[512];

	if (hw_profile_load(path, &hp, err, sizeof(err)) < 0) {
		if (explicit_path || access(path, F_OK) == 0)
			fprintf(stderr, "native: --profile: %s\n", err);
		return 0;
	}
	return hw_get(&hp, HW_MEMIF_GBPS);
}

static void print_results(const struct nopts *no, int npaths, int shards)
{
	const struct path_result *tcp = &results[npaths - 1];
	double tcp_rate = rate(tcp->records, tcp->seconds);
	const char *prof = no->profile ? no->profile : "hw-profiles/local.conf";
	double memif_gbps = no->memif ? profile_memif_gbps(prof, no->profile != NULL) : 0;

	printf("# sluice-bench native: transport = %s, vs librdkafka over TCP; %d-byte records, "
	       "%d partitions, %" PRIu64 " records per path, log.durability=%s, both acknowledged once durable "
	       "(native acks=-1; TCP idempotent, acks=all, linger.ms=5), shards=%d%s, a fresh broker per path; "
	       "MB = 10^6 bytes of record values; cycles/rec = the broker's busy TSC cycles (loop turns that did "
	       "work) per record\n",
	       no->memif ? "DPDK net_memif between this program and the broker's shards (kernel bypass both ends, "
			   "busy-polling)"
			 : "the KERNEL'S UDP on loopback (sendmmsg/recvmmsg)",
	       REC_SIZE, no->partitions, no->records, no->durability, shards, shards ? "" : " (one per core)");
	if (no->memif && memif_gbps > 0)
		printf("# raw memif bandwidth (scripts/hwprobe, %s): %.1f Gb/s; of_memif = record bytes/s over it\n",
		       prof, memif_gbps);
	else if (no->memif)
		printf("# raw memif bandwidth: not known (%s has no memif_gbps: run make hwprobe)\n", prof);
	printf("%-20s %12s %8s %11s %11s %13s %13s %11s %9s %9s %9s\n", "path", "records/s", "MB/s", "ack_p50_ms",
	       "ack_p99_ms", "broker_cpu_s", "broker_ns/rec", "cycles/rec", "vs_tcp", "resends", "of_memif");
	for (int i = 0; i < npaths; i++) {
		const struct path_result *r = &results[i];
		double rr = rate(r->records, r->seconds);

		printf("%-20s %12.0f %8.1f %11.3f %11.3f %13.3f %13.0f %11.0f", r->name, rr,
		       rate(r->bytes, r->seconds) / 1e6, (double)hist_percentile(&r->lat, 50) / 1e6,
		       (double)hist_percentile(&r->lat, 99) / 1e6, r->cpu_s,
		       r->records ? r->cpu_s * 1e9 / (double)r->records : 0,
		       r->records && r->cycles ? (double)r->cycles / (double)r->records : 0);
		if (i < npaths - 1) {
			printf(" %9.2f %9" PRIu64, tcp_rate > 0 ? rr / tcp_rate : 0, r->resends);
			if (memif_gbps > 0)
				printf(" %8.2f%%\n", rate(r->bytes, r->seconds) * 8 / 1e9 / memif_gbps * 100);
			else
				printf(" %9s\n", "-");
		} else {
			printf(" %9s %9s %9s\n", "1", "-", "-");
		}
	}
	for (int i = 0; i < npaths; i++) {
		const struct path_result *r = &results[i];

		printf("native records %" PRIu64 " %s\n", r->records, r->name);
		printf("native seconds %.3f %s\n", r->seconds, r->name);
		printf("native records_per_s %.0f %s\n", rate(r->records, r->seconds), r->name);
		printf("native MB_per_s %.1f %s\n", rate(r->bytes, r->seconds) / 1e6, r->name);
		printf("native ack_p50_ms %.3f %s\n", (double)hist_percentile(&r->lat, 50) / 1e6, r->name);
		printf("native ack_p99_ms %.3f %s\n", (double)hist_percentile(&r->lat, 99) / 1e6, r->name);
		printf("native broker_cpu_s %.3f %s\n", r->cpu_s, r->name);
		printf("native broker_cpu_ns_per_record %.0f %s\n",
		       r->records ? r->cpu_s * 1e9 / (double)r->records : 0, r->name);
		printf("native broker_cycles_per_record %.0f %s\n",
		       r->records && r->cycles ? (double)r->cycles / (double)r->records : 0, r->name);
		if (i < npaths - 1) {
			printf("native batch_resends %" PRIu64 " %s\n", r->resends, r->name);
			printf("native throttled %" PRIu64 " %s\n", r->throttled, r->name);
			printf("native ratio_records_per_s_vs_tcp %.3f %s\n",
			       tcp_rate > 0 ? rate(r->records, r->seconds) / tcp_rate : 0, r->name);
			if (memif_gbps > 0)
				printf("native fraction_of_memif %.4f %s\n",
				       rate(r->bytes, r->seconds) * 8 / 1e9 / memif_gbps, r->name);
		}
	}
}

static void rmrf_quiet(const char *path)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "native: %s failed\n", cmd);
}

/* The bench's EAL: one net_memif client port per native path, each to
 * the socket its broker will serve. */
static int memif_start(void)
{
	char args[1024], err[512];
	int at, rc;

	snprintf(eal_prefix, sizeof(eal_prefix), "sluice-bench-%d", (int)getpid());
	at = snprintf(args, sizeof(args), "--no-huge -m 512 --no-pci --no-telemetry --no-shconf -l %d --file-prefix=%s",
		      sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0, eal_prefix);
	for (int i = 0; i < MEMIF_PATHS; i++) {
		snprintf(memif_sock[i], sizeof(memif_sock[i]), "/tmp/%s-%d.sock", eal_prefix, i);
		unlink(memif_sock[i]);
		at += snprintf(args + at, sizeof(args) - (size_t)at, " --vdev=net_memif%d,role=client,socket=%s", i,
			       memif_sock[i]);
	}
	if ((rc = dpdk_eal_start(args, err, sizeof(err))) < 0) {
		fprintf(stderr, "native: the DPDK EAL did not start (%s)%s; --transport udp measures the kernel's UDP "
			"instead\n", err, geteuid() ? ", and this needs root" : "");
		return rc;
	}
	eal_up = 1;
	return 0;
}

static void memif_stop(void)
{
	char path[128];

	if (!eal_up)
		return;
	dpdk_eal_stop();
	eal_up = 0;
	for (int i = 0; i < MEMIF_PATHS; i++) {
		unlink(memif_sock[i]);
		snprintf(path, sizeof(path), "/var/run/dpdk/%s-b%d", eal_prefix, i);
		rmrf_quiet(path);
	}
	snprintf(path, sizeof(path), "/var/run/dpdk/%s", eal_prefix);
	rmrf_quiet(path);
}

int bench_native(int argc, char **argv)
{
	struct nopts no;
	struct sigaction sa = { .sa_handler = on_signal };
	uint32_t batches[2];
	int nb = 0, rc;

	memset(&no, 0, sizeof(no));
	if ((rc = parse_nopts(argc, argv, &no)) >= 0)
		return rc;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (no.memif && memif_start() < 0)
		return 1;
	if (no.compare) {
		batches[nb++] = 16384;
		batches[nb++] = 65536;
	} else {
		batches[nb++] = no.batch_bytes;
	}
	for (int i = 0; i < nb; i++) {
		struct path_result *r = &results[i];

		memset(r, 0, sizeof(*r));
		hist_init(&r->lat);
		if (batches[i] % 1024 == 0)
			snprintf(r->name, sizeof(r->name), "native-%s-%uKiB", no.memif ? "memif" : "udp", batches[i] / 1024);
		else
			snprintf(r->name, sizeof(r->name), "native-%s-%uB", no.memif ? "memif" : "udp", batches[i]);
		if ((rc = run_native(&no, batches[i], i, r)) < 0) {
			fprintf(stderr, "native: %s failed: %s\n", r->name, strerror(-rc));
			memif_stop();
			return 1;
		}
	}
	memset(&results[nb], 0, sizeof(results[nb]));
	hist_init(&results[nb].lat);
	snprintf(results[nb].name, sizeof(results[nb].name), "tcp-librdkafka");
	memif_stop();
	if ((rc = run_tcp(&no, &results[nb])) < 0) {
		fprintf(stderr, "native: tcp-librdkafka failed: %s\n", strerror(-rc));
		return 1;
	}
	print_results(&no, nb + 1, no.shards);
	return 0;
}
