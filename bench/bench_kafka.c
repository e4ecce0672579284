/* bench/bench_kafka.c — `sluice-bench produce|consume|e2e|idle`: the broker
 * driven through librdkafka, a real Kafka client over TCP.
 *
 * Thread: the benchmark's main thread drives the producer and serves its
 * delivery reports (rd_kafka_poll); e2e runs its consumer on one more
 * thread. librdkafka adds its own threads.
 *
 * Each run starts its own broker unless --bootstrap names one
 * (kafka_broker.c says how); the loads are kafka_run.c's, the clients'
 * configuration and topic admin kafka_client.c's.
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
#include <ftw.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/hist.h"
#include "bench/kafka.h"

/* ---- small helpers ------------------------------------------------------ */

static double rate_of(uint64_t n, double s)
{
	return s > 0 ? (double)n / s : 0;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
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
		"  --client-set KEY=VALUE  a librdkafka property of every client the run\n"
		"                          makes (repeatable; e.g. socket.nagle.disable=true);\n"
		"                          the run's own settings (acks, linger.ms, batch\n"
		"                          sizes, idempotence) are set after it and win\n"
		"  --records N             records (default 5000000; suffix K/M)\n"
		"  --size BYTES            record value size (default 100)\n"
		"  --partitions P          partitions of the topic (default 6; idle: 100)\n"
		"  --replication-factor N  produce, consume, e2e: replicas of each of the\n"
		"                          topic's partitions (default 1; N > 1 needs a\n"
		"                          cluster of N nodes: --bootstrap)\n"
		"  --topics T              idle: topics (default 100)\n"
		"  --acks N                0, 1 or -1 (default 1)\n"
		"  --compression CODEC     none|gzip|snappy|lz4|zstd (default none)\n"
		"  --client librdkafka|wide\n"
		"                          produce (consume: its pre-produce): librdkafka\n"
		"                          (default), or a raw Kafka\n"
		"                          client that sends every partition it has records\n"
		"                          for in one ProduceRequest, as the Java client does\n"
		"                          (librdkafka sends one partition a request); acks\n"
		"                          1 or -1, no compression; e2e: that producer and\n"
		"                          a raw Fetch reader (bench/kafka_fetch.c)\n"
		"  --linger-ms MS          producer linger.ms (default 5; e2e 1)\n"
		"  --seconds S             produce: stop sending after S s; e2e: duration\n"
		"                          (default 10)\n"
		"  --rate R                e2e: records/s (default 200000); produce: pace at\n"
		"                          R records/s (default: as fast as the client queues)\n"
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
		"  --compare-mock N        produce: N rounds (1..9) of the same producer\n"
		"                          against librdkafka's own in-process mock cluster\n"
		"                          (one broker, in memory) and against the broker,\n"
		"                          alternating; records/s of each round, the best\n"
		"                          of each and their ratio\n"
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
	o->replication_factor = 1;
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
		} else if (!strcmp(name, "--client-set")) {
			if (!strchr(val, '=') || *val == '=' || o->nclient_sets >= 16)
				return bad_option(o->cmd, name, "expects KEY=VALUE (at most 16)");
			o->client_sets[o->nclient_sets++] = val;
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
		} else if (!strcmp(name, "--compare-mock")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > 9)
				return bad_option(o->cmd, name, "expects rounds in [1, 9]");
			o->compare_mock = (int)v;
		} else if (!strcmp(name, "--size")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > 900000)
				return bad_option(o->cmd, name, "expects bytes in [1, 900000]");
			o->size = (int)v;
		} else if (!strcmp(name, "--partitions")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > MAX_PARTS)
				return bad_option(o->cmd, name, "expects a count in [1, 100000]");
			o->partitions = (int)v;
			parts_set = 1;
		} else if (!strcmp(name, "--replication-factor")) {
			if (parse_count(val, &v) < 0 || v < 1 || v > 16)
				return bad_option(o->cmd, name, "expects a count in [1, 16]");
			o->replication_factor = (int)v;
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
			if (o->mode == M_PRODUCE)
				o->produce_rate = o->rate;   /* paced: the ack latency of a load the client keeps up with */
		} else if (!strcmp(name, "--compression")) {
			if (strcmp(val, "none") && strcmp(val, "gzip") && strcmp(val, "snappy") &&
			    strcmp(val, "lz4") && strcmp(val, "zstd"))
				return bad_option(o->cmd, name, "expects none, gzip, snappy, lz4 or zstd");
			o->compression = val;
		} else if (!strcmp(name, "--client")) {
			if (strcmp(val, "librdkafka") && strcmp(val, "wide"))
				return bad_option(o->cmd, name, "expects librdkafka or wide");
			o->client_wide = !strcmp(val, "wide");
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
	if (o->replication_factor > 1 && (o->mode == M_IDLE || !o->bootstrap))
		return bad_option(o->cmd, "--replication-factor", "more than 1 only for produce, consume and "
				  "e2e against a cluster (--bootstrap)");
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
	if (o->compare_mock && (o->mode != M_PRODUCE || o->compare_shards || o->compare_idempotent ||
				o->compare_transactional || o->transactional || o->idempotent))
		return bad_option(o->cmd, "--compare-mock", "only for produce, plain (the mock is one broker "
				  "without transactions here), alone");
	if (o->compare_mock && o->replication_factor > 1)
		return bad_option(o->cmd, "--compare-mock", "replication factor 1 only (the mock is one broker)");
	if (o->client_wide && (o->mode == M_IDLE || o->compare_idempotent ||
			       o->compare_transactional || o->transactional || o->idempotent || o->compare_shards))
		return bad_option(o->cmd, "--client", "wide only for produce (and consume's pre-produce) and e2e, "
				  "plain, alone");
	if (o->client_wide && (o->acks == 0 || strcmp(o->compression, "none")))
		return bad_option(o->cmd, "--client", "wide sends uncompressed batches and reads every "
				  "answer: --acks 1 or -1, --compression none");
	if (o->client_wide && o->records > 50000000)
		return bad_option(o->cmd, "--client", "wide keeps every record's due time: --records 50M at most");
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
	char shards[400], rf[40] = "";

	if (br->shards < 0)
		snprintf(shards, sizeof(shards), "external broker %s", br->bootstrap);
	else
		snprintf(shards, sizeof(shards), "shards=%d%s", br->shards, br->shards ? "" : " (one per core)");
	if (o->replication_factor > 1)
		snprintf(rf, sizeof(rf), " (replication factor %d)", o->replication_factor);
	printf("# sluice-bench %s: %d-byte records, %d partitions%s, acks=%d, compression=%s, %s%s%s", o->cmd,
	       o->size, o->partitions, rf, o->acks, o->compression, shards, extra ? ", " : "", extra ? extra : "");
	for (int i = 0; i < o->nclient_sets; i++)
		printf("%s%s", i ? " " : ", clients: ", o->client_sets[i]);
	if (o->client_wide)
		printf(", client: wide (raw Kafka protocol, every ready partition in one ProduceRequest%s)",
		       o->mode == M_E2E ? "; a raw Fetch v4 reader" : "");
	printf("; MB = 10^6 bytes of record values; latency in ms\n");
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
		if (!(rc = create_topics_rf(br->bootstrap, topic, 1, 1, o->partitions, o->replication_factor)))
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

/* --compare-mock N: librdkafka's mock cluster, then the broker, N times. */
static int compare_mock(const struct opts *o)
{
	struct broker br;
	double rate[9][2], best[2] = { 0, 0 };
	char extra[200];

	for (int round = 0; round < o->compare_mock; round++)
		for (int k = 0; k < 2; k++) {
			struct run *pr = &runs[k];

			fprintf(stderr, "kafka: --compare-mock: round %d of %d, %s\n", round + 1, o->compare_mock,
				k ? "sluice" : "librdkafka's mock cluster");
			if (k) {
				if (produce_consume(o, o->shards, 0, pr, &runs[3], &br) < 0)
					return 1;
			} else {
				struct mock m;
				char topic[64];
				int rc;

				snprintf(topic, sizeof(topic), "mock-%d-%d", (int)getpid(), round);
				if (mock_open(&m, topic, o->partitions) < 0)
					return 1;
				/* (o->client_wide: kafka_produce hands it to the wide client) */
				rc = kafka_produce(o, &m.br, topic, o->records, pr, "produce (mock)");
				mock_close(&m);
				if (rc < 0)
					return 1;
			}
			rate[round][k] = rate_of(pr->records, pr->seconds);
			if (rate[round][k] > best[k])
				best[k] = rate[round][k];
		}
	snprintf(extra, sizeof(extra), "--compare-mock %d (librdkafka %s's in-process mock cluster, then the "
		 "broker, alternating; linger.ms=%d)", o->compare_mock, rd_kafka_version_str(),
		 o->linger_ms >= 0 ? o->linger_ms : 5);
	print_header(o, &br, extra);
	printf("%-30s %12s %12s %8s\n", "metric", "mock", "sluice", "ratio");
	for (int round = 0; round < o->compare_mock; round++)
		printf("produce_records_per_s_round%d  %12.0f %12.0f %8.3f\n", round + 1, rate[round][0],
		       rate[round][1], rate[round][0] > 0 ? rate[round][1] / rate[round][0] : 0);
	printf("produce_records_per_s_best     %12.0f %12.0f %8.3f", best[0], best[1],
	       best[0] > 0 ? best[1] / best[0] : 0);
	print_target(best[0] > 0 ? best[1] / best[0] : 0, 1.0, 0);
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
	if (o->compare_mock)
		return compare_mock(o);
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
		if (o->transactional)
			snprintf(extra, sizeof(extra), "transactional, %d records per transaction", o->transactional);
		else if (o->produce_rate)
			snprintf(extra, sizeof(extra), "paced at %" PRIu64 " records/s", o->produce_rate);
		print_header(o, &br, o->transactional || o->produce_rate ? extra : NULL);
		if (rss_pid(o, &br) || !o->bootstrap)
			printf("%s broker_peak_rss_MiB %.0f\n", b,
			       (double)(consume ? cr->peak_rss_kb : pr->peak_rss_kb) / 1024);
		if (consume) {
			print_rate_rows(b, cr, target);
		} else {
			print_rate_rows(b, pr, o->produce_rate ? 0 : target);   /* paced: the rate is asked, no target */
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
	if (!(rc = create_topics_rf(br.bootstrap, topic, 1, 1, o->partitions, o->replication_factor)))
		rc = o->client_wide ? kafka_e2e_wide(o, &br, topic, r) : kafka_e2e(o, &br, topic, r);
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
	client_props(o.client_sets, o.nclient_sets);
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
