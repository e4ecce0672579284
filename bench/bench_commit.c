/* bench/bench_commit.c — `sluice-bench commit` (options in bench_groups.c,
 * bench/groups.h): OffsetCommit through librdkafka's high-level consumer.
 *
 * Thread: the main thread starts the broker, fills the topic, waits for
 * the group and prints progress; one thread per consumer (committer_main,
 * each its own rd_kafka_t, serving its rebalance callback in
 * rd_kafka_consumer_poll). A committer's figures are its own until the
 * main thread joins it. librdkafka adds its own threads.
 *
 * commit  one consumer (then --consumers ... in parallel, one group) with
 *     its partitions assigned by subscribe (and paused) commits explicit
 *     offsets with synchronous rd_kafka_commit, --commit-partitions per
 *     request, for --seconds; commits/s and the latency of each call. The
 *     committed offsets are read back with rd_kafka_committed at the end.
 */
#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/groups.h"
#include "bench/hist.h"
#include "bench/kafka.h"

#define VERIFY_MSG_MAX 200   /* a committer's verify_msg */

struct committer {
	struct client_errs errs;    /* first: the error callback's opaque */
	const struct gopts *o;
	const struct broker *br;
	const char *topic, *group;
	int idx;
	pthread_t th;
	rd_kafka_t *rk;
	rd_kafka_topic_partition_list_t *assigned;
	volatile int assigned_n;    /* -1 until the first assignment */
	volatile uint64_t last_cb;
	volatile int go, stop, done;
	uint64_t commits, errors, rebalances;
	rd_kafka_resp_err_t first_err;
	struct hist lat;
	int verify_bad;
	char verify_msg[VERIFY_MSG_MAX];
	int64_t *last_off;          /* per partition of the topic */
};

static void commit_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
				void *opaque)
{
	struct committer *c = opaque;

	if (c->go)
		c->rebalances++;
	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		rd_kafka_assign(rk, parts);
		if (c->assigned)
			rd_kafka_topic_partition_list_destroy(c->assigned);
		c->assigned = rd_kafka_topic_partition_list_copy(parts);
		rd_kafka_pause_partitions(rk, parts);
		c->assigned_n = parts->cnt;
	} else {
		rd_kafka_assign(rk, NULL);
		c->assigned_n = 0;
	}
	c->last_cb = bench_now_ns();
}

static void *committer_main(void *arg)
{
	struct committer *c = arg;
	const struct gopts *o = c->o;
	rd_kafka_topic_partition_list_t *l = NULL;
	uint64_t seq = 0;
	int k;

	/* serve the rebalance callbacks until the group is stable */
	while (!c->go && !c->stop) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 10);

		if (m)
			rd_kafka_message_destroy(m);
	}
	if (c->stop || !c->assigned || !c->assigned->cnt)
		goto out;
	k = o->commit_parts < c->assigned->cnt ? o->commit_parts : c->assigned->cnt;
	l = rd_kafka_topic_partition_list_new(k);
	while (!c->stop && !bench_interrupted) {
		uint64_t t;
		rd_kafka_resp_err_t e;

		rd_kafka_topic_partition_list_destroy(l);
		l = rd_kafka_topic_partition_list_new(k);
		for (int i = 0; i < k; i++) {
			const rd_kafka_topic_partition_t *ap =
				&c->assigned->elems[(seq * (uint64_t)k + (uint64_t)i) % (uint64_t)c->assigned->cnt];
			/* offsets 1..1000, all below the high watermark */
			int64_t off = (int64_t)((seq % 1000) + 1);

			rd_kafka_topic_partition_list_add(l, ap->topic, ap->partition)->offset = off;
		}
		t = bench_now_ns();
		e = rd_kafka_commit(c->rk, l, 0);
		hist_add(&c->lat, bench_now_ns() - t);
		for (int i = 0; !e && i < l->cnt; i++)
			e = l->elems[i].err;
		if (e) {
			if (!c->errors++)
				c->first_err = e;
		} else {
			c->commits++;
			for (int i = 0; i < l->cnt; i++)
				c->last_off[l->elems[i].partition] = l->elems[i].offset;
		}
		seq++;
		if ((seq & 63) == 0) {
			rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 0);

			if (m)
				rd_kafka_message_destroy(m);
		}
	}
	/* read back what was committed last */
	{
		rd_kafka_topic_partition_list_t *q = rd_kafka_topic_partition_list_copy(c->assigned);
		rd_kafka_resp_err_t e = rd_kafka_committed(c->rk, q, 10000);

		if (e) {
			c->verify_bad++;
			snprintf(c->verify_msg, sizeof(c->verify_msg), "committed(): %s", rd_kafka_err2name(e));
		}
		for (int i = 0; !e && i < q->cnt; i++) {
			int32_t p = q->elems[i].partition;

			if (c->last_off[p] >= 0 && q->elems[i].offset != c->last_off[p]) {
				if (!c->verify_bad++)
					snprintf(c->verify_msg, sizeof(c->verify_msg), "partition %d: committed "
						 "offset reads back as %" PRId64 ", last commit was %" PRId64 " (%s)",
						 p, q->elems[i].offset, c->last_off[p],
						 rd_kafka_err2name(q->elems[i].err));
			}
		}
		rd_kafka_topic_partition_list_destroy(q);
	}
out:
	if (l)
		rd_kafka_topic_partition_list_destroy(l);
	c->done = 1;
	return NULL;
}

/* per_part records into every partition, so committed offsets 1..1000 lie
 * below the high watermark. */
static int fill_topic(const struct broker *br, const char *topic, int parts, int per_part)
{
	struct client_errs errs = { 0 };
	rd_kafka_conf_t *c = base_conf(br->bootstrap, &errs);
	rd_kafka_t *rk;
	rd_kafka_topic_t *rkt;
	char err[256], buf[16] = "commit-bench";
	int rc = 0;

	if (!c || conf_set(c, "linger.ms", "5") < 0) {
		if (c)
			rd_kafka_conf_destroy(c);
		return -EINVAL;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "commit: producer: %s\n", err);
		return -EINVAL;
	}
	if ((rc = check_cluster(rk, br)) < 0) {
		rd_kafka_destroy(rk);
		return rc;
	}
	rkt = rd_kafka_topic_new(rk, topic, NULL);
	for (int i = 0; i < per_part && !rc; i++)
		for (int p = 0; p < parts && !rc; p++)
			while (rd_kafka_produce(rkt, p, RD_KAFKA_MSG_F_COPY, buf, sizeof(buf), NULL, 0, NULL) == -1) {
				if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
					rc = -EIO;
					break;
				}
				rd_kafka_poll(rk, 10);
			}
	if (rd_kafka_flush(rk, 30000) || rc) {
		fprintf(stderr, "commit: could not produce %d records per partition\n", per_part);
		rc = -EIO;
	}
	rd_kafka_topic_destroy(rkt);
	rd_kafka_destroy(rk);
	return rc;
}

struct commit_result {
	int consumers;
	uint64_t commits, errors, rebalances, verify_bad;
	double seconds;
	struct hist lat;
	char first_err[200];
	/* "consumer <i>: " and the consumer's own verify_msg, whole */
	char verify_msg[sizeof("consumer -2147483648: ") + VERIFY_MSG_MAX];
};

static int run_commit(const struct gopts *o, struct broker *br, const char *topic, int n, struct commit_result *r)
{
	struct committer *cs = calloc((size_t)n, sizeof(*cs));
	char group[128], buf[32], err[256];
	uint64_t t0, next_tick, settle = (uint64_t)(o->settle_s * 1e9), start;
	int rc = 0, started = 0;

	memset(r, 0, sizeof(*r));
	hist_init(&r->lat);
	r->consumers = n;
	if (!cs)
		return -ENOMEM;
	snprintf(group, sizeof(group), "bench-commit-%d-%d", (int)getpid(), n);
	fprintf(stderr, "commit: group %s: %d consumer%s subscribe to %s\n", group, n, n > 1 ? "s" : "", topic);
	for (int i = 0; i < n && !rc; i++) {
		struct committer *c = &cs[i];
		rd_kafka_conf_t *conf = base_conf(br->bootstrap, &c->errs);
		rd_kafka_topic_partition_list_t *tl;

		c->o = o;
		c->br = br;
		c->topic = topic;
		c->group = group;
		c->idx = i;
		c->assigned_n = -1;
		hist_init(&c->lat);
		c->last_off = malloc((size_t)o->partitions * sizeof(int64_t));
		if (!conf || !c->last_off) {
			rc = -ENOMEM;
			break;
		}
		for (int p = 0; p < o->partitions; p++)
			c->last_off[p] = -1;
		snprintf(buf, sizeof(buf), "%d", o->heartbeat_ms);
		if (conf_set(conf, "heartbeat.interval.ms", buf) < 0) {
			rd_kafka_conf_destroy(conf);
			rc = -EINVAL;
			break;
		}
		snprintf(buf, sizeof(buf), "%d", o->session_ms);
		if (conf_set(conf, "session.timeout.ms", buf) < 0 || conf_set(conf, "group.id", group) < 0 ||
		    conf_set(conf, "enable.auto.commit", "false") < 0 ||
		    conf_set(conf, "partition.assignment.strategy", "range") < 0) {
			rd_kafka_conf_destroy(conf);
			rc = -EINVAL;
			break;
		}
		rd_kafka_conf_set_rebalance_cb(conf, commit_rebalance_cb);
		rd_kafka_conf_set_opaque(conf, c);
		c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
		if (!c->rk) {
			fprintf(stderr, "commit: consumer: %s\n", err);
			rc = -EINVAL;
			break;
		}
		rd_kafka_poll_set_consumer(c->rk);
		if ((rc = check_cluster(c->rk, br)) < 0)
			break;
		tl = rd_kafka_topic_partition_list_new(1);
		rd_kafka_topic_partition_list_add(tl, topic, RD_KAFKA_PARTITION_UA);
		if (rd_kafka_subscribe(c->rk, tl)) {
			fprintf(stderr, "commit: subscribe failed\n");
			rc = -EIO;
		}
		rd_kafka_topic_partition_list_destroy(tl);
		if (!rc && pthread_create(&c->th, NULL, committer_main, c))
			rc = -EAGAIN;
		if (!rc)
			started++;
	}
	/* a stable group: every partition assigned, no callback for settle_s */
	t0 = bench_now_ns();
	next_tick = t0 + 1000000000ull;
	while (!rc) {
		uint64_t now = bench_now_ns(), last = 0;
		int sum = 0, all = 1;

		for (int i = 0; i < n; i++) {
			int a = cs[i].assigned_n;

			if (a < 0 || (a == 0 && n <= o->partitions))
				all = 0;
			sum += a > 0 ? a : 0;
			if (cs[i].last_cb > last)
				last = cs[i].last_cb;
		}
		if (all && sum == o->partitions && now - last >= settle)
			break;
		if (now >= next_tick) {
			fprintf(stderr, "commit: waiting for the group: %d of %d partitions assigned\n", sum,
				o->partitions);
			next_tick += 1000000000ull;
			if (!broker_alive(br))
				rc = -ECHILD;
		}
		if (now - t0 > (uint64_t)(o->timeout_s * 1e9)) {
			fprintf(stderr, "commit: the group of %d is NOT STABLE after %.0f s (%d of %d partitions "
				"assigned)\n", n, o->timeout_s, sum, o->partitions);
			rc = -ETIMEDOUT;
		}
		if (bench_interrupted)
			rc = -EINTR;
		sleep_ns(10000000);
	}
	start = bench_now_ns();
	if (!rc) {
		uint64_t end = start + (uint64_t)(o->seconds * 1e9), last_c = 0, last_t = start;

		fprintf(stderr, "commit: %d consumer%s committing for %.1f s, %d partition%s per commit\n", n,
			n > 1 ? "s" : "", o->seconds, o->commit_parts, o->commit_parts > 1 ? "s" : "");
		for (int i = 0; i < n; i++)
			cs[i].go = 1;
		next_tick = start + 1000000000ull;
		while (bench_now_ns() < end && !bench_interrupted) {
			uint64_t now = bench_now_ns(), c = 0, e = 0;

			sleep_ns(10000000);
			if (now < next_tick)
				continue;
			for (int i = 0; i < n; i++)
				c += cs[i].commits, e += cs[i].errors;
			fprintf(stderr, "commit: %.0f s  %" PRIu64 " commits, %.0f/s now, %" PRIu64 " refused\n",
				(double)(now - start) / 1e9, c, (double)(c - last_c) / ((double)(now - last_t) / 1e9), e);
			last_c = c;
			last_t = now;
			next_tick += 1000000000ull;
			if (!broker_alive(br)) {
				rc = -ECHILD;
				break;
			}
		}
	}
	for (int i = 0; i < n; i++)
		cs[i].stop = 1;
	for (int i = 0; i < n; i++) {
		struct committer *c = &cs[i];

		if (i < started)
			pthread_join(c->th, NULL);
		if (!r->seconds && !rc)
			r->seconds = (double)(bench_now_ns() - start) / 1e9;
		r->commits += c->commits;
		r->errors += c->errors;
		r->rebalances += c->rebalances;
		if (c->errors && !r->first_err[0])
			snprintf(r->first_err, sizeof(r->first_err), "consumer %d: %s", i,
				 rd_kafka_err2name(c->first_err));
		if (c->verify_bad && !r->verify_bad)
			snprintf(r->verify_msg, sizeof(r->verify_msg), "consumer %d: %s", i, c->verify_msg);
		r->verify_bad += (uint64_t)c->verify_bad;
		hist_merge(&r->lat, &c->lat);
		if (c->rk) {
			rd_kafka_consumer_close(c->rk);
			rd_kafka_destroy(c->rk);
		}
		if (c->assigned)
			rd_kafka_topic_partition_list_destroy(c->assigned);
		free(c->last_off);
	}
	free(cs);
	if (!rc) {
		fprintf(stderr, "commit: %d consumer%s: %" PRIu64 " commits in %.2f s, %" PRIu64 " refused\n", n,
			n > 1 ? "s" : "", r->commits, r->seconds, r->errors);
		if (r->errors)
			fprintf(stderr, "commit: COMMITS REFUSED: first %s\n", r->first_err);
		if (r->verify_bad)
			fprintf(stderr, "commit: WRONG COMMITTED OFFSET: %s\n", r->verify_msg);
		if (r->rebalances)
			fprintf(stderr, "commit: %" PRIu64 " rebalance callbacks during the run\n", r->rebalances);
		if (r->errors || r->verify_bad)
			rc = -EBADMSG;
	}
	return rc;
}

static int cmd_commit(const struct gopts *o)
{
	static struct commit_result res[MAX_RUNS];
	struct broker br;
	char topic[64];
	int rc, rc2, n = 0;

	if ((rc = open_gbroker(o, &br)) < 0)
		return 1;
	snprintf(topic, sizeof(topic), "commit-%d", (int)getpid());
	if (!(rc = create_topics(br.bootstrap, topic, 1, 1, o->partitions)))
		rc = fill_topic(&br, topic, o->partitions, 1000);
	for (int i = 0; i < o->nruns && (!rc || rc == -EBADMSG); i++, n++) {
		rc2 = run_commit(o, &br, topic, o->consumers[i], &res[i]);
		if (rc2 && (!rc || rc2 != -EBADMSG))
			rc = rc2;
	}
	if (!o->bootstrap && (rc2 = broker_stop(&br)) && !rc)
		rc = rc2;
	if (!n || (rc && rc != -EBADMSG))
		return 1;
	printf("# sluice-bench commit: OffsetCommit through librdkafka %s, synchronous rd_kafka_commit of "
	       "explicit offsets, %d partition%s per commit, topic of %d partitions, one group per run "
	       "(range, heartbeat.interval.ms=%d), %.1f s per run; broker %s; latency in ms\n",
	       rd_kafka_version_str(), o->commit_parts, o->commit_parts > 1 ? "s" : "", o->partitions,
	       o->heartbeat_ms, o->seconds,
	       br.shards < 0 ? br.bootstrap : (br.shards ? "shards set" : "shards=0 (one per core)"));
	{
		struct { const char *name; int prec; double v[MAX_RUNS]; } rows[] = {
			{ "consumers", 0, { 0 } }, { "commits", 0, { 0 } }, { "commits_per_s", 0, { 0 } },
			{ "latency_p50_ms", 3, { 0 } }, { "latency_p99_ms", 3, { 0 } },
			{ "latency_p99.9_ms", 3, { 0 } }, { "latency_max_ms", 3, { 0 } },
			{ "refused", 0, { 0 } }, { "rebalances_during_run", 0, { 0 } },
			{ "wrong_committed_offsets", 0, { 0 } },
		};

		for (int i = 0; i < n; i++) {
			const struct commit_result *r = &res[i];

			rows[0].v[i] = r->consumers;
			rows[1].v[i] = (double)r->commits;
			rows[2].v[i] = r->seconds > 0 ? (double)r->commits / r->seconds : 0;
			rows[3].v[i] = gms(hist_percentile(&r->lat, 50));
			rows[4].v[i] = gms(hist_percentile(&r->lat, 99));
			rows[5].v[i] = gms(hist_percentile(&r->lat, 99.9));
			rows[6].v[i] = gms(r->lat.max);
			rows[7].v[i] = (double)r->errors;
			rows[8].v[i] = (double)r->rebalances;
			rows[9].v[i] = (double)r->verify_bad;
		}
		for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
			printf("commit %-24s", rows[k].name);
			for (int i = 0; i < n; i++)
				printf(" %12.*f", rows[k].prec, rows[k].v[i]);
			putchar('\n');
		}
		for (int i = 0; i < n; i++) {
			if (res[i].errors)
				printf("# %d consumers: first refused commit: %s\n", res[i].consumers, res[i].first_err);
			if (res[i].verify_bad)
				printf("# %d consumers: %s\n", res[i].consumers, res[i].verify_msg);
		}
	}
	return rc ? 1 : 0;
}

int bench_commit(int argc, char **argv)
{
	return bench_groups(G_COMMIT, "commit", argc, argv, cmd_commit);
}
