/* bench/bench_suite.c — `sluice-bench suite`: the benchmark suite. Named
 * scenarios run against brokers the suite starts itself (and against the
 * peers, bench/peer.h), and every figure is given absolute and as a fraction
 * of what the hardware profile says the machine can physically do (the disk
 * or the NIC, whichever binds). Writes DIR/report.md, DIR/results.json and
 * PNG plots (gnuplot) with their data and scripts beside them.
 *
 * Scenarios (any subset by name, in this order; all by default):
 *   k14-producer    Apache Kafka's 2014 benchmark rows one node can run,
 *   k14-producers3  100-byte records, 6 partitions, acks=1, each next to
 *   k14-consumer    the figure the post published for the same row
 *   k14-consumers3  (bench/suite_ref below: the post's machines, which
 *   k14-prodcons    rows ran on three brokers with replication)
 *   k14-latency
 *   k14-replicated  the post's 3x async and sync replication rows: three
 *                   nodes (scripts/cluster; --emulate: --netns, each
 *                   node's link shaped), RF 3, acks=1 and acks=all, as
 *                   ratios to the one-node producer row of the same run
 *   consumer-defaults the k14 consumer's topic read by a group consumer
 *                   with librdkafka's defaults and by the tuned one: the
 *                   ratio, and where the CPU goes
 *   size-sweep      records/s and MB/s from 10 B to 100 KB records
 *   partition-sweep records/s from 1 to 10,000 partitions
 *   acks            acks=0, 1, all
 *   durability      log.durability=write, sync, memory (acks=all)
 *   stored-data     the append rate as the log grows to --stored bytes
 *   backlog-drain   a backlog built while production goes on at a steady
 *                   rate, then consumers: net drain rate, time to catch up
 *   peers           Sluice, Redis Streams and NATS JetStream: produce,
 *                   consume, e2e latency, same records, same run
 *
 * The headline rows (k14-*, peers) run SUITE_RUNS times each, one after
 * the other: their figures are the runs' means, and each run is kept, so
 * that the report shows the run's noise (suite.h, struct row).
 *
 * One broker serves the scenarios that need no settings of their own
 * (k14-*, size-sweep, acks, backlog-drain, peers); partition-sweep,
 * durability and stored-data start their own. --emulate PROFILE puts the
 * brokers in a network namespace behind a veth shaped to the profile's NIC
 * and under a cgroup io.max cap (bench/emulate.h).
 *
 * Thread: main; the multi-client rows run one thread per client (each its
 * own librdkafka instance) and the main thread samples their counters.
 * Progress on stderr; the report's headline on stdout at the end. Exit 0
 * when every scenario ran, 1 when one failed (the report says which and
 * why), 2 bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/emulate.h"
#include "bench/hist.h"
#include "bench/kafka.h"
#include "bench/peer.h"
#include "control/hw_profile.h"
#include "bench/suite.h"

/* ---- Kafka 2014 ----------------------------------------------------------- */

/* Jay Kreps, "Benchmarking Apache Kafka: 2 Million Writes Per Second (On
 * Three Cheap Machines)", LinkedIn engineering blog, 27 April 2014: three
 * brokers and three client machines (hw-profiles/kafka-2014.conf), 100-byte
 * records, 6 partitions. Rows without replication ran on one broker; the
 * three-producer row used 3x asynchronous replication over three brokers,
 * the consumer rows read a replicated topic. */
#define K14_REF_PRODUCER      821557.0
#define K14_REF_PRODUCERS3   2024032.0
#define K14_REF_CONSUMER      940521.0
#define K14_REF_CONSUMERS3   2615968.0
#define K14_REF_PRODCONS      795064.0
#define K14_REF_P50_MS             2.0
#define K14_REF_P99_MS             3.0
#define K14_REF_P999_MS           14.0

static int k14_producers(struct suite *s, struct result *r, int n, double ref)
{
	struct broker *br = suite_shared_broker(s, r);
	struct suite_client c[3];
	char topic[64];
	uint64_t recs[SUITE_RUNS], bytes[SUITE_RUNS];
	double secs[SUITE_RUNS], lat[SUITE_RUNS][3] = { { 0 } };
	struct cpu_mark cpu0, cpu1;
	struct row *w;
	int rc;

	if (!br)
		return r->rc;
	cpu0 = cpu_mark(br);
	for (int k = 0; k < SUITE_RUNS; k++) {
		if (suite_new_topic(s, br, r, K14_PARTS, topic, sizeof(topic)) < 0)
			return r->rc;
		for (int i = 0; i < n; i++) {
			char label[48];

			snprintf(label, sizeof(label), n > 1 ? "producer %d (run %d)" : "producer (run %d)",
				 n > 1 ? i + 1 : k + 1, k + 1);
			suite_client_init(&c[i], s, br, topic, s->records / (uint64_t)n, 0, label);
		}
		rc = suite_run_clients(c, n, r, &recs[k], &bytes[k], &secs[k]);
		suite_drop_topic(br, topic);
		if (rc < 0)
			return r->rc;
		lat[k][0] = (double)hist_percentile(&c[0].run.lat, 50) / 1e6;
		lat[k][1] = (double)hist_percentile(&c[0].run.lat, 99) / 1e6;
		lat[k][2] = (double)hist_percentile(&c[0].run.lat, 99.9) / 1e6;
	}
	cpu1 = cpu_mark(br);
	w = suite_row_new(r, n > 1 ? "%d producers" : "%d producer", n);
	suite_row_rate_runs(w, recs, bytes, secs);
	row_cpu(w, cpu0, cpu1, recs[0] + recs[1]);
		suite_produce_limit(s, w, 0);
	w->ref_rps = ref;
	if (n == 1) {
		s->k14_rps = w->rps;
		suite_row_lat_runs(w, (const double (*)[3])lat);
		w->p50 = w->p999 = NAN;   /* the ack latency at full speed: its p99 only */
		snprintf(w->note, sizeof(w->note), "ack p99 %.1f ms at full speed; Kafka's row: one broker, no "
			 "replication", w->p99);
	} else {
		snprintf(w->note, sizeof(w->note), "Kafka's row: three brokers, 3x asynchronous replication, "
			 "three producer machines");
	}
	return 0;
}

static int sc_k14_producer(struct suite *s, struct result *r)
{
	return k14_producers(s, r, 1, K14_REF_PRODUCER);
}

static int sc_k14_producers3(struct suite *s, struct result *r)
{
	return k14_producers(s, r, 3, K14_REF_PRODUCERS3);
}

/* The topic the consumer rows read: s->records records, produced once. */
static int k14_filled(struct suite *s, struct result *r, struct broker *br)
{
	struct suite_client c;
	uint64_t recs, bytes;
	double secs;

	if (s->filled_topic[0])
		return 0;
	if (suite_new_topic(s, br, r, K14_PARTS, s->filled_topic, sizeof(s->filled_topic)) < 0)
		return r->rc;
	suite_client_init(&c, s, br, s->filled_topic, s->records, 0, "pre-produce");
	if (suite_run_clients(&c, 1, r, &recs, &bytes, &secs) < 0) {
		s->filled_topic[0] = 0;
		return r->rc;
	}
	s->filled = recs;
	return 0;
}

static int k14_consumers(struct suite *s, struct result *r, int n, double ref)
{
	struct broker *br = suite_shared_broker(s, r);
	struct suite_client c[3];
	uint64_t recs[SUITE_RUNS], bytes[SUITE_RUNS];
	double secs[SUITE_RUNS];
	struct cpu_mark cpu0, cpu1;
	struct row *w;

	if (!br || k14_filled(s, r, br) < 0)
		return r->rc;
	cpu0 = cpu_mark(br);
	for (int k = 0; k < SUITE_RUNS; k++) {
		for (int i = 0; i < n; i++) {
			char label[48];

			snprintf(label, sizeof(label), n > 1 ? "consumer %d (run %d)" : "consumer (run %d)",
				 n > 1 ? i + 1 : k + 1, k + 1);
			suite_client_init(&c[i], s, br, s->filled_topic, suite_share_of(s->filled, K14_PARTS, n, i), 1, label);
			c[i].o.part_mod = n;
			c[i].o.part_rem = i;
		}
		if (suite_run_clients(c, n, r, &recs[k], &bytes[k], &secs[k]) < 0)
			return r->rc;
	}
	cpu1 = cpu_mark(br);
	w = suite_row_new(r, n > 1 ? "%d consumers" : "%d consumer", n);
	suite_row_rate_runs(w, recs, bytes, secs);
	row_cpu(w, cpu0, cpu1, recs[0] + recs[1]);
		suite_consume_limit(s, w);
	w->ref_rps = ref;
	snprintf(w->note, sizeof(w->note), "%s; Kafka's row read a 3x replicated topic from three brokers",
		 n > 1 ? "each consumer 2 of the 6 partitions" : "all 6 partitions");
	return 0;
}

static int sc_k14_consumer(struct suite *s, struct result *r)
{
	return k14_consumers(s, r, 1, K14_REF_CONSUMER);
}

static int sc_k14_consumers3(struct suite *s, struct result *r)
{
	return k14_consumers(s, r, 3, K14_REF_CONSUMERS3);
}

/* ---- a consumer with librdkafka's defaults ---------------------------------- */

/* The k14 consumer rows' topic read whole by the consumer an application
 * writes from librdkafka's example (a group, subscribe, one
 * rd_kafka_consumer_poll a record, every other setting at its default)
 * and by the k14 rows' tuned simple consumer, alternately, two rounds
 * each, best of each: their ratio in one run, and each one's CPU per
 * record, the broker's and the client's, which say which side binds.
 * Rates are from each consumer's first record to its last: joining the
 * group is a start-up cost, not a rate (the shared broker waits no
 * group.initial.rebalance.delay.ms). */
static int sc_consumer_defaults(struct suite *s, struct result *r)
{
	static const char *const what[2] = { "librdkafka's defaults: a group consumer, one poll a record",
					     "tuned simple consumer (the k14 rows')" };
	struct broker *br = suite_shared_broker(s, r);
	struct { uint64_t recs, bytes; double secs; struct cpu_mark m0, m1; } best[2] = { 0 };
	struct row *w[2];

	if (!br || k14_filled(s, r, br) < 0)
		return r->rc;
	for (int round = 0; round < 2; round++)
		for (int k = 0; k < 2; k++) {
			struct suite_client c;
			struct cpu_mark m0, m1;
			uint64_t recs, bytes;
			double secs;

			suite_client_init(&c, s, br, s->filled_topic, s->filled, 1, k ? "tuned consumer" : "default consumer");
			c.o.group_defaults = !k;
			m0 = cpu_mark(br);
			if (suite_run_clients(&c, 1, r, &recs, &bytes, &secs) < 0)
				return r->rc;
			m1 = cpu_mark(br);
			if (c.run.reading_s > 0)
				secs = c.run.reading_s;
			if (!best[k].secs || (double)recs / secs > (double)best[k].recs / best[k].secs) {
				best[k].recs = recs, best[k].bytes = bytes, best[k].secs = secs;
				best[k].m0 = m0, best[k].m1 = m1;
			}
		}
	for (int k = 0; k < 2; k++) {
		w[k] = suite_row_new(r, "%s", what[k]);
		suite_row_rate(w[k], best[k].recs, best[k].bytes, best[k].secs);
		row_cpu(w[k], best[k].m0, best[k].m1, best[k].recs);
		suite_consume_limit(s, w[k]);
	}
	snprintf(w[0]->note, sizeof(w[0]->note), "%.2fx the tuned consumer's rate, same run (best of 2, "
		 "alternating)", w[1]->rps > 0 ? w[0]->rps / w[1]->rps : 0.0);
	snprintf(w[1]->note, sizeof(w[1]->note), "fetch.wait.max.ms 100, queued.min.messages 1M, a batch a call");
	if (!isnan(w[0]->cpu_ns) && !isnan(w[0]->client_cpu_ns) && !isnan(w[1]->cpu_ns))
		snprintf(r->summary, sizeof(r->summary), "With librdkafka's defaults the client spent %.0f ns of CPU "
			 "a record and the broker %.0f (the tuned consumer: %.0f and %.0f): the %s binds.",
			 w[0]->client_cpu_ns, w[0]->cpu_ns, w[1]->client_cpu_ns, w[1]->cpu_ns,
			 w[0]->client_cpu_ns > w[0]->cpu_ns ? "client" : "broker");
	return 0;
}

static int sc_k14_prodcons(struct suite *s, struct result *r)
{
	struct broker *br = suite_shared_broker(s, r);
	struct suite_client c[2];
	char topic[64];
	uint64_t recs, bytes, precs[SUITE_RUNS], pbytes[SUITE_RUNS], crecs[SUITE_RUNS], cbytes[SUITE_RUNS];
	double secs, psecs[SUITE_RUNS], csecs[SUITE_RUNS];
	struct cpu_mark cpu0, cpu1;
	struct row *w;
	int rc;

	if (!br)
		return r->rc;
	cpu0 = cpu_mark(br);
	for (int k = 0; k < SUITE_RUNS; k++) {
		if (suite_new_topic(s, br, r, K14_PARTS, topic, sizeof(topic)) < 0)
			return r->rc;
		suite_client_init(&c[0], s, br, topic, s->records, 0, k ? "producer (run 2)" : "producer (run 1)");
		suite_client_init(&c[1], s, br, topic, s->records, 1, k ? "consumer (run 2)" : "consumer (run 1)");
		rc = suite_run_clients(c, 2, r, &recs, &bytes, &secs);
		suite_drop_topic(br, topic);
		if (rc < 0)
			return r->rc;
		precs[k] = c[0].run.records, pbytes[k] = c[0].run.bytes, psecs[k] = c[0].run.seconds;
		crecs[k] = c[1].run.records, cbytes[k] = c[1].run.bytes, csecs[k] = c[1].run.seconds;
	}
	cpu1 = cpu_mark(br);
	w = suite_row_new(r, "producer and consumer: produce");
	suite_row_rate_runs(w, precs, pbytes, psecs);
	row_cpu(w, cpu0, cpu1, precs[0] + precs[1]);   /* a record's append and its read */
		suite_produce_limit(s, w, 0);
	w->ref_rps = K14_REF_PRODCONS;
	snprintf(w->note, sizeof(w->note), "the consumer reads the same topic from offset 0 meanwhile");
	w = suite_row_new(r, "producer and consumer: consume");
	suite_row_rate_runs(w, crecs, cbytes, csecs);
		suite_consume_limit(s, w);
	snprintf(w->note, sizeof(w->note), "the consumer's own rate (Kafka's post gives the producer's)");
	return 0;
}

/* ---- Kafka 2014 with replication: three nodes -------------------------------- */

/* The post's single-producer rows with a topic of 6 partitions x 3
 * replicas on three brokers: acks=1 ("3x asynchronous replication") and
 * acks=all ("3x synchronous"). */
#define K14_REF_ASYNC3        786980.0
#define K14_REF_SYNC3         421823.0

static int sc_k14_replicated(struct suite *s, struct result *r)
{
	static const struct {
		int acks;
		const char *label;
		double ref;
		const char *kafka;
	} runs[2] = {
		{ 1, "1 producer, 3x async replication (acks=1)", K14_REF_ASYNC3, "0.958" },
		{ -1, "1 producer, 3x sync replication (acks=all)", K14_REF_SYNC3, "0.513" },
	};
	struct broker cl;
	char dir[300], out[1024], k[16];
	const char *base = getenv("SLUICE_TEST_DIR") && *getenv("SLUICE_TEST_DIR") ? getenv("SLUICE_TEST_DIR")
										    : "/var/tmp";
	int rc = 0;

	/* the one-node row of the same run: k14-producer's when it ran */
	if (!(s->k14_rps > 0) && k14_producers(s, r, 1, K14_REF_PRODUCER) < 0)
		return r->rc;
	if (r->nrows)
		snprintf(r->rows[0].label, sizeof(r->rows[0].label), "1 producer, one node, no replication");
	snprintf(dir, sizeof(dir), "%s/sluice-suite-cluster-XXXXXX", base);
	if (!mkdtemp(dir)) {
		suite_fail(r, -errno, "mkdtemp %s: %s", dir, strerror(errno));
		return r->rc;
	}
	memset(&cl, 0, sizeof(cl));   /* pid 0: not ours to watch (scripts/cluster runs them) */
	if ((rc = suite_cluster_start(dir, s->shards, s->emulating ? &s->em : NULL, cl.bootstrap,
				      sizeof(cl.bootstrap), k, sizeof(k), out, sizeof(out))) < 0) {
		suite_fail(r, rc, "three nodes: %s", out);
		suite_cluster_stop(dir, out, sizeof(out));
		rmdir(dir);
		return r->rc;
	}
	if (k[0])
		fprintf(stderr, "suite: %s: nodes in namespaces sluice%sn1..3, each link shaped to %g Gb/s\n",
			r->sc->name, k, s->em.nic_gbps);
	for (int i = 0; i < 2 && !bench_interrupted && !rc; i++) {
		struct suite_client c;
		char topic[64];
		uint64_t recs[SUITE_RUNS], bytes[SUITE_RUNS];
		double secs[SUITE_RUNS], lat[SUITE_RUNS][3];
		struct row *w;

		for (int k = 0; k < SUITE_RUNS && !rc; k++) {
			snprintf(topic, sizeof(topic), "suite-%s-%d-%d", r->sc->name, (int)getpid(), s->topic_seq++);
			if ((rc = create_topics_rf(cl.bootstrap, topic, 1, 1, K14_PARTS, 3)) < 0) {
				suite_fail(r, rc, "creating topic %s (%d partitions x 3 replicas): %s", topic, K14_PARTS,
				     strerror(-rc));
				break;
			}
			suite_client_init(&c, s, &cl, topic, s->records, 0, runs[i].acks == 1 ? "producer acks=1"
											 : "producer acks=all");
			c.o.acks = runs[i].acks;
			rc = suite_run_clients(&c, 1, r, &recs[k], &bytes[k], &secs[k]);
			suite_drop_topic(&cl, topic);
			lat[k][0] = (double)hist_percentile(&c.run.lat, 50) / 1e6;
			lat[k][1] = (double)hist_percentile(&c.run.lat, 99) / 1e6;
			lat[k][2] = (double)hist_percentile(&c.run.lat, 99.9) / 1e6;
		}
		if (rc < 0)
			break;
		w = suite_row_new(r, "%s", runs[i].label);
		suite_row_rate_runs(w, recs, bytes, secs);
		suite_produce_limit(s, w, 0);
		w->ref_rps = runs[i].ref;
		suite_row_lat_runs(w, (const double (*)[3])lat);
		w->p50 = w->p999 = NAN;
		snprintf(w->note, sizeof(w->note), "three nodes (scripts/cluster%s), RF 3; %.3f of the one-node "
			 "row (Kafka 2014: %s); ack p99 %.1f ms", s->emulating ? " --netns, each link shaped" : "",
			 s->k14_rps > 0 ? w->rps / s->k14_rps : NAN, runs[i].kafka, w->p99);
	}
	if (suite_cluster_stop(dir, out, sizeof(out)) < 0 && !r->rc)
		suite_fail(r, -EIO, "scripts/cluster stop: %s", out);
	rmdir(dir);   /* stop removed what was in it */
	if (r->rc)
		return r->rc;
	snprintf(r->summary, sizeof(r->summary), "RF 3 on three nodes against one node in the same run: acks=1 "
		 "%.3f (Kafka 2014: 0.958), acks=all %.3f (Kafka 2014: 0.513)",
		 r->nrows >= 3 ? r->rows[r->nrows - 2].rps / s->k14_rps : NAN,
		 r->nrows >= 3 ? r->rows[r->nrows - 1].rps / s->k14_rps : NAN);
	return 0;
}

static int sc_k14_latency(struct suite *s, struct result *r)
{
	struct broker *br = suite_shared_broker(s, r);
	struct opts o;
	struct run *run;
	char topic[64];
	double lat[SUITE_RUNS][3];
	uint64_t timed = 0;
	struct row *w;
	int rc = 0;

	if (!br)
		return r->rc;
	suite_base_opts(s, &o);
	o.seconds = s->seconds;
	run = calloc(1, sizeof(*run));
	if (!run)
		return -ENOMEM;
	for (int k = 0; k < SUITE_RUNS && !rc; k++) {
		if (suite_new_topic(s, br, r, K14_PARTS, topic, sizeof(topic)) < 0) {
			rc = r->rc;
			break;
		}
		memset(run, 0, sizeof(*run));
		if ((rc = kafka_e2e(&o, br, topic, run)) < 0)
			suite_fail(r, rc, "e2e at %" PRIu64 " records/s (run %d): %s", s->e2e_rate, k + 1, strerror(-rc));
		suite_drop_topic(br, topic);
		lat[k][0] = (double)hist_percentile(&run->lat, 50) / 1e6;
		lat[k][1] = (double)hist_percentile(&run->lat, 99) / 1e6;
		lat[k][2] = (double)hist_percentile(&run->lat, 99.9) / 1e6;
		timed += run->lat.count;
	}
	if (!rc) {
		w = suite_row_new(r, "end-to-end latency at %" PRIu64 " records/s", s->e2e_rate);
		suite_row_lat_runs(w, (const double (*)[3])lat);
		w->ref_p50 = K14_REF_P50_MS;
		w->ref_p99 = K14_REF_P99_MS;
		w->ref_p999 = K14_REF_P999_MS;
		snprintf(w->note, sizeof(w->note), "%" PRIu64 " records timed in %d runs, send to receive, acks=1, "
			 "linger.ms=1", timed, SUITE_RUNS);
	}
	free(run);
	return r->rc;
}

/* ---- sweeps --------------------------------------------------------------- */

/* One timed produce point: s->seconds of o's records to a new topic. */
static int timed_produce(struct suite *s, struct result *r, struct broker *br, struct opts *o,
			 struct run *run, const char *label)
{
	char topic[64];
	struct cpu_mark cpu0, cpu1;
	int rc;

	if (suite_new_topic(s, br, r, o->partitions, topic, sizeof(topic)) < 0)
		return r->rc;
	o->seconds = s->seconds;
	cpu0 = cpu_mark(br);
	if ((rc = kafka_produce(o, br, topic, 1000000000, run, label)) < 0)
		suite_fail(r, rc, "%s: %s", label, strerror(-rc));
	cpu1 = cpu_mark(br);
	run->broker_cpu_s = cpu1.broker - cpu0.broker;
	run->client_cpu_s = cpu1.clients - cpu0.clients;
	suite_drop_topic(br, topic);
	return rc;
}

static struct series *series_new(struct result *r, const char *xl, const char *y1, const char *y2, int logx)
{
	struct series *p = calloc(1, sizeof(*p));

	if (p) {
		p->xlabel = xl;
		p->y1label = y1;
		p->y2label = y2;
		p->logx = logx;
	}
	r->plot = p;
	return p;
}

static void series_add(struct series *p, double x, double y1, double y2)
{
	if (!p || p->n >= SUITE_POINTS)
		return;
	p->x[p->n] = x;
	p->y1[p->n] = y1;
	p->y2[p->n] = y2;
	p->n++;
}

static int sc_size_sweep(struct suite *s, struct result *r)
{
	static const int quick[] = { 10, 100, 1000, 10000, 100000 };
	static const int full[] = { 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000 };
	const int *sizes = s->quick ? quick : full;
	int n = s->quick ? 5 : 9;
	struct broker *br = suite_shared_broker(s, r);
	struct series *p = series_new(r, "record size (bytes)", "records/s", "MB/s", 1);
	struct run *run = calloc(1, sizeof(*run));

	for (int i = 0; br && run && i < n && !r->rc && !bench_interrupted; i++) {
		struct opts o;
		char label[48];
		struct row *w;

		suite_base_opts(s, &o);
		o.size = sizes[i];
		snprintf(label, sizeof(label), "size-sweep %d B", sizes[i]);
		fprintf(stderr, "suite: size-sweep: %d-byte records for %.1f s\n", sizes[i], s->seconds);
		if (timed_produce(s, r, br, &o, run, label) < 0)
			break;
		w = suite_row_new(r, "%d B", sizes[i]);
		suite_row_rate(w, run->records, run->bytes, run->seconds);
		row_cpu_run(w, run);
		suite_produce_limit(s, w, 0);
		series_add(p, sizes[i], w->rps, w->mbps);
		if (p) {
			p->y2limit = w->limit_mbps;
			p->y2limit_what = w->binds;
		}
	}
	free(run);
	return r->rc;
}

static int sc_partition_sweep(struct suite *s, struct result *r)
{
	static const int counts[] = { 1, 10, 100, 1000, 10000 };
	struct broker br;
	struct series *p = series_new(r, "partitions", "records/s", "MB/s", 1);
	struct run *run = calloc(1, sizeof(*run));
	int rc;

	if (!run)
		return -ENOMEM;
	/* a broker of its own: 10,000 partitions stay behind */
	if ((rc = suite_start_broker(s, &br, NULL)) < 0) {
		free(run);
		suite_fail(r, rc, "starting the broker: %s", strerror(-rc));
		return rc;
	}
	for (int i = 0; i < 5 && !r->rc && !bench_interrupted; i++) {
		struct opts o;
		char label[48];
		struct row *w;

		suite_base_opts(s, &o);
		o.partitions = counts[i];
		snprintf(label, sizeof(label), "partition-sweep %d", counts[i]);
		fprintf(stderr, "suite: partition-sweep: %d partitions for %.1f s\n", counts[i], s->seconds);
		if (timed_produce(s, r, &br, &o, run, label) < 0)
			break;
		w = suite_row_new(r, "%d partition%s", counts[i], counts[i] > 1 ? "s" : "");
		suite_row_rate(w, run->records, run->bytes, run->seconds);
		row_cpu_run(w, run);
		suite_produce_limit(s, w, 0);
		w->p99 = (double)hist_percentile(&run->lat, 99) / 1e6;
		snprintf(w->note, sizeof(w->note), "round robin over the partitions, broker RSS %.0f MiB",
			 (double)run->peak_rss_kb / 1024);
		series_add(p, counts[i], w->rps, w->mbps);
		if (p) {
			p->y2limit = w->limit_mbps;
			p->y2limit_what = w->binds;
		}
	}
	suite_stop_broker(&br, r);
	free(run);
	return r->rc;
}

static int sc_acks(struct suite *s, struct result *r)
{
	static const int acks[] = { 0, 1, -1 };
	struct broker *br = suite_shared_broker(s, r);
	struct run *run = calloc(1, sizeof(*run));

	for (int i = 0; br && run && i < 3 && !r->rc && !bench_interrupted; i++) {
		struct opts o;
		char label[32];
		struct row *w;

		suite_base_opts(s, &o);
		o.acks = acks[i];
		snprintf(label, sizeof(label), "acks=%s", acks[i] < 0 ? "all" : acks[i] ? "1" : "0");
		fprintf(stderr, "suite: acks: %s for %.1f s\n", label, s->seconds);
		if (timed_produce(s, r, br, &o, run, label) < 0)
			break;
		w = suite_row_new(r, "%s", label);
		suite_row_rate(w, run->records, run->bytes, run->seconds);
		row_cpu_run(w, run);
		suite_produce_limit(s, w, 0);
		w->p99 = (double)hist_percentile(&run->lat, 99) / 1e6;
		snprintf(w->note, sizeof(w->note), "%s", acks[i] == 0 ? "no response: the client counts a record "
			 "when it is sent" : acks[i] == 1 ? "the leader's append (one node: all replicas)" :
			 "every in-sync replica (one node: the leader)");
	}
	free(run);
	return r->rc;
}

static int sc_durability(struct suite *s, struct result *r)
{
	static const char *const modes[] = { "write", "sync", "memory" };
	struct run *run = calloc(1, sizeof(*run));

	for (int i = 0; run && i < 3 && !r->rc && !bench_interrupted; i++) {
		struct broker br;
		struct opts o;
		char set[48], label[48];
		struct row *w;
		int rc;

		snprintf(set, sizeof(set), "log.durability=%s", modes[i]);
		if ((rc = suite_start_broker(s, &br, set)) < 0) {
			suite_fail(r, rc, "starting the broker with %s: %s", set, strerror(-rc));
			break;
		}
		suite_base_opts(s, &o);
		o.acks = -1;
		snprintf(label, sizeof(label), "durability %s", modes[i]);
		fprintf(stderr, "suite: durability: %s, acks=all, for %.1f s\n", modes[i], s->seconds);
		if (timed_produce(s, r, &br, &o, run, label) == 0) {
			w = suite_row_new(r, "%s", modes[i]);
			suite_row_rate(w, run->records, run->bytes, run->seconds);
			row_cpu_run(w, run);
		suite_produce_limit(s, w, i == 2);
			w->p99 = (double)hist_percentile(&run->lat, 99) / 1e6;
			snprintf(w->note, sizeof(w->note), "%s", i == 0 ? "acked once written with O_DIRECT "
				 "(survives a broker crash)" : i == 1 ? "acked once fdatasync'd (survives power "
				 "loss)" : "acked in memory (a crash may lose the unwritten tail)");
		}
		suite_stop_broker(&br, r);
	}
	free(run);
	return r->rc;
}

/* ---- stored data ------------------------------------------------------------ */

static double mem_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	return pages > 0 && psz > 0 ? (double)pages * (double)psz : 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of a series' y1 (0 when empty). */
static double series_median_y1(const struct series *p)
{
	double *v = p->n ? malloc(sizeof(*v) * (size_t)p->n) : NULL;
	double m;

	if (!v)
		return 0;
	memcpy(v, p->y1, sizeof(*v) * (size_t)p->n);
	qsort(v, (size_t)p->n, sizeof(*v), cmp_double);
	m = p->n % 2 ? v[p->n / 2] : (v[p->n / 2 - 1] + v[p->n / 2]) / 2;
	free(v);
	return m;
}

static int sc_stored_data(struct suite *s, struct result *r)
{
	struct series *p = series_new(r, "data stored (GB)", "records/s", NULL, 0);
	struct suite_client c;
	struct broker br;
	struct statvfs vfs;
	uint64_t target = s->stored, last = 0, t0, next, recs = 0, bytes = 0;   /* recs, bytes: the run's, once it ran */
	double secs, first_rate = 0, last_rate = 0, median;
	int rc, nfirst = 0, nlast = 0;
	struct row *w;
	char topic[64];

	if ((rc = suite_start_broker(s, &br, NULL)) < 0) {
		suite_fail(r, rc, "starting the broker: %s", strerror(-rc));
		return rc;
	}
	if (statvfs(br.data, &vfs) == 0 && (double)vfs.f_bavail * vfs.f_frsize < (double)target * 1.25) {
		uint64_t room = (uint64_t)((double)vfs.f_bavail * vfs.f_frsize / 1.25);

		fprintf(stderr, "suite: stored-data: %.1f GB asked, %.1f GB free under %s: writing %.1f GB\n",
			(double)target / 1e9, (double)vfs.f_bavail * vfs.f_frsize / 1e9, br.data, (double)room / 1e9);
		snprintf(r->summary, sizeof(r->summary), "Reduced from %.1f GB to %.1f GB: the disk had room for "
			 "no more. ", (double)target / 1e9, (double)room / 1e9);
		target = room;
	}
	if (suite_new_topic(s, &br, r, K14_PARTS, topic, sizeof(topic)) == 0) {
		suite_client_init(&c, s, &br, topic, target / K14_SIZE, 0, "stored-data");
		if ((rc = suite_client_start(&c)) < 0) {
			suite_fail(r, rc, "starting the producer thread: %s", strerror(-rc));
		} else {
			/* sample the acknowledged count once a second */
			t0 = next = bench_now_ns();
			for (;;) {
				struct timespec ts = { 0, 20000000 };
				int done;

				nanosleep(&ts, NULL);
				done = pthread_kill(c.th, 0) != 0 || c.run.live >= c.records;
				if (bench_now_ns() >= next + 1000000000ull || done) {
					uint64_t now = bench_now_ns(), live = c.run.live;
					double dt = (double)(now - next) / 1e9;

					/* the last, partial second counts when long
					 * enough to give a rate */
					if (dt > 0.05 && live > last)
						series_add(p, (double)live * K14_SIZE / 1e9, (double)(live - last) / dt, 0);
					last = live;
					next = now;
				}
				if (done)
					break;
			}
			pthread_join(c.th, NULL);
			(void)t0;
			if (c.rc < 0)
				suite_fail(r, c.rc, "producing: %s", strerror(-c.rc));
		}
	}
	if (!r->rc) {
		recs = c.run.records;
		bytes = c.run.bytes;
		secs = c.run.seconds;
		w = suite_row_new(r, "%.2f GB appended", (double)bytes / 1e9);
		suite_row_rate(w, recs, bytes, secs);
		suite_produce_limit(s, w, 0);
	}
	if (!r->rc && p && p->n) {
		/* flat: the rate over the last tenth of the data against the first */
		for (int i = 0; i < p->n; i++) {
			if (i < (p->n + 9) / 10) {
				first_rate += p->y1[i];
				nfirst++;
			}
			if (i >= p->n - (p->n + 9) / 10) {
				last_rate += p->y1[i];
				nlast++;
			}
		}
		first_rate /= nfirst;
		last_rate /= nlast;
		median = series_median_y1(p);
		w = suite_row_new(r, "median second of the run");
		w->rps = median;
		w->mbps = median * K14_SIZE / 1e6;
		suite_produce_limit(s, w, 0);
		w = suite_row_new(r, "first tenth of the data");
		w->rps = first_rate;
		w->mbps = first_rate * K14_SIZE / 1e6;
		suite_produce_limit(s, w, 0);
		snprintf(w->note, sizeof(w->note), "%.3f of the median (connection and preallocation ramp)",
			 median > 0 ? first_rate / median : 0);
		w = suite_row_new(r, "last tenth of the data");
		w->rps = last_rate;
		w->mbps = last_rate * K14_SIZE / 1e6;
		suite_produce_limit(s, w, 0);
		snprintf(w->note, sizeof(w->note), "%.3f of the median", median > 0 ? last_rate / median : 0);
		snprintf(r->summary + strlen(r->summary), sizeof(r->summary) - strlen(r->summary),
			 "The append rate over the last tenth of the %.1f GB is %.3f of the run's median "
			 "per-second rate (1.0 is flat); the log grew to %.2f times this machine's memory.",
			 (double)bytes / 1e9, median > 0 ? last_rate / median : 0, (double)bytes / mem_bytes());
	}
	suite_stop_broker(&br, r);
	return r->rc;
}

/* ---- backlog drain ------------------------------------------------------- */

static int sc_backlog_drain(struct suite *s, struct result *r)
{
	struct series *p = series_new(r, "seconds since the consumer started", "consumer lag (records)", NULL, 0);
	struct broker *br = suite_shared_broker(s, r);
	volatile int stop_p = 0, stop_c = 0;
	struct suite_client c[2];
	char topic[64];
	uint64_t rate, backlog = 0, t_cons = 0, t_caught = 0, cons_at_catch = 0, wait_ns;
	double limit_s = s->backlog_seconds * 10 + 30;
	int started = 0;
	struct row *w;

	if (!br || suite_new_topic(s, br, r, K14_PARTS, topic, sizeof(topic)) < 0)
		return r->rc;
	if (!s->k14_rps) {
		/* the pace is half of one producer's rate: measure it */
		struct opts o;
		struct run *run = calloc(1, sizeof(*run));

		suite_base_opts(s, &o);
		fprintf(stderr, "suite: backlog-drain: measuring one producer's rate for %.1f s\n", s->seconds);
		if (!run || timed_produce(s, r, br, &o, run, "backlog-drain: calibrate") < 0) {
			free(run);
			return r->rc ? r->rc : -ENOMEM;
		}
		s->k14_rps = run->seconds > 0 ? (double)run->records / run->seconds : 0;
		free(run);
	}
	rate = (uint64_t)(s->k14_rps / 2);
	if (rate < 1000)
		rate = 1000;
	suite_client_init(&c[0], s, br, topic, 1000000000, 0, "backlog-drain: producer");
	c[0].o.produce_rate = rate;
	c[0].run.stop = &stop_p;
	suite_client_init(&c[1], s, br, topic, KAFKA_CHECKED_MAX + 1, 1, "backlog-drain: consumer");
	c[1].run.stop = &stop_c;
	fprintf(stderr, "suite: backlog-drain: producing at %" PRIu64 " records/s (half of one producer's "
		"%.0f); consumer starts after %.1f s\n", rate, s->k14_rps, s->backlog_seconds);
	if (suite_client_start(&c[0]) < 0) {
		suite_fail(r, -EAGAIN, "starting the producer thread");
		return r->rc;
	}
	started = 1;
	{
		uint64_t t0 = bench_now_ns();

		wait_ns = (uint64_t)(s->backlog_seconds * 1e9);
		while (bench_now_ns() - t0 < wait_ns && pthread_kill(c[0].th, 0) == 0 && !bench_interrupted) {
			struct timespec ts = { 0, 10000000 };

			nanosleep(&ts, NULL);
		}
	}
	backlog = c[0].run.live;
	if (suite_client_start(&c[1]) < 0) {
		suite_fail(r, -EAGAIN, "starting the consumer thread");
	} else {
		started = 2;
		t_cons = bench_now_ns();
		/* sample the lag every 100 ms until caught up (within 100 ms of
		 * production), then 1 s more */
		for (;;) {
			struct timespec ts = { 0, 100000000 };
			uint64_t now, prod, cons, lag;

			nanosleep(&ts, NULL);
			now = bench_now_ns();
			prod = c[0].run.live;
			cons = c[1].run.live;
			lag = prod > cons ? prod - cons : 0;
			series_add(p, (double)(now - t_cons) / 1e9, (double)lag, 0);
			if (!t_caught && lag <= rate / 10) {
				t_caught = now;
				cons_at_catch = cons;
				fprintf(stderr, "suite: backlog-drain: caught up after %.2f s\n",
					(double)(now - t_cons) / 1e9);
			}
			if ((t_caught && now - t_caught > 1000000000ull) || bench_interrupted ||
			    (double)(now - t_cons) / 1e9 > limit_s || pthread_kill(c[1].th, 0) != 0 ||
			    pthread_kill(c[0].th, 0) != 0)
				break;
		}
	}
	stop_p = 1;
	if (started >= 1)
		pthread_join(c[0].th, NULL);
	/* the consumer reads what the producer had acknowledged, then stops */
	if (started == 2) {
		uint64_t end = bench_now_ns() + 30000000000ull;

		while (c[1].run.live < c[0].run.records && bench_now_ns() < end && pthread_kill(c[1].th, 0) == 0) {
			struct timespec ts = { 0, 10000000 };

			nanosleep(&ts, NULL);
		}
		stop_c = 1;
		pthread_join(c[1].th, NULL);
	}
	suite_drop_topic(br, topic);
	if (c[0].rc < 0)
		suite_fail(r, c[0].rc, "producer: %s", strerror(-c[0].rc));
	if (c[1].rc < 0)
		suite_fail(r, c[1].rc, "consumer: %s", strerror(-c[1].rc));
	if (!r->rc && c[1].run.live != c[0].run.records)
		suite_fail(r, -EIO, "the consumer read %" PRIu64 " records of the %" PRIu64 " acknowledged",
		     (uint64_t)c[1].run.live, c[0].run.records);
	if (r->rc)
		return r->rc;
	w = suite_row_new(r, "producer (paced)");
	suite_row_rate(w, c[0].run.records, c[0].run.bytes, c[0].run.seconds);
		suite_produce_limit(s, w, 0);
	w = suite_row_new(r, "backlog when the consumer started");
	snprintf(w->note, sizeof(w->note), "%" PRIu64 " records (%.1f s of production)", backlog,
		 (double)backlog / (double)rate);
	if (t_caught) {
		double tc = (double)(t_caught - t_cons) / 1e9;

		w = suite_row_new(r, "consumer while catching up");
		suite_row_rate(w, cons_at_catch, cons_at_catch * K14_SIZE, tc);
		suite_consume_limit(s, w);
		w = suite_row_new(r, "net drain rate");
		w->rps = (double)backlog / tc;
		w->mbps = w->rps * K14_SIZE / 1e6;
		suite_consume_limit(s, w);
		snprintf(w->note, sizeof(w->note), "caught up in %.2f s", tc);
		snprintf(r->summary, sizeof(r->summary), "With the producer held at %" PRIu64 " records/s, a "
			 "backlog of %" PRIu64 " records (%.1f s of production) was drained in %.2f s: net drain "
			 "%.0f records/s, the consumer reading %.0f records/s meanwhile.", rate, backlog,
			 (double)backlog / (double)rate, tc, (double)backlog / tc, (double)cons_at_catch / tc);
	} else {
		w = suite_row_new(r, "did not catch up");
		snprintf(w->note, sizeof(w->note), "lag still above %" PRIu64 " records after %.0f s",
			 rate / 10, limit_s);
		snprintf(r->summary, sizeof(r->summary), "The consumer did not catch up within %.0f s with the "
			 "producer held at %" PRIu64 " records/s.", limit_s, rate);
	}
	return 0;
}

/* ---- peers ------------------------------------------------------------------- */

/* One round of the peers: Sluice, then Redis Streams, then NATS JetStream,
 * each producing, consuming back and end to end, into figs. */
static int peers_round(struct suite *s, struct result *r, struct broker *br, struct peer_params *pp,
		       struct peer_result *pr, struct run *run, struct peer_fig *figs)
{
	struct peer_fig *f = &figs[0];
	struct suite_client c[2];
	struct opts o;
	uint64_t recs, bytes;
	double secs;
	char topic[64];
	int rc;

	if (suite_new_topic(s, br, r, K14_PARTS, topic, sizeof(topic)) < 0)
		return r->rc;
	/* Sluice: produce, consume back, e2e — as the peers do */
	snprintf(f->name, sizeof(f->name), "sluice");
	snprintf(f->version, sizeof(f->version), "this build");
	snprintf(f->durability, sizeof(f->durability), "log.durability=write (acked once written with "
		 "O_DIRECT), acks=1");
	suite_client_init(&c[0], s, br, topic, s->peer_records, 0, "peers: sluice produce");
	if (suite_run_clients(c, 1, r, &recs, &bytes, &secs) < 0)
		return r->rc;
	f->prod_rps = (double)recs / secs;
	suite_client_init(&c[1], s, br, topic, recs, 1, "peers: sluice consume");
	if (suite_run_clients(&c[1], 1, r, &recs, &bytes, &secs) < 0)
		return r->rc;
	f->cons_rps = (double)recs / secs;
	suite_drop_topic(br, topic);
	if (suite_new_topic(s, br, r, K14_PARTS, topic, sizeof(topic)) < 0)
		return r->rc;
	suite_base_opts(s, &o);
	o.seconds = s->seconds;
	memset(run, 0, sizeof(*run));
	rc = kafka_e2e(&o, br, topic, run);
	suite_drop_topic(br, topic);
	if (rc < 0) {
		suite_fail(r, rc, "sluice e2e: %s", strerror(-rc));
		return r->rc;
	}
	f->p50 = (double)hist_percentile(&run->lat, 50) / 1e6;
	f->p99 = (double)hist_percentile(&run->lat, 99) / 1e6;
	f->p999 = (double)hist_percentile(&run->lat, 99.9) / 1e6;
	f->ran = 1;
	for (int i = 1; i <= 2 && !bench_interrupted; i++) {
		f = &figs[i];
		memset(pr, 0, sizeof(*pr));
		fprintf(stderr, "suite: peers: %s\n", i == 1 ? "Redis Streams" : "NATS JetStream");
		rc = i == 1 ? peer_redis_run(pp, pr) : peer_nats_run(pp, pr);
		snprintf(f->name, sizeof(f->name), "%s", i == 1 ? "redis-streams" : "nats-jetstream");
		snprintf(f->version, sizeof(f->version), "%s", pr->version);
		snprintf(f->durability, sizeof(f->durability), "%s", pr->durability);
		if (rc < 0) {
			snprintf(f->error, sizeof(f->error), "%s", pr->error[0] ? pr->error : strerror(-rc));
			suite_fail(r, rc, "%s: %s", f->name, f->error);
			continue;
		}
		f->prod_rps = pr->produce_seconds > 0 ? (double)pr->produce_records / pr->produce_seconds : 0;
		f->cons_rps = pr->consume_seconds > 0 ? (double)pr->consume_records / pr->consume_seconds : 0;
		f->p50 = (double)hist_percentile(&pr->e2e, 50) / 1e6;
		f->p99 = (double)hist_percentile(&pr->e2e, 99) / 1e6;
		f->p999 = (double)hist_percentile(&pr->e2e, 99.9) / 1e6;
		f->ran = 1;
	}
	return 0;
}

/* The peers, SUITE_RUNS rounds (each Sluice, Redis, NATS in turn): each
 * figure the rounds' mean, each round's kept. */
static int sc_peers(struct suite *s, struct result *r)
{
	struct broker *br = suite_shared_broker(s, r);
	struct peer_params pp = { .records = s->peer_records, .size = K14_SIZE, .rate = s->e2e_rate,
				  .e2e_seconds = s->seconds };
	struct peer_result *pr = calloc(1, sizeof(*pr));
	struct run *run = calloc(1, sizeof(*run));
	struct peer_fig (*round)[3] = calloc(SUITE_RUNS, sizeof(*round));
	struct peer_fig *f;

	pp.dir = getenv("SLUICE_TEST_DIR") && *getenv("SLUICE_TEST_DIR") ? getenv("SLUICE_TEST_DIR") : "/var/tmp";
	if (!br || !pr || !run || !round)
		goto out;
	for (int k = 0; k < SUITE_RUNS && !r->rc && !bench_interrupted; k++) {
		fprintf(stderr, "suite: peers: round %d of %d\n", k + 1, SUITE_RUNS);
		if (peers_round(s, r, br, &pp, pr, run, round[k]) < 0)
			goto out;
	}
	for (int i = 0; i < 3; i++) {
		f = &r->peers[i];
		*f = round[0][i];
		f->ran = 1;
		for (int k = 0; k < SUITE_RUNS; k++)
			if (!round[k][i].ran && f->ran) {
				f->ran = 0;
				if (round[k][i].name[0])
					*f = round[k][i];   /* the round that failed says why */
			}
		if (!f->ran)
			continue;
		f->prod_rps = f->cons_rps = f->p50 = f->p99 = f->p999 = 0;
		for (int k = 0; k < SUITE_RUNS; k++) {
			const struct peer_fig *g = &round[k][i];

			f->run_prod[k] = g->prod_rps, f->run_cons[k] = g->cons_rps, f->run_p99[k] = g->p99;
			f->prod_rps += g->prod_rps / SUITE_RUNS;
			f->cons_rps += g->cons_rps / SUITE_RUNS;
			f->p50 += g->p50 / SUITE_RUNS;
			f->p99 += g->p99 / SUITE_RUNS;
			f->p999 += g->p999 / SUITE_RUNS;
		}
	}
	for (int i = 0; i < 3; i++) {
		struct row *w;

		f = &r->peers[i];
		if (!f->ran)
			continue;
		w = suite_row_new(r, "%s produce", f->name);
		w->rps = f->prod_rps;
		w->mbps = f->prod_rps * K14_SIZE / 1e6;
		memcpy(w->run_rps, f->run_prod, sizeof(w->run_rps));
		suite_produce_limit(s, w, 0);
		w = suite_row_new(r, "%s consume", f->name);
		w->rps = f->cons_rps;
		w->mbps = f->cons_rps * K14_SIZE / 1e6;
		memcpy(w->run_rps, f->run_cons, sizeof(w->run_rps));
		suite_consume_limit(s, w);
		w = suite_row_new(r, "%s end-to-end at %" PRIu64 " records/s", f->name, s->e2e_rate);
		w->p50 = f->p50;
		w->p99 = f->p99;
		w->p999 = f->p999;
		memcpy(w->run_p99, f->run_p99, sizeof(w->run_p99));
		snprintf(w->note, sizeof(w->note), "%s %s", f->version, f->durability);
	}
	if (s->emulating)
		snprintf(r->summary, sizeof(r->summary), "The peers ran on loopback, unshaped: only Sluice's "
			 "broker was behind the emulated NIC and disk.");
out:
	free(round);
	free(pr);
	free(run);
	return r->rc;
}

/* ---- the scenario table ----------------------------------------------------- */

static const struct scenario scenarios[] = {
	{ "k14-producer", "Kafka 2014: one producer", sc_k14_producer },
	{ "k14-producers3", "Kafka 2014: three producers", sc_k14_producers3 },
	{ "k14-consumer", "Kafka 2014: one consumer", sc_k14_consumer },
	{ "k14-consumers3", "Kafka 2014: three consumers", sc_k14_consumers3 },
	{ "k14-prodcons", "Kafka 2014: producer and consumer at once", sc_k14_prodcons },
	{ "k14-latency", "Kafka 2014: end-to-end latency", sc_k14_latency },
	{ "k14-replicated", "Kafka 2014: one producer, 3x replication on three nodes", sc_k14_replicated },
	{ "consumer-defaults", "A consumer with librdkafka's defaults against the tuned one", sc_consumer_defaults },
	{ "size-sweep", "Record size sweep", sc_size_sweep },
	{ "partition-sweep", "Partition count sweep", sc_partition_sweep },
	{ "acks", "acks=0, 1, all", sc_acks },
	{ "durability", "log.durability=write, sync, memory", sc_durability },
	{ "stored-data", "Throughput versus stored data", sc_stored_data },
	{ "backlog-drain", "Backlog drain under load", sc_backlog_drain },
	{ "peers", "Peers: Redis Streams and NATS JetStream", sc_peers },
};
#define NSCEN ((int)(sizeof(scenarios) / sizeof(scenarios[0])))

/* Below this much free space where the brokers keep their logs a scenario
 * is not started: a full disk fails every later one too. */
#define SUITE_MIN_FREE 4e9

static int disk_short(struct suite *s, struct result *r)
{
	const char *dir = getenv("SLUICE_TEST_DIR") && *getenv("SLUICE_TEST_DIR") ? getenv("SLUICE_TEST_DIR") :
			  "/var/tmp";
	struct statvfs v;
	double avail;

	(void)s;
	if (statvfs(dir, &v) < 0)
		return 0;
	avail = (double)v.f_bavail * (double)v.f_frsize;
	if (avail >= SUITE_MIN_FREE)
		return 0;
	suite_fail(r, -ENOSPC, "only %.1f GB free under %s (at least %.0f GB wanted): free some space or point "
	     "SLUICE_TEST_DIR elsewhere", avail / 1e9, dir, SUITE_MIN_FREE / 1e9);
	return 1;
}

int bench_suite(int argc, char **argv)
{
	static struct suite suite;
	struct suite *s = &suite;
	int want[NSCEN] = { 0 }, rc, nwant = 0, k = 0, failed = 0;
	uint64_t t0 = bench_now_ns();
	size_t used = 0;

	if ((rc = suite_parse_args(s, argc, argv, want, scenarios, NSCEN)) >= 0)
		return rc;
	if (!s->stored)
		s->stored = (uint64_t)mem_bytes();   /* as much as the machine's memory: the log outgrows the page cache */
	for (int i = 0; i < argc && used < sizeof(s->cmdline) - 1; i++)
		used += (size_t)snprintf(s->cmdline + used, sizeof(s->cmdline) - used, "%s%s",
					 i ? " " : "sluice-bench ", argv[i]);
	if ((rc = suite_mkdir_p(s->out)) < 0) {
		fprintf(stderr, "sluice-bench suite: cannot create %s: %s\n", s->out, strerror(-rc));
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if (s->emulating) {
		char err[512];
		const char *dir = getenv("SLUICE_TEST_DIR") && *getenv("SLUICE_TEST_DIR") ?
				  getenv("SLUICE_TEST_DIR") : "/var/tmp";

		emulate_cleanup_stale();
		if ((rc = emulate_setup(&s->prof, dir, &s->em, err, sizeof(err))) < 0) {
			fprintf(stderr, "sluice-bench suite: --emulate %s: %s\n", s->prof_path, err);
			return 1;
		}
		fprintf(stderr, "suite: emulating %s: broker at %s behind %s%s%s\n", s->prof_path,
			s->em.broker_ip, s->em.netns, s->em.notes[0] ? "; " : "", s->em.notes);
	}
	suite_set_limits(s);
	for (int i = 0; i < NSCEN; i++)
		nwant += want[i];
	fprintf(stderr, "suite: %d scenario%s, profile %s (%s), results in %s\n", nwant, nwant > 1 ? "s" : "",
		s->prof_path, s->prof.description, s->out);
	for (int i = 0; i < NSCEN && !bench_interrupted; i++) {
		struct result *r;
		uint64_t ts;

		if (!want[i])
			continue;
		r = &s->res[s->nres++];
		r->sc = &scenarios[i];
		r->ran = 1;
		fprintf(stderr, "suite: [%d/%d] %s: %s (%.0f s so far)\n", ++k, nwant, r->sc->name, r->sc->title,
			(double)(bench_now_ns() - t0) / 1e9);
		ts = bench_now_ns();
		if (disk_short(s, r))
			rc = r->rc;
		else
			rc = r->sc->run(s, r);
		if (rc < 0 && !r->rc)
			suite_fail(r, rc, "%s", strerror(-rc));
		r->seconds = (double)(bench_now_ns() - ts) / 1e9;
		failed += r->rc < 0;
		fprintf(stderr, "suite: [%d/%d] %s %s in %.1f s\n", k, nwant, r->sc->name,
			r->rc < 0 ? "FAILED" : "done", r->seconds);
	}
	if (s->shared_up && broker_stop(&s->shared) < 0) {
		fprintf(stderr, "suite: the shared broker did not stop cleanly (its directory %s is kept)\n",
			s->shared.root);
		failed++;
	}
	if (bench_interrupted) {
		fprintf(stderr, "suite: interrupted: the report covers what ran\n");
		failed++;
	}
	rc = suite_write(s, (double)(bench_now_ns() - t0) / 1e9);
	if (s->emulating)
		emulate_teardown(&s->em);   /* after the report, which names what it set up */
	for (int i = 0; i < s->nres; i++)
		free(s->res[i].plot);
	if (rc < 0)
		return 1;
	return failed ? 1 : 0;
}
